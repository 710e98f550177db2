#include "common/wheelguard.h"

#include <QAbstractSpinBox>
#include <QApplication>
#include <QComboBox>
#include <QEvent>
#include <QWidget>

namespace neural::gui {

namespace {

// The spin box or combo box a wheel event is for (its line edit gets it first), or null.
QWidget* valueWidget(QObject* o) {
    auto* w = qobject_cast<QWidget*>(o);
    for (int depth = 0; w && depth < 2; ++depth, w = w->parentWidget())
        if (qobject_cast<QAbstractSpinBox*>(w) || qobject_cast<QComboBox*>(w)) return w;
    return nullptr;
}

}  // namespace

void installWheelGuard() {
    if (!qApp || qApp->findChild<WheelGuard*>(QString(), Qt::FindDirectChildrenOnly)) return;
    qApp->installEventFilter(new WheelGuard(qApp));
}

bool WheelGuard::eventFilter(QObject* watched, QEvent* event) {
    if (event->type() == QEvent::Polish) {
        // Qt's default (Qt::WheelFocus) gives them the focus on a wheel turn, then the value.
        auto* w = qobject_cast<QWidget*>(watched);
        if (w && w->focusPolicy() == Qt::WheelFocus &&
            (qobject_cast<QAbstractSpinBox*>(w) || qobject_cast<QComboBox*>(w)))
            w->setFocusPolicy(Qt::StrongFocus);
    } else if (event->type() == QEvent::Wheel) {
        QWidget* target = valueWidget(watched);
        if (target && !target->hasFocus() && target->isEnabled()) {
            // Ignored and handled: QApplication passes it on to the parents (the scroll area).
            event->ignore();
            return true;
        }
    }
    return QObject::eventFilter(watched, event);
}

}  // namespace neural::gui
