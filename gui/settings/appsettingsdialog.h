// Settings > Settings...: the app's own settings on one page (the engine's are the profiles):
// the API server (port, key, LAN access with a warning, CORS origins, start at launch, keep
// running in the tray), the appearance (theme: follow the system, light or dark), the chat's
// reply length limit and the assistant a New conversation starts with. OK writes them to appSettings() (gui/app/paths.h); the API settings take
// effect at the server's next start, the theme at once.
#pragma once

#include <QDialog>

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QSpinBox;

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

class AppSettingsDialog : public QDialog {
    Q_OBJECT
public:
    explicit AppSettingsDialog(QWidget* parent = nullptr);

    // Writes the fields into appSettings() (OK does this, then accepts).
    void save();

    // Test access.
    QSpinBox* portBox() const { return m_port; }
    QLineEdit* keyEdit() const { return m_key; }
    QCheckBox* lanBox() const { return m_lan; }
    QLabel* lanWarning() const { return m_lanWarning; }
    QLineEdit* corsEdit() const { return m_cors; }
    QCheckBox* startAtLaunchBox() const { return m_startAtLaunch; }
    QCheckBox* keepInTrayBox() const { return m_keepInTray; }
    QComboBox* themeBox() const { return m_theme; }
    QSpinBox* maxTokensBox() const { return m_maxTokens; }
    QComboBox* defaultAssistantBox() const { return m_defaultAssistant; }

signals:
    void themeChanged(const QString& theme);

private:
    void updateWarning();

    QSpinBox* m_port;
    QLineEdit* m_key;
    QCheckBox* m_lan;
    QLabel* m_lanWarning;
    QLineEdit* m_cors;
    QCheckBox* m_startAtLaunch;
    QCheckBox* m_keepInTray;
    QComboBox* m_theme;
    QSpinBox* m_maxTokens;
    QComboBox* m_defaultAssistant;
};

}  // namespace neural::gui
