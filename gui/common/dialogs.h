// Message boxes as wide as their title. QMessageBox sizes itself from its text alone, so a short
// question under a longer title ("Delete conversation") got a box narrower than the title, and
// the title bar cut it ("Delete conv..."). These wrappers take QMessageBox's static functions'
// arguments and widen the box to the title's width first.
#pragma once

#include <QMessageBox>
#include <QString>

class QDialog;
class QWidget;

namespace neural::gui {

// The width a dialog needs for `title` in its title bar: the text in the title bar's font plus
// room for the window icon and the title bar's buttons.
int titleBarWidth(const QWidget* dialog, const QString& title);

// Widens `box` (not yet shown) to titleBarWidth of its window title.
void fitTitle(QMessageBox* box);

QMessageBox::StandardButton askQuestion(
    QWidget* parent, const QString& title, const QString& text,
    QMessageBox::StandardButtons buttons = QMessageBox::Yes | QMessageBox::No,
    QMessageBox::StandardButton defaultButton = QMessageBox::NoButton);
QMessageBox::StandardButton showWarning(
    QWidget* parent, const QString& title, const QString& text,
    QMessageBox::StandardButtons buttons = QMessageBox::Ok,
    QMessageBox::StandardButton defaultButton = QMessageBox::NoButton);
QMessageBox::StandardButton showInformation(
    QWidget* parent, const QString& title, const QString& text,
    QMessageBox::StandardButtons buttons = QMessageBox::Ok,
    QMessageBox::StandardButton defaultButton = QMessageBox::NoButton);
QMessageBox::StandardButton showCritical(
    QWidget* parent, const QString& title, const QString& text,
    QMessageBox::StandardButtons buttons = QMessageBox::Ok,
    QMessageBox::StandardButton defaultButton = QMessageBox::NoButton);

}  // namespace neural::gui
