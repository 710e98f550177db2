// `neural-desktop --screenshots DIR`: once the model is ready (or failed), saves chat.png (a
// reply with its reasoning open, a highlighted code block, a table and a quote; its text is
// given, since the demo model's weights are random), main.png (with a short exchange), telemetry.png, profiles.png and wizard.png into DIR, then quits:
// exit status 0 when the model loaded and answered, 1 otherwise.
// For the README images (run under Xvfb or QT_QPA_PLATFORM=offscreen).
#pragma once

#include <QString>

namespace neural::gui {

class MainWindow;
void takeScreenshots(MainWindow *window, const QString &dir);

}  // namespace neural::gui
