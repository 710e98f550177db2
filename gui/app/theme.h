// Light and dark themes: the Fusion style with a light or dark palette ("system" keeps the
// platform's style and palette).
#pragma once

#include <QString>

namespace neural::gui {

void applyTheme(const QString& name);  // "light", "dark" or "system"

}  // namespace neural::gui
