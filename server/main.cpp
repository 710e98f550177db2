// neural-server: the OpenAI-compatible API, headless.
//   neural-server --model DIR [--store FILE] [--backend cpu|cuda|auto] [--vram-budget GIB] [--host 127.0.0.1] [--port 8080] [--api-key KEY]
//                 [--cors ORIGIN] ...
#include <QCommandLineParser>
#include <QCoreApplication>
#include <QFile>
#include <QTimer>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "apiserver.h"
#include "cpu/parallel.h"
#include "neural/error.h"
#include "neural/version.h"
#include "runtime/model.h"

namespace {

std::atomic<int> g_signal{0};

extern "C" void onSignal(int sig) { g_signal.store(sig); }

[[noreturn]] void die(const QString &message)
{
    std::fprintf(stderr, "neural-server: %s\n", qPrintable(message));
    std::exit(2);
}

}  // namespace

int main(int argc, char **argv)
{
    // The engine's log goes to stderr, as Qt's messages do: stdout carries only the lines
    // scripts read ("serving ... on http://...", "stopped").
    spdlog::set_default_logger(spdlog::stderr_color_mt("neural"));
    QCoreApplication app(argc, argv);
    QCoreApplication::setApplicationName(QStringLiteral("neural-server"));
    QCoreApplication::setApplicationVersion(QStringLiteral(NEURAL_VERSION));
    qSetMessagePattern(QStringLiteral("%{time yyyy-MM-dd hh:mm:ss.zzz} %{if-warning}warning: "
                                      "%{endif}%{if-critical}error: %{endif}%{message}"));

    QCommandLineParser p;
    p.setApplicationDescription(QStringLiteral(
        "OpenAI-compatible API server for a gpt-oss model (/v1/chat/completions, "
        "/v1/completions, /v1/models, /health, /metrics)."));
    p.addHelpOption();
    p.addVersionOption();
    const QCommandLineOption model({"m", "model"}, "Checkpoint folder.", "DIR");
    const QCommandLineOption store("store", "Expert store file (neural repack) for the experts.",
                                   "FILE");
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
    const QCommandLineOption maxTokens("default-max-tokens",
                                       "Reply limit when a request sets none (default 4096).", "N",
                                       "4096");
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
    const QCommandLineOption threads("threads", "CPU worker threads (default: all cores).", "N",
                                     "0");
    const QCommandLineOption kernel("kernel",
                                    "CPU kernels: auto (default, the fused expert and bf16 "
                                    "dense kernels), scalar, avx2, avx512, or reference (the "
                                    "plain fp32 forward pass).",
                                    "NAME", "auto");
    const QCommandLineOption kernelPersistent("kernel-persistent",
                                              "1: run the expert kernels on the persistent "
                                              "worker team library.",
                                              "0|1", "0");
    const QCommandLineOption backend("backend",
                                     "cpu (default), cuda (GPU core + expert slots; the CPU "
                                     "computes missed experts) or auto.",
                                     "NAME", "cpu");
    const QCommandLineOption vramBudget("vram-budget",
                                        "GiB of GPU memory the engine may use (default: free "
                                        "VRAM - 0.5).",
                                        "GIB", "0");
    const QCommandLineOption pool("pool", "GiB of expert slots (default: what the budget leaves).",
                                  "GIB");
    const QCommandLineOption refreshEvery("refresh-every",
                                          "Decode tokens between admission rounds; 0 freezes "
                                          "residency (default 8).",
                                          "N", "8");
    const QCommandLineOption context("context",
                                     "K/V positions kept on the GPU (default min(model, 8192)).",
                                     "N", "0");
    // Prompts on the GPU (docs/CUDA.md "A prompt").
    const QCommandLineOption prefillOrder("prefill-order",
                                          "Prompts with --backend cuda: layer (default), block or "
                                          "token (token by token, the reference).",
                                          "ORDER", "layer");
    const QCommandLineOption prefillBlock("prefill-block", "Prompt tokens per block (default 2048).",
                                          "N", "2048");
    const QCommandLineOption scratch("scratch",
                                     "VRAM scratch slots that non-resident experts are staged "
                                     "into during a prompt (default 4).",
                                     "N", "4");
    const QCommandLineOption stagingThreads("staging-threads",
                                            "Threads copying staged experts from RAM (default 8).",
                                            "N", "8");
    const QCommandLineOption prefillCpuTokens("prefill-cpu-tokens",
                                              "Non-resident experts with at most N prompt tokens "
                                              "run on the CPU, 0-16 (default 6).",
                                              "N", "6");
    const QCommandLineOption prefillEarly("prefill-early",
                                          "Prompts of several blocks: up to N of a layer's experts "
                                          "are staged from the first block's routing while the "
                                          "other blocks run; 0 = off (default 32).",
                                          "N", "32");
    const QCommandLineOption groupedGemm("grouped-gemm",
                                         "1: prompts of one block of 1,024-4,096 tokens run a "
                                         "layer's GPU experts in groups of 3 per launch (same "
                                         "outputs); 0 = off (default).",
                                         "0|1", "0");
    const QCommandLineOption prefillFp16("prefill-fp16",
                                         "1: prompts' GPU experts take fp16 operands (11 bits of "
                                         "each activation: faster, less exact); 0 (default): bf16 "
                                         "hi + lo halves (~16 bits).",
                                         "0|1", "0");
    const QCommandLineOption streamMisses("stream-misses",
                                          "Decode with a pinned store: 1 copies half of each "
                                          "layer's missed experts over PCIe and computes them on "
                                          "the GPU while the CPU computes the rest; 0 (default): "
                                          "the CPU computes every miss.",
                                          "0|1", "0");
    const QCommandLineOption pinStore("pin-store",
                                      "Raw store with --backend cuda: page-lock the whole store in "
                                      "RAM so prompts copy experts to the GPU straight from it; "
                                      "auto (default) = when it is at most half of the RAM, 1 = "
                                      "always try, 0 = never.",
                                      "auto|0|1", "auto");
    const QCommandLineOption kvRing("kv-ring",
                                    "Sliding-window layers keep only their last N positions of "
                                    "K/V; auto (default) = window + prefill block - 1; 0 = whole "
                                    "context.",
                                    "N", "auto");
    const QCommandLineOption kvCheckpoints("kv-checkpoints",
                                           "GiB of host memory keeping the GPU K/V of requests "
                                           "switched away from, so a request sharing their start "
                                           "is not re-processed (default 0: off).",
                                           "GIB", "0");
    // RAM residency of the expert store (docs/USER_GUIDE.md "RAM residency").
    const QCommandLineOption warmupRam("warmup-ram",
                                       "With --store: after loading, read the experts into RAM, "
                                       "hottest first (--ranking), for at most SECONDS, in the "
                                       "background (0 = off).",
                                       "SECONDS", "0");
    const QCommandLineOption lockRam("lock-ram",
                                     "With --store: lock the hottest experts in RAM up to GIB "
                                     "(mlock within RLIMIT_MEMLOCK / VirtualLock).",
                                     "GIB", "0");
    const QCommandLineOption releaseResident("release-resident",
                                             "With --store and --backend cuda: give back the RAM "
                                             "of experts that live in VRAM for good.");
    const QCommandLineOption ranking("ranking",
                                     "Expert ranking JSON (neural rank): the static slots and "
                                     "the RAM warm-up order.",
                                     "FILE");
    const QCommandLineOption testOptions(
        "enable-test-options",
        "Accept the test-only request options (forced output, simulated engine failure). For "
        "the test suite only.");
    p.addOptions({model, store, host, port, apiKey, apiKeyFile, cors, modelName, queue, maxBody,
                  maxTokens, maxPromptTokens, readTimeout, idleTimeout, maxConnections, overflow, overflowWait,
                  threads, kernel, kernelPersistent, backend, vramBudget,
                  pool, refreshEvery, context, prefillOrder, prefillBlock, scratch, stagingThreads,
                  prefillCpuTokens, prefillEarly, groupedGemm, prefillFp16, streamMisses, pinStore, kvRing, kvCheckpoints, warmupRam, lockRam, releaseResident, ranking, testOptions});
    p.process(app);

    if (!p.positionalArguments().isEmpty())
        die(QStringLiteral("unexpected argument \"%1\"").arg(p.positionalArguments().first()));
    if (!p.isSet(model))
        die(QStringLiteral("--model DIR is required (see --help)"));

    auto number = [&](const QCommandLineOption &o, qint64 lo, qint64 hi) {
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
    config.maxOverflow = static_cast<int>(number(overflow, 0, 10000));
    config.overflowWaitMs = static_cast<int>(number(overflowWait, 1, 600) * 1000);
    config.defaultMaxTokens = static_cast<int>(number(maxTokens, 1, 1 << 24));
    config.maxPromptTokens = number(maxPromptTokens, 0, qint64(1) << 31);
    config.testOptions = p.isSet(testOptions);
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
        if (config.apiKey.isEmpty())
            die(QStringLiteral("the API key is empty"));
    }
    for (const QString &value : p.values(cors)) {
        for (const QString &origin : value.split(u',', Qt::SkipEmptyParts))
            config.corsOrigins.append(origin.trimmed().toUtf8());
    }
    neural::cpu::set_threads(static_cast<int>(number(threads, 0, 4096)));

    std::shared_ptr<const neural::Model> loaded;
    try {
        neural::LoadOptions options;
        if (p.isSet(store)) options.store = p.value(store).toStdString();
        options.kernel = p.value(kernel).toStdString();
        options.kernel_persistent = number(kernelPersistent, 0, 1) == 1;
        if (p.isSet(kernelPersistent))
            options.gpu.prefer_persistent_team = false;
        options.threads = static_cast<int>(number(threads, 0, 4096));
        options.backend = p.value(backend).toStdString();
        auto gib = [&](const QCommandLineOption &o) {
            bool ok = false;
            const double v = p.value(o).toDouble(&ok);
            if (!ok || v < 0 || v > 4096)
                die(QStringLiteral("--%1 must be a number of GiB from 0 to 4096").arg(o.names().last()));
            return v;
        };
        options.gpu.vram_budget_gib = gib(vramBudget);
        if (p.isSet(pool))
            options.gpu.pool_gib = gib(pool);
        options.gpu.refresh_every = static_cast<int>(number(refreshEvery, 0, 1 << 20));
        options.gpu.context = number(context, 0, qint64(1) << 31);
        options.gpu.prefill_order = p.value(prefillOrder).toStdString();
        if (!neural::is_prefill_order(options.gpu.prefill_order))
            die(QStringLiteral("--prefill-order must be layer, block or token"));
        options.gpu.prefill_block = static_cast<int>(number(prefillBlock, 1, 65536));
        options.gpu.scratch_slots = static_cast<int>(number(scratch, 1, 64));
        options.gpu.staging_threads = static_cast<int>(number(stagingThreads, 1, 64));
        options.gpu.prefill_cpu_tokens = static_cast<int>(number(prefillCpuTokens, 0, 16));
        options.gpu.prefill_early = static_cast<int>(number(prefillEarly, 0, neural::kMaxPrefillEarly));
        options.gpu.grouped_gemm = number(groupedGemm, 0, 1) == 1;
        options.gpu.prefill_fp16 = number(prefillFp16, 0, 1) == 1;
        options.gpu.stream_misses = static_cast<int>(number(streamMisses, 0, 1));
        options.gpu.pin_store = p.value(pinStore).toStdString();
        if (!neural::is_pin_store(options.gpu.pin_store))
            die(QStringLiteral("--pin-store must be auto, 0 or 1"));
        if (p.value(kvRing) != QLatin1String("auto"))
            options.gpu.kv_ring = static_cast<int>(number(kvRing, 0, qint64(1) << 30));
        options.gpu.kv_checkpoint_gib = gib(kvCheckpoints);
        {
            bool ok = false;
            const double seconds = p.value(warmupRam).toDouble(&ok);
            if (!ok || seconds < 0 || seconds > 86400)
                die(QStringLiteral("--warmup-ram must be a number of seconds from 0 to 86400"));
            options.warmup_ram_seconds = seconds;
        }
        options.lock_ram_bytes = static_cast<std::uint64_t>(gib(lockRam) * 1073741824.0);
        options.release_resident = p.isSet(releaseResident);
        if (p.isSet(ranking))
            options.gpu.ranking = p.value(ranking).toStdString();
        loaded = neural::Model::load(p.value(model).toStdString(), options);
    } catch (const neural::Error &e) {
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

    std::signal(SIGINT, onSignal);
    std::signal(SIGTERM, onSignal);
    QTimer signalPoll;
    QObject::connect(&signalPoll, &QTimer::timeout, &app, [] {
        if (g_signal.load() != 0)
            QCoreApplication::quit();
    });
    signalPoll.start(100);
    const int rc = app.exec();
    std::printf("neural-server: stopped\n");
    return rc;
}
