// Settings > Settings...: the app's own settings on one page (the engine's are the profiles):
// the API server (port, key, LAN access with a warning, CORS origins, start at launch, keep
// running in the tray), the appearance (theme: follow the system, light or dark), the chat's
// reply length limit and the assistant a New conversation starts with. OK writes them to appSettings() (gui/common/paths.h); the API settings take
// effect at the server's next start, the theme at once.
#pragma once

#include <QDialog>

#include "common/settingskeys.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace neural::gui {

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
