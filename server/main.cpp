// neural-server: the OpenAI-compatible API, headless.
//   neural-server --model DIR [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--cors ORIGIN] ...
//                 [engine settings: --store FILE --backend cpu|cuda|auto --vram-budget GIB ...]
// The engine settings are the settings schema's (runtime/options.h), the same flags, limits and
// messages as `neural`'s; the options here are the server's own.
#include <QCommandLineParser>
#include <QCoreApplication>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QTimer>
#include <QUrl>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "apiserver.h"
#include "neural/error.h"
#include "neural/version.h"
#include "platform/cancel_signals.h"
#include "runtime/model.h"
#include "runtime/options.h"

namespace {

[[noreturn]] void die(const QString& message) {
    std::fprintf(stderr, "neural-server: %s\n", qPrintable(message));
    std::exit(2);
}

// --log-file: Qt's messages (the request log) and the engine's (spdlog) go to stderr and to the
// file, one line each, flushed as written.
std::FILE* g_logFile = nullptr;

void logToBoth(QtMsgType type, const QMessageLogContext& context, const QString& message) {
    const QByteArray line = qFormatLogMessage(type, context, message).toLocal8Bit() + '\n';
    std::fwrite(line.constData(), 1, static_cast<size_t>(line.size()), stderr);
    if (g_logFile) {
        std::fwrite(line.constData(), 1, static_cast<size_t>(line.size()), g_logFile);
        std::fflush(g_logFile);
    }
    if (type == QtFatalMsg) std::abort();
}

void openLogFile(const QString& path) {
    g_logFile = std::fopen(QFile::encodeName(path).constData(), "a");
    if (!g_logFile) die(QStringLiteral("--log-file: cannot open %1 for writing").arg(path));
    qInstallMessageHandler(logToBoth);
    try {
        auto sink = std::make_shared<spdlog::sinks::basic_file_sink_mt>(path.toStdString());
        sink->set_level(spdlog::level::trace);
        spdlog::default_logger()->sinks().push_back(std::move(sink));
        spdlog::default_logger()->flush_on(spdlog::level::info);
    } catch (const spdlog::spdlog_ex& e) {
        die(QStringLiteral("--log-file: %1").arg(QString::fromUtf8(e.what())));
    }
}

}  // namespace

