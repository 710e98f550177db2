#include "common/dialogs.h"

#include <QApplication>
#include <QFontMetrics>
#include <QGridLayout>
#include <QSpacerItem>
#include <QStyle>

#include <algorithm>

namespace neural::gui {

int titleBarWidth(const QWidget* dialog, const QString& title) {
    // The title bar's font is the window system's; the application font is the closest
    // measure Qt offers, and a bold title is wider: measure it bold.
    QFont font = QApplication::font("QMdiSubWindowTitleBar");
    font.setBold(true);
    const QStyle* style = dialog ? dialog->style() : QApplication::style();
    const int icon = style->pixelMetric(QStyle::PM_TitleBarHeight);
    // The icon on the left, close (and on some systems minimise / maximise) on the right.
    return QFontMetrics(font).horizontalAdvance(title) + 5 * std::max(icon, 24);
}

void fitTitle(QMessageBox* box) {
    const int width = titleBarWidth(box, box->windowTitle());
    // QMessageBox fixes its size from its contents at show time: a spacer across the bottom of
    // its grid is the documented-by-practice way to make it wider.
    if (auto* grid = qobject_cast<QGridLayout*>(box->layout())) {
        grid->addItem(new QSpacerItem(width, 0, QSizePolicy::Minimum, QSizePolicy::Expanding),
                      grid->rowCount(), 0, 1, grid->columnCount());
    }
    box->setMinimumWidth(width);
}

namespace {
QMessageBox::StandardButton run(QMessageBox::Icon icon, QWidget* parent, const QString& title,
                                const QString& text, QMessageBox::StandardButtons buttons,
                                QMessageBox::StandardButton defaultButton) {
    QMessageBox box(icon, title, text, buttons, parent);
    box.setDefaultButton(defaultButton);
    fitTitle(&box);
    const int r = box.exec();
    return r == -1 ? QMessageBox::Cancel : static_cast<QMessageBox::StandardButton>(r);
}
}  // namespace

QMessageBox::StandardButton askQuestion(QWidget* parent, const QString& title, const QString& text,
                                        QMessageBox::StandardButtons buttons,
                                        QMessageBox::StandardButton defaultButton) {
    return run(QMessageBox::Question, parent, title, text, buttons, defaultButton);
}

QMessageBox::StandardButton showWarning(QWidget* parent, const QString& title, const QString& text,
                                        QMessageBox::StandardButtons buttons,
                                        QMessageBox::StandardButton defaultButton) {
    return run(QMessageBox::Warning, parent, title, text, buttons, defaultButton);
}

QMessageBox::StandardButton showInformation(QWidget* parent, const QString& title,
                                            const QString& text,
                                            QMessageBox::StandardButtons buttons,
                                            QMessageBox::StandardButton defaultButton) {
    return run(QMessageBox::Information, parent, title, text, buttons, defaultButton);
}

QMessageBox::StandardButton showCritical(QWidget* parent, const QString& title, const QString& text,
                                         QMessageBox::StandardButtons buttons,
                                         QMessageBox::StandardButton defaultButton) {
    return run(QMessageBox::Critical, parent, title, text, buttons, defaultButton);
}

}  // namespace neural::gui
