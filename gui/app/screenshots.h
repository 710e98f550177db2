// `neural-desktop --screenshots DIR`: once the model is ready (or failed), saves into DIR
//   first-start.png  the window before any message
//   chat.png         a reply with its reasoning open, a highlighted code block, a table and a
//                    quote (its text is given: the demo model's weights are random)
//   edit-versions.png  an earlier message of yours edited (2/2, the old branch kept)
//   attachments.png  a message with a file attached, the context meter under the box
//   continue.png     a reply cut by the token limit, with its Continue button
//   branch.png       a branch of that conversation, opened beside it in the list
//   assistants.png   the settings panel's Assistant box open on saved assistants
//   main.png         after a short exchange
//   telemetry.png    the telemetry dock after it
//   profiles.png     the profile dialog (the engine settings)
//   settings.png     the Settings page (the app's settings)
//   benchmark.png    the Benchmark panel after a one-pair A/B of Stock and Optimized
//   wizard.png       the setup wizard with the loaded model's folder checked
//   wizard-fit.png   the wizard's fit page (the plan for this PC)
//   unload.png       the model unloaded from the switcher (a conversation open)
// then quits: exit status 0 when the model loaded and answered and the benchmark ran, 1
// otherwise. For the docs' images (run under Xvfb or QT_QPA_PLATFORM=offscreen).
#pragma once

#include <QString>

namespace neural::gui {

class MainWindow;
void takeScreenshots(MainWindow* window, const QString& dir);

}  // namespace neural::gui