int main(int argc, char** argv) {
    // The engine's log goes to stderr, as Qt's messages do: stdout carries only the lines
    // scripts read ("serving ... on http://...", "stopped").
    spdlog::set_default_logger(spdlog::stderr_color_mt("neural"));
    // The engine settings first; Qt's parser sees the rest.
    std::vector<std::string> rest(argv + 1, argv + argc);
    neural::options::Settings engine;
    try {
        engine = neural::options::take_flags(rest);
    } catch (const neural::Error& e) {
        std::fprintf(stderr, "neural-server: %s\n", e.what());
        return 2;
    }
    rest.insert(rest.begin(), argv[0]);
    std::vector<char*> qtArgv;
    for (std::string& a : rest) qtArgv.push_back(a.data());
    qtArgv.push_back(nullptr);
    int qtArgc = static_cast<int>(rest.size());
    QCoreApplication app(qtArgc, qtArgv.data());
    QCoreApplication::setApplicationName(QStringLiteral("neural-server"));
    QCoreApplication::setApplicationVersion(QStringLiteral(NEURAL_VERSION));
    qSetMessagePattern(
        QStringLiteral("%{time yyyy-MM-dd hh:mm:ss.zzz} %{if-warning}warning: "
                       "%{endif}%{if-critical}error: %{endif}%{message}"));

    QCommandLineParser p;
    p.setApplicationDescription(QStringLiteral(
        "OpenAI-compatible API server for a gpt-oss model (/v1/chat/completions, "
        "/v1/completions, /v1/responses, /v1/models, /health, /metrics; docs/API.md)."));
    p.addHelpOption();
    p.addVersionOption();
    const QCommandLineOption model({"m", "model"}, "Checkpoint folder.", "DIR");
    const QCommandLineOption host("host",
                                  "Address to listen on (default 127.0.0.1; anything else is "
                                  "reachable from other machines).",
                                  "ADDR", "127.0.0.1");
    const QCommandLineOption port("port", "Port (default 8080; 0 = any free port).", "N", "8080");
    const QCommandLineOption apiKey("api-key",
                                    "Require \"Authorization: Bearer KEY\" (visible to other "
                                    "local users in the process list: prefer --api-key-file or "
                                    "NEURAL_API_KEY).",
                                    "KEY");
    const QCommandLineOption apiKeyFile("api-key-file", "Read the API key from FILE.", "FILE");
    const QCommandLineOption cors("cors",
                                  "Allow browser pages from ORIGIN (repeatable, or comma "
                                  "separated; * for any). Default: no CORS.",
                                  "ORIGIN");
    const QCommandLineOption modelName("model-name",
                                       "Model id clients use (default: the folder name).", "NAME");
    const QCommandLineOption queue("queue",
                                   "Requests that may wait behind the running one (default 8); "
                                   "more get 503.",
                                   "N", "8");
    const QCommandLineOption maxBody("max-body", "Largest request body in bytes (default 8 MiB).",
                                     "BYTES", QString::number(8 * 1024 * 1024));
    const QCommandLineOption maxTokens(
        "default-max-tokens",
        "Reply limit when a request sets none (default 0: the rest of the model's context).", "N",
        "0");
    const QCommandLineOption maxPromptTokens("max-prompt-tokens",
                                             "Longest prompt a request may send, in tokens; "
                                             "longer ones get 400 (default 0: the model's "
                                             "context).",
                                             "N", "0");
    const QCommandLineOption readTimeout("read-timeout",
                                         "Seconds a client has to send a whole request (default "
                                         "30).",
                                         "SECONDS", "30");
    const QCommandLineOption idleTimeout("idle-timeout",
                                         "Seconds an idle keep-alive connection stays open "
                                         "(default 120).",
                                         "SECONDS", "120");
    const QCommandLineOption maxConnections("max-connections",
                                            "Open connections at once (default 256); at the "
                                            "limit the longest idle one is closed, else 503.",
                                            "N", "256");
    const QCommandLineOption overflow("overflow",
                                      "Requests that may wait for a place in a full queue, first "
                                      "come first served (default 64; 0: a full queue answers "
                                      "503 at once).",
                                      "N", "64");
    const QCommandLineOption overflowWait("overflow-wait",
                                          "Seconds a request waits in the overflow before it "
                                          "gets 503 (default 2).",
                                          "SECONDS", "2");
    const QCommandLineOption strict("strict",
                                    "Refuse requests with unknown fields (400); by default they "
                                    "are ignored and each name is logged once.");
    const QCommandLineOption allowedHost("allowed-host",
                                         "Accept requests whose Host header names NAME "
                                         "(repeatable, or comma separated; * for any). Loopback "
                                         "names and IP addresses are always accepted, any name "
                                         "when an API key is set.",
                                         "NAME");
    const QCommandLineOption keepAlive("sse-keepalive",
                                       "Seconds a stream may stay silent (a long prompt) before "
                                       "an SSE keep-alive comment is sent (default 5; 0: never).",
                                       "SECONDS", "5");
    const QCommandLineOption responsesKeep("responses-keep",
                                           "Responses kept in memory for previous_response_id "
                                           "(default 64; 0: none).",
                                           "N", "64");
    const QCommandLineOption writeTimeout(
        "write-timeout",
        "Seconds a stream's client may leave its answer unread: meanwhile the generation is "
        "paused; then the request is cancelled and the connection closed (default 15).",
        "SECONDS", "15");
    const QCommandLineOption perAddress(
        "max-connections-per-address",
        "Open connections from one address at once, loopback included (default 0: a quarter "
        "of --max-connections, at least 4); beyond it the address's longest idle one is "
        "closed, else 503.",
        "N", "0");
    const QCommandLineOption minRate(
        "min-request-rate",
        "Bytes per second a request must keep arriving at after its first 4 KiB (default 4096; "
        "0: only --read-timeout applies); slower ones get 408.",
        "BYTES", "4096");
    const QCommandLineOption shutdownTimeout(
        "shutdown-timeout",
        "Seconds a graceful shutdown (SIGTERM, Ctrl+C, the console closing) may take: running "
        "requests end with an error, waiting ones get 503, then the server exits (default 3; a "
        "second signal exits at once).",
        "SECONDS", "3");
    const QCommandLineOption logFile("log-file",
                                     "Write the server log to FILE as well as to stderr "
                                     "(appended).",
                                     "FILE");
    const QCommandLineOption testOptions(
        "enable-test-options",
        "Accept the test-only request options (forced output, simulated engine failure). For "
        "the test suite only.");
    const QCommandLineOption testScript(
        "test-script",
        "With --enable-test-options: FILE is a JSON array of harmony texts; each chat or "
        "responses generation emits the next one instead of sampling (the last repeats), so "
        "unmodified clients can be tested on a model with random weights.",
        "FILE");
    p.addOptions({testScript});
    const QCommandLineOption tools(
        "tools",
        "Run gpt-oss's built-in tools for API clients: a comma separated list of python and "
        "browser (default: none). The system message declares them and the server runs the "
        "model's calls itself (python: code on this machine, in the limits of docs/TOOLS.md).",
        "LIST");
    const QCommandLineOption searxng("searxng-url",
                                     "With --tools browser: the SearXNG instance `search` asks "
                                     "(its JSON output on); without it only `open` works.",
                                     "URL");
    const QCommandLineOption pythonPath("python",
                                        "With --tools python: the interpreter (default: python3 "
                                        "or python on PATH).",
                                        "PATH");
    const QCommandLineOption toolCallsMax("tool-calls-max",
                                          "Built-in tool calls one request may run (default 8); "
                                          "a further call ends the turn.",
                                          "N", "8");
    p.addOptions({tools, searxng, pythonPath, toolCallsMax});
    p.addOptions(
        {model,       host,           port,     apiKey,       apiKeyFile,      cors,
         modelName,   queue,          maxBody,  maxTokens,    maxPromptTokens, readTimeout,
         idleTimeout, maxConnections, overflow, overflowWait, strict,          allowedHost,
         keepAlive,   responsesKeep,  logFile,  testOptions,  shutdownTimeout, writeTimeout,
         perAddress,  minRate});
    for (const QString& a : app.arguments().mid(1)) {
        if (a == QLatin1String("-h") || a == QLatin1String("--help") || a == QLatin1String("-?") ||
            a == QLatin1String("--help-all")) {
            std::printf(
                "%s\nEngine settings (the same as neural's; a 0|1 flag given bare means 1; "
                "[cuda]: needs --backend cuda or auto):\n%s",
                qPrintable(p.helpText()), neural::options::help_text().c_str());
            return 0;
        }
    }
    p.process(app);

    if (!p.positionalArguments().isEmpty())
        die(QStringLiteral("unexpected argument \"%1\"").arg(p.positionalArguments().first()));
    if (!p.isSet(model)) die(QStringLiteral("--model DIR is required (see --help)"));

    auto number = [&](const QCommandLineOption& o, qint64 lo, qint64 hi) {
        bool ok = false;
        const qint64 v = p.value(o).toLongLong(&ok);
        if (!ok || v < lo || v > hi) {
            die(QStringLiteral("--%1 must be a number from %2 to %3")
                    .arg(o.names().last())
                    .arg(lo)
                    .arg(hi));
        }
        return v;
    };

    neural::server::ServerConfig config;
    if (!config.host.setAddress(p.value(host)))
        die(QStringLiteral("--host: \"%1\" is not an IP address").arg(p.value(host)));
    config.port = static_cast<quint16>(number(port, 0, 65535));
    config.maxQueue = static_cast<int>(number(queue, 0, 10000));
    config.limits.maxBodyBytes = number(maxBody, 1024, qint64(1) << 32);
    config.limits.readTimeoutMs = static_cast<int>(number(readTimeout, 1, 3600) * 1000);
    config.limits.idleTimeoutMs = static_cast<int>(number(idleTimeout, 1, 3600) * 1000);
    config.limits.maxConnections = static_cast<int>(number(maxConnections, 1, 100000));
    config.limits.maxPerAddress = static_cast<int>(number(perAddress, 0, 100000));
    config.limits.minBytesPerSecond = number(minRate, 0, qint64(1) << 30);
    config.writeTimeoutMs = static_cast<int>(number(writeTimeout, 1, 3600) * 1000);
    config.maxOverflow = static_cast<int>(number(overflow, 0, 10000));
    config.overflowWaitMs = static_cast<int>(number(overflowWait, 1, 600) * 1000);
    config.defaultMaxTokens = static_cast<int>(number(maxTokens, 0, 1 << 24));
    config.maxPromptTokens = number(maxPromptTokens, 0, qint64(1) << 31);
    config.testOptions = p.isSet(testOptions);
    if (p.isSet(testScript)) {
        if (!config.testOptions) die(QStringLiteral("--test-script needs --enable-test-options"));
        QFile file(p.value(testScript));
        if (!file.open(QIODevice::ReadOnly))
            die(QStringLiteral("--test-script: cannot read %1").arg(p.value(testScript)));
        const QJsonDocument doc = QJsonDocument::fromJson(file.readAll());
        if (!doc.isArray() || doc.array().isEmpty())
            die(QStringLiteral("--test-script: %1 must hold a non-empty JSON array of strings")
                    .arg(p.value(testScript)));
        for (const QJsonValue& v : doc.array()) {
            if (!v.isString()) die(QStringLiteral("--test-script: every entry must be a string"));
            config.testScript.push_back(v.toString().toStdString());
        }
    }
    config.strictRequests = p.isSet(strict);
    for (const QString& value : p.values(allowedHost)) {
        for (const QString& name : value.split(u',', Qt::SkipEmptyParts))
            config.allowedHosts.append(name.trimmed().toUtf8());
    }
    {
        bool ok = false;
        const double seconds = p.value(keepAlive).toDouble(&ok);
        if (!ok || seconds < 0 || seconds > 3600)
            die(QStringLiteral("--sse-keepalive must be a number of seconds from 0 to 3600"));
        config.keepAliveMs = static_cast<int>(seconds * 1000);
    }
    config.maxStoredResponses = static_cast<int>(number(responsesKeep, 0, 100000));
    if (p.isSet(logFile)) openLogFile(p.value(logFile));
    config.modelId = p.value(modelName);
    if (p.isSet(apiKey)) {
        config.apiKey = p.value(apiKey).toUtf8();
    } else if (p.isSet(apiKeyFile)) {
        QFile f(p.value(apiKeyFile));
        if (!f.open(QIODevice::ReadOnly))
            die(QStringLiteral("cannot read --api-key-file %1").arg(p.value(apiKeyFile)));
        config.apiKey = f.readAll().trimmed();
    } else {
        config.apiKey = qgetenv("NEURAL_API_KEY");
    }
    if (p.isSet(apiKey) || p.isSet(apiKeyFile)) {
        if (config.apiKey.isEmpty()) die(QStringLiteral("the API key is empty"));
    }
    for (const QString& value : p.values(cors)) {
        for (const QString& origin : value.split(u',', Qt::SkipEmptyParts))
            config.corsOrigins.append(origin.trimmed().toUtf8());
    }

    for (const QString& value : p.values(tools)) {
        for (const QString& name : value.split(u',', Qt::SkipEmptyParts)) {
            if (name.trimmed() == QLatin1String("python"))
                config.toolPython = true;
            else if (name.trimmed() == QLatin1String("browser"))
                config.toolBrowser = true;
            else
                die(QStringLiteral("--tools: \"%1\" is not a built-in tool (python, browser)")
                        .arg(name.trimmed()));
        }
    }
    config.maxToolCalls = static_cast<int>(number(toolCallsMax, 1, 1000));
    if (p.isSet(searxng)) {
        const QUrl url(p.value(searxng));
        if (!url.isValid() ||
            (url.scheme() != QLatin1String("http") && url.scheme() != QLatin1String("https")))
            die(QStringLiteral("--searxng-url: \"%1\" is not an http(s) URL")
                    .arg(p.value(searxng)));
        config.browserTool.searxngUrl = url;
    }
    if (config.toolPython) {
        // Code the model writes runs on this machine: never for anyone who can reach the port.
        if (!config.host.isLoopback() && config.apiKey.isEmpty())
            die(
                QStringLiteral("--tools python with a --host other than loopback needs an API key "
                               "(--api-key or --api-key-file): any client could run code here"));
        QString why;
        config.pythonTool.interpreter =
            neural::toolhost::PythonProvider::findInterpreter(p.value(pythonPath), &why);
        if (config.pythonTool.interpreter.isEmpty()) die(QStringLiteral("--tools python: ") + why);
    }

    std::shared_ptr<neural::Model> loaded;
    try {
        // Bad values were refused by take_flags above; here the rules between settings (a
        // CUDA-only setting with --backend cpu, a RAM lever without --store, ...).
        const neural::LoadOptions options = neural::options::apply(engine);
        loaded = neural::Model::load(p.value(model).toStdString(), options);
    } catch (const neural::Error& e) {
        std::fprintf(stderr, "neural-server: %s\n", e.what());
        return 1;
    }

    neural::server::ApiServer server(loaded, config);
    QString error;
    if (!server.start(&error)) {
        std::fprintf(stderr, "neural-server: %s\n", qPrintable(error));
        return 1;
    }
    // Scripts (and the tests, with --port 0) read the address from this line.
    std::printf("neural-server: serving '%s' on http://%s:%u/v1%s\n", qPrintable(server.modelId()),
                qPrintable(config.host.toString()), unsigned(server.serverPort()),
                config.apiKey.isEmpty() ? "" : " (API key required)");
    std::fflush(stdout);

    // SIGINT / SIGTERM / SIGHUP, or Windows' Ctrl+C, Ctrl+Break and console close: a graceful
    // shutdown within --shutdown-timeout (a second signal ends the process at once).
    const int shutdownMs = static_cast<int>(number(shutdownTimeout, 0, 600) * 1000);
    std::atomic<bool> stopRequested{false};
    neural::CancelOnSignals stopSignals(stopRequested);
    QTimer signalPoll;
    QObject::connect(&signalPoll, &QTimer::timeout, &app, [&] {
        if (!stopRequested.load() || server.shuttingDown()) return;
        qCInfo(lcNeuralServer).noquote()
            << QStringLiteral("signal %1 received: stopping (within %2 s)")
                   .arg(stopSignals.signal())
                   .arg(shutdownMs / 1000.0);
        server.shutdown(shutdownMs, [] { QCoreApplication::quit(); });
    });
    signalPoll.start(50);
    const int rc = app.exec();
    std::printf("neural-server: stopped\n");
    std::fflush(stdout);
    return rc;
}
