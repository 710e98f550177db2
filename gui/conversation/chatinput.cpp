#include "conversation/chatinput.h"

#include <QKeyEvent>

namespace neural::gui {

ChatInput::ChatInput(QWidget* parent) : QPlainTextEdit(parent) {
    setPlaceholderText(tr("Message (Enter sends, Shift+Enter for a new line)"));
    setAccessibleName(tr("Message input"));
    setTabChangesFocus(true);
    setMaximumHeight(140);
}

void ChatInput::keyPressEvent(QKeyEvent* event) {
    const bool enter = event->key() == Qt::Key_Return || event->key() == Qt::Key_Enter;
    if (enter && !(event->modifiers() & Qt::ShiftModifier)) {
        emit sendRequested();
        return;
    }
    if (event->key() == Qt::Key_Escape) {
        emit stopRequested();
        return;
    }
    QPlainTextEdit::keyPressEvent(event);
}

}  // namespace neural::gui
