// docs/images from the GUI tests: with NEURAL_DOC_SCREENSHOTS set to a folder, a test saves a
// widget as the user sees it at that step (the pictures that need a scene the app's own
// screenshot mode cannot stage, such as other apps' model folders or an MCP server).
#pragma once

#include <QAbstractItemView>
#include <QApplication>
#include <QComboBox>
#include <QPainter>
#include <QPixmap>
#include <QString>
#include <QTest>
#include <QWidget>

namespace neural::gui::test {

// Saves `w` as NAME in the folder; with `box`, its list is open over it (a popup is a window of
// its own, which grab() leaves out: its picture is drawn where it lies). True when not asked for.
inline bool docShot(QWidget* w, const char* name, QComboBox* box = nullptr) {
    const QString dir = qEnvironmentVariable("NEURAL_DOC_SCREENSHOTS");
    if (dir.isEmpty()) return true;
    QApplication::processEvents();
    QTest::qWait(200);
    if (box) {
        box->showPopup();
        QTest::qWait(200);
    }
    const QPixmap window = w->grab();
    QPixmap picture = window;
    if (box) {
        QWidget* popup = box->view()->window();
        if (popup->isVisible()) {
            // A list reaching past the window's edge is shown whole: the picture grows.
            const QRect at(w->mapFromGlobal(popup->mapToGlobal(QPoint(0, 0))), popup->size());
            const QRect all = w->rect().united(at);
            picture = QPixmap(all.size() * window.devicePixelRatio());
            picture.setDevicePixelRatio(window.devicePixelRatio());
            picture.fill(w->palette().color(QPalette::Window));
            QPainter painter(&picture);
            painter.drawPixmap(-all.topLeft(), window);
            painter.drawPixmap(at.topLeft() - all.topLeft(), popup->grab());
        }
        box->hidePopup();
    }
    return picture.save(dir + QLatin1Char('/') + QLatin1String(name));
}

}  // namespace neural::gui::test
