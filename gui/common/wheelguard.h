// Spin boxes and combo boxes take the mouse wheel only when they have the keyboard focus: a
// page scrolled with the wheel must not change the values the pointer passes over (the wizard's
// CPU threads went 1 -> 0 that way). Unfocused, the wheel goes on to the scroll area around
// them; a click or Tab gives them the focus (and the wheel).
#pragma once

#include <QObject>

namespace neural::gui {

// Installs the guard on the application (once; later calls do nothing). Every window calls it,
// so dialogs shown before the main window (the wizard) have it too.
void installWheelGuard();

class WheelGuard : public QObject {
    Q_OBJECT
public:
    using QObject::QObject;

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;
};

}  // namespace neural::gui
