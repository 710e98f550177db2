// The message editor: Enter sends, Shift+Enter inserts a newline, Esc asks to stop the reply.
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

protected:
    void keyPressEvent(QKeyEvent* event) override;
};

}  // namespace neural::gui
