// Collects streamed reasoning / content text and releases it at most every `intervalMs`
// (default 33 ms, ~30 Hz), so the chat view re-renders at a steady rate instead of once per token
// (a token every few ms on a fast machine). GUI thread only.
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QString>
#include <QTimer>

namespace neural::gui {

class DeltaBatcher : public QObject {
    Q_OBJECT
public:
    explicit DeltaBatcher(int intervalMs = 33, QObject* parent = nullptr);

    void addReasoning(const QString& text);
    void addContent(const QString& text);
    // Releases what is pending now (end of a reply) and stops the timer.
    void flush();
    int intervalMs() const { return m_timer.interval(); }
    // The text pieces (one per add, about one per token) in the release being signalled.
    int releasedPieces() const { return m_releasedPieces; }

signals:
    // Text added since the last release (either may be empty, not both).
    void released(const QString& reasoning, const QString& content);

private:
    void arm();

    QTimer m_timer;
    QString m_reasoning;
    QString m_content;
    int m_pieces = 0;
    int m_releasedPieces = 0;
};

}  // namespace neural::gui
