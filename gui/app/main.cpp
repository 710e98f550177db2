// neural-desktop: the Qt Widgets app (chat, setup wizard, profiles, telemetry, tray + API).
//   neural-desktop [--model DIR | --demo] [--theme light|dark|system] [--screenshots DIR]
// Without --model it loads the active profile's model, else the demo model (first run: asks).
#include <QApplication>
#include <QCommandLineParser>
#include <QIcon>

#include <cstdio>
#include <cstring>
#include <memory>

#include <spdlog/spdlog.h>

#include "app/applog.h"
#include "app/mainwindow.h"
#include "common/paths.h"
#include "app/screenshots.h"
#include "app/theme.h"
#include "neural/version.h"

namespace {

// --help and --version print and exit without a window, so they work without a display (over
// SSH, in a script, in CI): only a QCoreApplication is made for them, which needs no platform
// plugin.
bool onlyPrints(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        for (const char* flag : {"--help", "-h", "-?", "--help-all", "--version", "-v"}) {
            if (!std::strcmp(argv[i], flag)) return true;
        }
    }
    return false;
}

}  // namespace

int main(int argc, char** argv) {
    std::unique_ptr<QCoreApplication> app;
    if (onlyPrints(argc, argv))
        app = std::make_unique<QCoreApplication>(argc, argv);
    else
        app = std::make_unique<QApplication>(argc, argv);
    QCoreApplication::setOrganizationName(QStringLiteral("Neural"));
    QCoreApplication::setApplicationName(QStringLiteral("neural-desktop"));
    QGuiApplication::setApplicationDisplayName(QStringLiteral("Neural"));
    QCoreApplication::setApplicationVersion(QStringLiteral(NEURAL_VERSION));

    QCommandLineParser p;
    p.setApplicationDescription(QStringLiteral("Neural: chat with gpt-oss on this PC."));
    p.addHelpOption();
    p.addVersionOption();
    const QCommandLineOption model({QStringLiteral("m"), QStringLiteral("model")},
                                   QStringLiteral("Checkpoint folder (overrides the profile)."),
                                   QStringLiteral("DIR"));
    const QCommandLineOption theme(QStringLiteral("theme"),
                                   QStringLiteral("light, dark or system (saved)."),
                                   QStringLiteral("NAME"));
    const QCommandLineOption shots(QStringLiteral("screenshots"),
                                   QStringLiteral("Save PNGs of the main window, telemetry, "
                                                  "profiles, the Benchmark panel and the setup "
                                                  "wizard into DIR once the model is loaded, "
                                                  "then quit."),
                                   QStringLiteral("DIR"));
    const QCommandLineOption demo(QStringLiteral("demo"),
                                  QStringLiteral("Load the built-in demo model (random weights; "
                                                 "made on first use)."));
    p.addOption(model);
    p.addOption(demo);
    p.addOption(theme);
    p.addOption(shots);
    // scripts/run.sh passes the terminal chat's flags too (e.g. --reasoning low): options this
    // app does not know are reported and ignored instead of refusing to start.
    if (!p.parse(QApplication::arguments()))
        std::fprintf(stderr, "neural-desktop: %s (ignored)\n", qPrintable(p.errorText()));
    if (p.isSet(QStringLiteral("help"))) p.showHelp();
    if (p.isSet(QStringLiteral("version"))) p.showVersion();
    QApplication::setWindowIcon(QIcon(QStringLiteral(":/neural/neural.ico")));

    namespace g = neural::gui;
    const QString logFile = g::installLogging(g::logDir() + QStringLiteral("/neural-desktop.log"));
    spdlog::info("neural-desktop {} starting; log file {}", NEURAL_VERSION, logFile.toStdString());

    auto settings = g::appSettings();
    if (p.isSet(theme)) settings->setValue(QStringLiteral("ui/theme"), p.value(theme));
    g::applyTheme(settings->value(QStringLiteral("ui/theme"), QStringLiteral("system")).toString());
    settings.reset();

    g::MainWindow::Options options;
    options.modelDir = p.value(model);
    options.demo = p.isSet(demo);
    g::MainWindow window(options);
    window.show();
    if (p.isSet(shots)) g::takeScreenshots(&window, p.value(shots));
    return QApplication::exec();
}
