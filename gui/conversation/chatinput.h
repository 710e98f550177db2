// The message editor: Enter sends, Shift+Enter inserts a newline, Esc asks to stop the reply.
// Files dropped on it are offered as attachments (filesDropped), not pasted as their paths.
#pragma once

#include <QPlainTextEdit>

namespace neural::gui {

class ChatInput : public QPlainTextEdit {
    Q_OBJECT
public:
    explicit ChatInput(QWidget* parent = nullptr);

signals:
    void sendRequested();
    void stopRequested();
    void filesDropped(const QStringList& paths);

protected:
    void keyPressEvent(QKeyEvent* event) override;
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dragMoveEvent(QDragMoveEvent* event) override;
    void dropEvent(QDropEvent* event) override;
};

}  // namespace neural::gui
