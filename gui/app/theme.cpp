#include "app/theme.h"

#include <QApplication>
#include <QEvent>
#include <QPalette>
#include <QStyle>
#include <QStyleFactory>
#include <QStyleHints>
#include <QTimer>

namespace neural::gui {

namespace {

QString g_theme = QStringLiteral("system");
bool g_dark = false;
std::optional<bool> g_systemDarkOverride;

bool isDark(const QPalette& p) { return p.color(QPalette::Window).lightness() < 128; }

QPalette darkPalette() {
    QPalette p;
    const QColor window(37, 37, 40), base(28, 28, 30), text(230, 230, 230), accent(64, 128, 220);
    p.setColor(QPalette::Window, window);
    p.setColor(QPalette::WindowText, text);
    p.setColor(QPalette::Base, base);
    p.setColor(QPalette::AlternateBase, window.lighter(115));
    p.setColor(QPalette::ToolTipBase, window);
    p.setColor(QPalette::ToolTipText, text);
    p.setColor(QPalette::PlaceholderText, QColor(150, 150, 155));
    p.setColor(QPalette::Text, text);
    p.setColor(QPalette::Button, window.lighter(120));
    p.setColor(QPalette::ButtonText, text);
    p.setColor(QPalette::BrightText, Qt::red);
    p.setColor(QPalette::Link, accent.lighter(130));
    p.setColor(QPalette::Highlight, accent);
    p.setColor(QPalette::HighlightedText, Qt::white);
    p.setColor(QPalette::Disabled, QPalette::Text, QColor(120, 120, 120));
    p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(120, 120, 120));
    p.setColor(QPalette::Disabled, QPalette::WindowText, QColor(120, 120, 120));
    return p;
}

void setStyleNamed(const QString& name) {
    if (QApplication::style()->name().compare(name, Qt::CaseInsensitive) == 0) return;
    if (QStyle* s = QStyleFactory::create(name)) QApplication::setStyle(s);
}

}  // namespace

bool systemPrefersDark() {
    if (g_systemDarkOverride) return *g_systemDarkOverride;
#if QT_VERSION >= QT_VERSION_CHECK(6, 5, 0)
    const Qt::ColorScheme scheme = QGuiApplication::styleHints()->colorScheme();
    if (scheme != Qt::ColorScheme::Unknown) return scheme == Qt::ColorScheme::Dark;
#endif
    // The platform palette: what the application shows in "system" with no palette of its own.
    return g_theme == QLatin1String("system") && isDark(QApplication::palette());
}

void setSystemDarkForTesting(std::optional<bool> dark) { g_systemDarkOverride = dark; }

QString currentTheme() { return g_theme; }
bool themeIsDark() { return g_dark; }

void applyTheme(const QString& requested) {
    ThemeFollower* follower = ThemeFollower::instance();
    static const QString platformStyle = QApplication::style()->name();
    const QString name = requested == QLatin1String("light") || requested == QLatin1String("dark")
                             ? requested
                             : QStringLiteral("system");
    g_theme = name;
    if (name == QLatin1String("system")) {
        setStyleNamed(platformStyle);
        // An empty palette: the platform's own, which Qt keeps up to date with the system.
        QApplication::setPalette(QPalette());
        g_dark = systemPrefersDark();
        if (g_dark && !isDark(QApplication::palette())) {
            setStyleNamed(QStringLiteral("Fusion"));
            QApplication::setPalette(darkPalette());
        } else {
            g_dark = isDark(QApplication::palette());
        }
    } else {
        setStyleNamed(QStringLiteral("Fusion"));
        g_dark = name == QLatin1String("dark");
        QApplication::setPalette(g_dark ? darkPalette() : QApplication::style()->standardPalette());
    }
    emit follower->changed(name, g_dark);
}

ThemeFollower* ThemeFollower::instance() {
    static ThemeFollower* follower = new ThemeFollower;  // lives as long as the application
    return follower;
}

ThemeFollower::ThemeFollower() : QObject(QCoreApplication::instance()) {
    QCoreApplication::instance()->installEventFilter(this);
#if QT_VERSION >= QT_VERSION_CHECK(6, 5, 0)
    connect(QGuiApplication::styleHints(), &QStyleHints::colorSchemeChanged, this,
            [this](Qt::ColorScheme) { systemChanged(); });
#endif
}

bool ThemeFollower::eventFilter(QObject* watched, QEvent* event) {
    // The platform sends ThemeChange to every window when the system's theme changes (Qt 6.4's
    // only sign of a new colour scheme).
    if (event->type() == QEvent::ThemeChange) systemChanged();
    return QObject::eventFilter(watched, event);
}

void ThemeFollower::systemChanged() {
    if (g_theme != QLatin1String("system") || m_pending) return;
    // Coalesced: one change reaches every window; applied once the platform palette is new.
    m_pending = true;
    QTimer::singleShot(0, this, [this] {
        m_pending = false;
        if (g_theme == QLatin1String("system")) applyTheme(QStringLiteral("system"));
    });
}

}  // namespace neural::gui
