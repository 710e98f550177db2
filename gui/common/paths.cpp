#include "common/paths.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>

#include "runtime/routing_stats.h"

namespace neural::gui {

namespace {
QString ensured(const QString& dir) {
    QDir().mkpath(dir);
    return dir;
}

QString overrideBase() { return qEnvironmentVariable("NEURAL_DESKTOP_HOME"); }
}  // namespace

QString appDataDir() {
    const QString base = overrideBase();
    return ensured(base.isEmpty()
                       ? QStandardPaths::writableLocation(QStandardPaths::AppLocalDataLocation)
                       : base + QStringLiteral("/data"));
}

QString appConfigDir() {
    const QString base = overrideBase();
    return ensured(base.isEmpty()
                       ? QStandardPaths::writableLocation(QStandardPaths::AppConfigLocation)
                       : base + QStringLiteral("/config"));
}

QString conversationsPath() { return appDataDir() + QStringLiteral("/conversations.sqlite"); }
QString logDir() { return ensured(appDataDir() + QStringLiteral("/logs")); }
QString demoModelDir() { return appDataDir() + QStringLiteral("/demo"); }
QString modelsDir() { return ensured(appDataDir() + QStringLiteral("/models")); }
QString profilesPath() { return appConfigDir() + QStringLiteral("/profiles.json"); }

std::filesystem::path desktopRoutingStatsPath(const QString& setting, const QString& model,
                                              const QString& store) {
    const std::string s = setting.trimmed().isEmpty() ? "auto" : setting.trimmed().toStdString();
    const std::filesystem::path m = model.toStdString(), st = store.toStdString();
    if (s != "auto" || !st.empty() || !qEnvironmentVariableIsEmpty("NEURAL_ROUTING_STATS_DIR"))
        return routing_stats_path(s, m, st);
    return routing_stats_path(
        s, m, st,
        std::filesystem::path((appDataDir() + QStringLiteral("/routing-stats")).toStdString()));
}

QString demoTokenizerPath() {
    const QString env = qEnvironmentVariable("NEURAL_DEMO_TOKENIZER");
    if (!env.isEmpty()) return env;
    // An installed app (Linux prefix or the MSI: bin/ beside share/) carries its own copy
    // (gui/CMakeLists.txt installs it); a build tree reads the one scripts/setup.sh fetched.
    const QString appDir = QCoreApplication::applicationDirPath();
    QStringList candidates = {
        appDir + QStringLiteral("/../") + QLatin1String(kInstalledDemoTokenizer),
        appDir + QLatin1Char('/') + QLatin1String(kInstalledDemoTokenizer)};
    // The source tree only for an executable in this build's own folder: an installed app
    // never depends on where it was built.
    const QString buildDir = QDir::cleanPath(QStringLiteral(NEURAL_BINARY_DIR));
    if (QDir::cleanPath(appDir).startsWith(buildDir + QLatin1Char('/')))
        candidates << QStringLiteral(NEURAL_SOURCE_DIR) +
                          QStringLiteral(
                              "/resources/demo-tokenizer/node_modules/@lenml/"
                              "tokenizer-gptoss/models/tokenizer.json");
    for (const QString& p : candidates) {
        if (QFileInfo::exists(p)) return QFileInfo(p).absoluteFilePath();
    }
    return {};
}

}  // namespace neural::gui

namespace neural::gui {
std::unique_ptr<QSettings> appSettings() {
    return std::make_unique<QSettings>(appConfigDir() + QStringLiteral("/settings.ini"),
                                       QSettings::IniFormat);
}
}  // namespace neural::gui
