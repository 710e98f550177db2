// The keys of the app's own settings (appSettings(), common/paths.h): the rooms that read or write
// one include this, Settings > Settings... (settings/appsettingsdialog.h) edits most of them.
#pragma once

namespace neural::gui {

// The settings keys, with their defaults where they are read.
namespace settingsKey {
inline constexpr const char* port = "server/port";                    // 8080
inline constexpr const char* apiKey = "server/apiKey";                // "": no key
inline constexpr const char* lan = "server/lan";                      // false: 127.0.0.1 only
inline constexpr const char* cors = "server/corsOrigins";             // "": none
inline constexpr const char* startAtLaunch = "server/startAtLaunch";  // false
inline constexpr const char* keepInTray = "server/keepInTray";        // true
inline constexpr const char* theme = "ui/theme";                      // "system"
inline constexpr const char* maxTokens = "chat/maxTokens";            // 2048
// The chat text's size, in points above (or below) the app's font (View > Zoom in / out).
inline constexpr const char* textZoom = "chat/textZoom";  // 0
// The user's sampling presets (JSON array, conversation/samplingsettings.h).
inline constexpr const char* samplingPresets = "chat/samplingPresets";
// Saved assistants (JSON array, conversation/assistants.h) and the one a New conversation
// starts with ("": none).
inline constexpr const char* assistants = "chat/assistants";
inline constexpr const char* defaultAssistant = "chat/defaultAssistant";
// Extra folders the model switcher scans besides modelsDir() (string list), and the models
// loaded last (JSON array of {"model", "store"}, newest first; app/modelcatalog.h).
inline constexpr const char* modelFolders = "models/folders";
inline constexpr const char* recentModels = "models/recent";
}  // namespace settingsKey

}  // namespace neural::gui
