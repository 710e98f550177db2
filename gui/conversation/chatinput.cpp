#include "conversation/chatinput.h"

#include <QDragEnterEvent>
#include <QDropEvent>
#include <QKeyEvent>
#include <QMimeData>
#include <QUrl>

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

namespace {
QStringList localFiles(const QMimeData* mime) {
    QStringList paths;
    if (!mime || !mime->hasUrls()) return paths;
    for (const QUrl& url : mime->urls())
        if (url.isLocalFile()) paths << url.toLocalFile();
    return paths;
}
}  // namespace

void ChatInput::dragEnterEvent(QDragEnterEvent* event) {
    if (!localFiles(event->mimeData()).isEmpty())
        event->acceptProposedAction();
    else
        QPlainTextEdit::dragEnterEvent(event);
}

void ChatInput::dragMoveEvent(QDragMoveEvent* event) {
    if (!localFiles(event->mimeData()).isEmpty())
        event->acceptProposedAction();
    else
        QPlainTextEdit::dragMoveEvent(event);
}

void ChatInput::dropEvent(QDropEvent* event) {
    const QStringList files = localFiles(event->mimeData());
    if (files.isEmpty()) {
        QPlainTextEdit::dropEvent(event);
        return;
    }
    event->acceptProposedAction();
    emit filesDropped(files);
}

}  // namespace neural::gui
