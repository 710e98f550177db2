// Where the desktop app keeps its files (QStandardPaths, per user; Windows:
// %LOCALAPPDATA%\Neural\neural-desktop for both, Linux: ~/.local/share/Neural/neural-desktop and
// ~/.config/Neural/neural-desktop). The uninstaller leaves them in place.
//   AppLocalDataLocation/conversations.sqlite    chats (ConversationStore)
//   AppLocalDataLocation/logs/neural-desktop.log rotating log
//   AppLocalDataLocation/demo                    the built-in demo model (random weights)
//   AppLocalDataLocation/models                  checkpoints and expert stores the model
//                                                switcher lists (app/modelcatalog.h)
//   AppConfigLocation/profiles.json              profiles (ProfileStore)
//   AppConfigLocation/settings.ini               window layout, theme, API and chat settings
//                                                (appSettings; keys in settings/appsettingsdialog.h)
// NEURAL_DESKTOP_HOME overrides the base folder of all of them (tests, portable installs).
#pragma once

#include <QString>

#include <filesystem>

namespace neural::gui {

QString appDataDir();
QString appConfigDir();
QString conversationsPath();
QString logDir();
QString demoModelDir();
QString modelsDir();  // created on first use
QString profilesPath();
// Where an installation keeps the demo model's tokenizer.json, relative to the install prefix
// (bin/ holds the executables).
inline constexpr const char* kInstalledDemoTokenizer = "share/neural/demo/tokenizer.json";
// The tokenizer.json the demo model is made with: $NEURAL_DEMO_TOKENIZER, else the installed
// copy (kInstalledDemoTokenizer), else the one scripts/setup.sh fetched into the source tree
// (resources/demo-tokenizer), else "".
QString demoTokenizerPath();

// Where the app keeps the learned expert statistics of a model (LoadOptions::routing_stats):
// "auto" beside a store (a store is Neural's own file), else in the app's data folder
// (AppLocalDataLocation/routing-stats/NAME-HASH.json): never in a checkpoint folder, which may
// belong to another app (LM Studio, Ollama, the Hugging Face cache). "off" gives an empty path,
// a file its own path; $NEURAL_ROUTING_STATS_DIR, when set, wins as in the engine.
std::filesystem::path desktopRoutingStatsPath(const QString& setting, const QString& model,
                                              const QString& store);

}  // namespace neural::gui

#include <QSettings>
#include <memory>

namespace neural::gui {
// The app's settings (theme, server port, window layout): an INI file in appConfigDir().
std::unique_ptr<QSettings> appSettings();
}  // namespace neural::gui
