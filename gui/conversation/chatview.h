// The messages of a conversation as a column of message widgets (Markdown, a collapsible
// "Thought for N s" reasoning section, per-message stats, Copy / Copy code / Edit / Regenerate),
// bound to a MessageModel. Follows the end of the conversation while the user is at the bottom.
#pragma once

#include <QFrame>
#include <QList>
#include <QScrollArea>
#include <QTextBrowser>

class QLabel;
class QToolButton;
class QPushButton;
class QVBoxLayout;

namespace neural::gui {

class MessageModel;

// A read-only QTextBrowser as tall as its text (no scroll bars of its own). While a reply
// streams, new text is appended at the end of the document, so only the last paragraph is laid
// out again; the Markdown rendering replaces it once the reply is complete.
class MessageBody : public QTextBrowser {
    Q_OBJECT
public:
    explicit MessageBody(QWidget *parent = nullptr);
    // Plain streaming text: appends when `text` extends what is shown, else replaces it.
    void showStreaming(const QString &text);
    void showMarkdown(const QString &markdown, const QColor &codeBackground);
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    void resizeEvent(QResizeEvent *event) override;

private:
    void fitHeight();
    QString m_plain;  // what showStreaming shows
    bool m_streaming = false;
};

class MessageWidget : public QFrame {
    Q_OBJECT
public:
    explicit MessageWidget(QWidget *parent = nullptr);
    void update(const QString &role, const QString &content, const QString &reasoning,
                const QJsonObject &stats, bool streaming, bool canRegenerate);
    QString content() const { return m_content; }
    MessageBody *body() const { return m_body; }

signals:
    void editRequested();
    void regenerateRequested();

private:
    QLabel *m_role;
    QLabel *m_stats;
    QToolButton *m_thought;
    QLabel *m_reasoning;
    MessageBody *m_body;
    QPushButton *m_copy;
    QPushButton *m_copyCode;
    QPushButton *m_edit;
    QPushButton *m_regenerate;
    QString m_content;
    QString m_renderedContent;
    QString m_renderedReasoning;
};

// "42 tokens · 12.3 tok/s · first token 0.21 s" from a reply's stats.
QString statsLine(const QJsonObject &stats);

class ChatView : public QScrollArea {
    Q_OBJECT
public:
    explicit ChatView(MessageModel *model, QWidget *parent = nullptr);
    MessageWidget *messageWidget(int row) const { return m_widgets.value(row); }
    int messageCount() const { return static_cast<int>(m_widgets.size()); }

signals:
    void editRequested(int row);
    void regenerateRequested(int row);

private:
    void rebuild();
    void insertRows(int first, int last);
    void removeRows(int first, int last);
    void refresh(int row);
    void refreshAll();
    void followEnd();

    MessageModel *m_model;
    QWidget *m_column;
    QVBoxLayout *m_layout;
    QList<MessageWidget *> m_widgets;
};

}  // namespace neural::gui
