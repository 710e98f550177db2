// `neural-desktop --screenshots DIR`: once the model is ready (or failed), saves main.png
// (with a short exchange), telemetry.png, profiles.png and wizard.png into DIR, then quits.
// For the README images (run under Xvfb or QT_QPA_PLATFORM=offscreen).
#pragma once

#include <QString>

namespace neural::gui {

class MainWindow;
void takeScreenshots(MainWindow *window, const QString &dir);

}  // namespace neural::gui
