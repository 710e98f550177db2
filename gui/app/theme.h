// Light and dark themes, and "system", which follows the operating system's colour scheme.
//
// light / dark: the Fusion style with a light or dark palette. system: the platform's style and
// palette while the system is light; when the system is dark but the platform palette is light
// (Windows' native style, say), the Fusion dark palette. Whether the system is dark:
// QStyleHints::colorScheme() on Qt 6.5 and newer (when the platform knows it), else the
// platform palette's window colour (Qt 6.4 has no colour scheme). While the theme is "system",
// a change of the system's scheme (QStyleHints::colorSchemeChanged, QEvent::ThemeChange)
// applies it again; widgets that bake colours in (the chat's messages) re-render on the
// palette change that follows.
#pragma once

#include <QObject>
#include <QString>

#include <optional>

namespace neural::gui {

// "light", "dark" or "system"; anything else is "system".
void applyTheme(const QString& name);
QString currentTheme();  // the name last applied ("system" before any)
bool themeIsDark();      // whether the palette shown now is the dark one
// The system's preference (see above); setSystemDarkForTesting overrides it.
bool systemPrefersDark();
void setSystemDarkForTesting(std::optional<bool> dark);

// Re-applies "system" when the system's scheme changes; one per application, made by the first
// applyTheme. `changed` comes after every applyTheme.
class ThemeFollower : public QObject {
    Q_OBJECT
public:
    static ThemeFollower* instance();

signals:
    void changed(const QString& theme, bool dark);

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    ThemeFollower();
    void systemChanged();
    bool m_pending = false;
};

}  // namespace neural::gui
