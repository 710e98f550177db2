// Where the desktop app keeps its files (QStandardPaths, per user):
//   AppDataLocation/conversations.sqlite   chats (ConversationStore)
//   AppDataLocation/logs/neural-desktop.log rotating log
//   AppDataLocation/demo                    the built-in demo model (random weights)
//   AppConfigLocation/profiles.json         profiles (ProfileStore)
// NEURAL_DESKTOP_HOME overrides the base folder of all of them (tests, portable installs).
#pragma once

#include <QString>

namespace neural::gui {

QString appDataDir();
QString appConfigDir();
QString conversationsPath();
QString logDir();
QString demoModelDir();
QString profilesPath();
// The tokenizer.json the demo model is made with: $NEURAL_DEMO_TOKENIZER, else the one
// scripts/setup.sh installs under resources/demo-tokenizer (source tree), else "".
QString demoTokenizerPath();

}  // namespace neural::gui

#include <QSettings>
#include <memory>

namespace neural::gui {
// The app's settings (theme, server port, window layout): an INI file in appConfigDir().
std::unique_ptr<QSettings> appSettings();
}  // namespace neural::gui
