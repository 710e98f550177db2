// EngineHost on the tiny fixture: loading (and a clear error for a bad folder), a streamed
// reply whose batched deltas add up to the final text, cancel, and DeltaBatcher's rate.
#include <gtest/gtest.h>

#include <QElapsedTimer>
#include <QSignalSpy>
#include <QTemporaryDir>

#include <memory>
#include <optional>

#include "backend/backend.h"
#include "conversation/deltabatcher.h"
#include "conversation/enginehost.h"
#include "generationqueue.h"
#include "gui_test_support.h"
#include "support/fixtures.h"

namespace neural::gui {
namespace {

using test::spinFor;
using test::spinUntil;

const QString kForced = QStringLiteral(
    "<|channel|>analysis<|message|>The user greets me. I greet back.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Hello **there**, this is a streamed reply.");

QString fixtureDir() { return QString::fromStdString(neural::test::tiny_model_dir().string()); }

// One CPU thread (the model applies LoadOptions::threads): the fixture is tiny and the machine
// may be shared, where OpenMP barriers over every core stall.
LoadOptions oneThread() {
    LoadOptions o;
    o.threads = 1;
    return o;
}

bool loadFixture(EngineHost& host, const LoadOptions& options = oneThread()) {
    host.load(fixtureDir(), options);
    return spinUntil([&] {
               return host.state() == EngineHost::State::ready ||
                      host.state() == EngineHost::State::failed;
           }) &&
           host.state() == EngineHost::State::ready;
}

TEST(EngineHost, LoadingABadFolderFailsWithTheReason) {
    QTemporaryDir empty;
    EngineHost host;
    QSignalSpy failed(&host, &EngineHost::loadFailed);
    host.load(empty.path());
    EXPECT_EQ(host.state(), EngineHost::State::loading);
    ASSERT_TRUE(spinUntil([&] { return failed.count() == 1; }));
    EXPECT_EQ(host.state(), EngineHost::State::failed);
    const QString error = failed.at(0).at(0).toString();
    EXPECT_NE(error.indexOf(QStringLiteral("config.json")), -1) << error.toStdString();
    TurnRequest r;
    r.history = {{QStringLiteral("user"), QStringLiteral("hi")}};
    EXPECT_FALSE(host.send(r));  // no model: refused, nothing queued
}

TEST(EngineHost, AConversationBeyondTheContextGetsAClearMessageNotASilentlyShortReply) {
    // The desktop app's turn follows the engine host's one context rule (as the API does with
    // context_length_exceeded): a reply limit beyond the context left is refused with a message
    // that says what to do, and nothing is generated.
    EngineHost host;
    ASSERT_TRUE(loadFixture(host)) << host.lastError().toStdString();
    const qint64 context = host.model()->config().max_position_embeddings;
    ASSERT_GT(context, 0);
    QSignalSpy started(&host, &EngineHost::turnStarted);
    QSignalSpy finished(&host, &EngineHost::turnFinished);
    TurnRequest req;
    req.history = {{QStringLiteral("user"), QStringLiteral("Hello!")}};
    req.maxTokens = static_cast<int>(context);
    ASSERT_TRUE(host.send(req));
    ASSERT_TRUE(spinUntil([&] { return finished.count() == 1; }));
    const TurnReport rep = finished.at(0).at(0).value<TurnReport>();
    EXPECT_EQ(rep.finish, QStringLiteral("error"));
    EXPECT_EQ(rep.errorCode, QStringLiteral("context_length_exceeded"));
    EXPECT_NE(rep.error.indexOf(QStringLiteral("Start a new conversation")), -1)
        << rep.error.toStdString();
    EXPECT_NE(rep.error.indexOf(QString::number(context)), -1) << rep.error.toStdString();
    EXPECT_EQ(rep.generatedTokens, 0);
    EXPECT_EQ(started.count(), 0);
    EXPECT_FALSE(host.busy());
}

// Stops the host's running reply as soon as its first text arrives, once; the returned flag
// set back to false stops the next reply too.
std::shared_ptr<bool> stopAtTheFirstDelta(EngineHost& host) {
    auto stopped = std::make_shared<bool>(false);
    QObject::connect(&host, &EngineHost::turnDelta, &host,
                     [&host, stopped](const QString&, const QString&) {
                         if (!*stopped) {
                             *stopped = true;
                             host.stop();
                         }
                     });
    return stopped;
}

// The status bar's summary says where the model runs and, on the CPU by the automatic choice,
// the engine's one line on why the GPU is not used (docs/CUDA.md "Runtime choice").
TEST(EngineHost, TheSummarySaysWhereTheModelRunsAndWhyNotOnTheGpu) {
    EngineHost host;
    LoadOptions automatic = oneThread();
    automatic.backend = "auto";
    ASSERT_TRUE(loadFixture(host, automatic)) << host.lastError().toStdString();
    const QString summary = host.modelSummary();
    EXPECT_TRUE(summary.endsWith(host.backendSummary())) << summary.toStdString();
    std::string why;
    if (cuda_backend_available(&why)) {
        GTEST_SKIP() << "a usable NVIDIA GPU is here: the fixture runs on it";
    }
    EXPECT_FALSE(why.empty());
    EXPECT_EQ(host.backendSummary(),
              QStringLiteral(" - on the CPU: ") + QString::fromStdString(why))
        << summary.toStdString();
    EXPECT_EQ(host.model()->gpu_unavailable_reason(), why);
}

TEST(EngineHost, WithoutALimitTurnsAndEmbeddedApiRequestsMayUseTheRestOfTheContext) {
    // The API's rule (docs/API.md): a reply without max_tokens may use the rest of the context.
    // The shared queue has no default limit of its own, so a desktop turn whose limit is "rest
    // of the context" (0) and a request of the embedded API server without one both run with
    // context - prompt tokens (each stopped at its first token here).
    EngineHost host;
    ASSERT_TRUE(loadFixture(host)) << host.lastError().toStdString();
    const qint64 context = host.model()->context_length();
    ASSERT_GT(context, 8192) << "the rule is only visible beyond the old 4,096-token default";
    QSignalSpy finished(&host, &EngineHost::turnFinished);
    const std::shared_ptr<bool> stopped = stopAtTheFirstDelta(host);
    TurnRequest req;
    req.history = {{QStringLiteral("user"), QStringLiteral("Write a long story.")}};
    req.forcedOutput = QStringLiteral("<|channel|>final<|message|>Once upon a time");
    req.maxTokens = 0;
    ASSERT_TRUE(host.send(req));
    ASSERT_TRUE(spinUntil([&] { return finished.count() == 1; }));
    const TurnReport turn = finished.at(0).at(0).value<TurnReport>();
    EXPECT_TRUE(turn.cancelled) << turn.error.toStdString();
    ASSERT_GT(turn.promptTokens, 0);
    EXPECT_EQ(turn.tokenLimit, context - turn.promptTokens);

    // The user's own limit is kept as it is.
    *stopped = false;
    req.maxTokens = 300;
    ASSERT_TRUE(host.send(req));
    ASSERT_TRUE(spinUntil([&] { return finished.count() == 2; }));
    EXPECT_EQ(finished.at(1).at(0).value<TurnReport>().tokenLimit, 300);

    // An API request on the same queue (ServerControl's ApiServer enqueues such jobs).
    auto job = std::make_shared<host::GenerationJob>();
    job->kind = host::GenerationJob::Kind::chat;
    job->chat.system.conversation_start_date = "2026-01-01";
    job->chat.history.push_back(chat::Message::user("hello over the API"));
    job->chat.forced_output = "<|channel|>final<|message|>Hi";
    QObject receiver;
    job->receiver = &receiver;
    host::GenerationJob* raw = job.get();
    job->onStarted = [raw] { raw->cancel = true; };
    std::optional<host::GenerationOutcome> out;
    job->onFinished = [&](const host::GenerationOutcome& o) { out = o; };
    ASSERT_NE(host.queue(), nullptr);
    ASSERT_TRUE(host.queue()->enqueue(job));
    ASSERT_TRUE(spinUntil([&] { return out.has_value(); }));
    ASSERT_GT(out->chat.usage.prompt_tokens, 0) << out->error;
    EXPECT_EQ(out->tokenBudget, context - out->chat.usage.prompt_tokens);
}

TEST(EngineHost, StreamsAReplyInBatchedDeltas) {
    EngineHost host;
    ASSERT_TRUE(loadFixture(host)) << host.lastError().toStdString();
    EXPECT_FALSE(host.isDemo());
    EXPECT_NE(host.modelSummary().indexOf(QStringLiteral("layers")), -1);

    QSignalSpy started(&host, &EngineHost::turnStarted);
    QSignalSpy finished(&host, &EngineHost::turnFinished);
    QString reasoning, content;
    int deltas = 0;
    QObject::connect(&host, &EngineHost::turnDelta, [&](const QString& r, const QString& c) {
        reasoning += r;
        content += c;
        ++deltas;
    });
    TurnRequest req;
    req.history = {{QStringLiteral("user"), QStringLiteral("Hello!")}};
    req.forcedOutput = kForced;
    req.maxTokens = 48;
    req.seed = 7;
    ASSERT_TRUE(host.send(req));
    EXPECT_TRUE(host.busy());
    EXPECT_FALSE(host.send(req));  // one turn at a time
    ASSERT_TRUE(spinUntil([&] { return finished.count() == 1; }));
    EXPECT_EQ(started.count(), 1);
    EXPECT_FALSE(host.busy());
    const TurnReport rep = finished.at(0).at(0).value<TurnReport>();
    EXPECT_TRUE(rep.error.isEmpty()) << rep.error.toStdString();
    EXPECT_FALSE(rep.cancelled);
    EXPECT_EQ(rep.reasoning, QStringLiteral("The user greets me. I greet back."));
    EXPECT_TRUE(
        rep.content.startsWith(QStringLiteral("Hello **there**, this is a streamed reply.")))
        << rep.content.toStdString();
    // Every streamed byte arrived, in order, through the batcher.
    EXPECT_EQ(reasoning, rep.reasoning);
    EXPECT_EQ(content, rep.content);
    EXPECT_GE(deltas, 1);
    EXPECT_GT(rep.generatedTokens, 10);
    EXPECT_GT(rep.ttftSeconds, 0.0);
    EXPECT_GT(rep.tokensPerSecond(), 0.0);
    EXPECT_GT(rep.reasoningSeconds, 0.0);
    const QJsonObject stats = rep.toJson();
    EXPECT_EQ(stats.value(QStringLiteral("tokens")).toInteger(), rep.generatedTokens);

    // The engine's telemetry saw the request (the dock reads these rings).
    const auto requests = host.model()->telemetry().requests().since(0);
    ASSERT_FALSE(requests.empty());
    EXPECT_EQ(requests.back().decode_tokens, rep.generatedTokens);
}

TEST(EngineHost, StopCancelsTheRunningReplyAndTheEngineStaysUsable) {
    EngineHost host;
    ASSERT_TRUE(loadFixture(host));
    QSignalSpy finished(&host, &EngineHost::turnFinished);
    stopAtTheFirstDelta(host);
    TurnRequest req;
    req.history = {{QStringLiteral("user"), QStringLiteral("Write a long story.")}};
    req.forcedOutput = QStringLiteral("<|channel|>final<|message|>Once upon a time");
    req.maxTokens = 4000;  // would take far longer than the test allows
    QElapsedTimer t;
    t.start();
    ASSERT_TRUE(host.send(req));
    ASSERT_TRUE(spinUntil([&] { return finished.count() == 1; }));
    const TurnReport rep = finished.at(0).at(0).value<TurnReport>();
    EXPECT_TRUE(rep.cancelled);
    EXPECT_EQ(rep.finish, QStringLiteral("cancelled"));
    EXPECT_LT(rep.generatedTokens, 4000);
    EXPECT_FALSE(host.busy());

    // The next turn runs normally.
    req.maxTokens = 8;
    ASSERT_TRUE(host.send(req));
    ASSERT_TRUE(spinUntil([&] { return finished.count() == 2; }));
    EXPECT_FALSE(finished.at(1).at(0).value<TurnReport>().cancelled);
}

TEST(EngineHost, ReloadingDuringATurnEndsItAndLoadsTheNewModel) {
    EngineHost host;
    ASSERT_TRUE(loadFixture(host));
    QSignalSpy finished(&host, &EngineHost::turnFinished);
    QSignalSpy unloading(&host, &EngineHost::modelUnloading);
    TurnRequest req;
    req.history = {{QStringLiteral("user"), QStringLiteral("Talk for a long time.")}};
    req.maxTokens = 4000;
    ASSERT_TRUE(host.send(req));
    ASSERT_TRUE(spinUntil([&] { return host.model()->telemetry().tokens().published() > 0; }));
    host.load(fixtureDir(), oneThread());  // e.g. a profile applied mid-reply
    EXPECT_EQ(unloading.count(), 1);
    ASSERT_EQ(finished.count(), 1);  // the turn ended at once, nothing left hanging
    EXPECT_TRUE(finished.at(0).at(0).value<TurnReport>().cancelled);
    EXPECT_FALSE(host.busy());
    ASSERT_TRUE(spinUntil([&] { return host.state() == EngineHost::State::ready; }));
    req.maxTokens = 4;
    EXPECT_TRUE(host.send(req));
    ASSERT_TRUE(spinUntil([&] { return finished.count() == 2; }));
    EXPECT_FALSE(finished.at(1).at(0).value<TurnReport>().cancelled);
}

TEST(DeltaBatcher, ABurstIsReleasedOnce) {
    DeltaBatcher b(33);
    QSignalSpy released(&b, &DeltaBatcher::released);
    for (int i = 0; i < 1000; ++i) b.addContent(QStringLiteral("x"));
    EXPECT_EQ(released.count(), 0);  // nothing before the interval
    ASSERT_TRUE(spinUntil([&] { return released.count() == 1; }, 2000));
    EXPECT_EQ(released.at(0).at(1).toString(), QString(1000, QLatin1Char('x')));
    spinFor(100);
    EXPECT_EQ(released.count(), 1);  // idle: no more releases
}

TEST(DeltaBatcher, ASteadyStreamIsReleasedAtAboutThirtyHertz) {
    DeltaBatcher b(33);
    QString all;
    int releases = 0;
    QObject::connect(&b, &DeltaBatcher::released, [&](const QString& r, const QString& c) {
        all += r + c;
        ++releases;
    });
    QElapsedTimer t;
    t.start();
    int added = 0;
    while (t.elapsed() < 500) {  // a token every ~2 ms for half a second
        b.addContent(QString::number(added % 10));
        ++added;
        spinFor(2);
    }
    b.flush();
    EXPECT_EQ(all.size(), added);
    // 500 ms / 33 ms = 15 releases; allow for a loaded machine, but far fewer than tokens.
    EXPECT_GE(releases, 5);
    EXPECT_LE(releases, 17);
    EXPECT_GT(added, 3 * releases);
}

}  // namespace
}  // namespace neural::gui
