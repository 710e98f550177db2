// GenerationQueue + EngineWorker in-process (tiny fixture): FIFO order and one job at a time,
// the bound, cancelling waiting and running jobs, and callbacks arriving on the queue's thread.
#include <gtest/gtest.h>

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QThread>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "generationqueue.h"
#include "runtime/model.h"
#include "support/fixtures.h"

namespace neural::host {
namespace {

class GenerationQueueTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        static int argc = 1;
        static char name[] = "generation_queue_test";
        static char* argv[] = {name, nullptr};
        if (!QCoreApplication::instance()) app_ = new QCoreApplication(argc, argv);
        LoadOptions one_thread;  // results do not depend on it; the machine is shared
        one_thread.threads = 1;
        model_ = Model::load(test::tiny_model_dir(), one_thread);
    }
    static void TearDownTestSuite() { model_.reset(); }

    // Runs the event loop until `done` or 10 s.
    template <typename Pred>
    static bool spin(Pred done) {
        QElapsedTimer t;
        t.start();
        while (!done() && t.elapsed() < 10000)
            QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
        return done();
    }

    static void drain(int ms) {
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < ms) QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
    }

    static std::shared_ptr<GenerationJob> task(QObject* receiver,
                                               std::function<void(const std::atomic<bool>&)> fn) {
        auto job = std::make_shared<GenerationJob>();
        job->kind = GenerationJob::Kind::task;
        job->task = std::move(fn);
        job->receiver = receiver;
        return job;
    }

    static QCoreApplication* app_;
    static std::shared_ptr<Model> model_;
};
QCoreApplication* GenerationQueueTest::app_ = nullptr;
std::shared_ptr<Model> GenerationQueueTest::model_;

// A chat job of the given session: one user message, a few tokens.
std::shared_ptr<GenerationJob> chatJob(QObject* receiver, const std::string& session,
                                       const std::string& text, int maxTokens) {
    auto job = std::make_shared<GenerationJob>();
    job->kind = GenerationJob::Kind::chat;
    job->session = session;
    job->chat.system.conversation_start_date = "2026-01-01";
    job->chat.history.push_back(chat::Message::user(text));
    job->chat.max_tokens = maxTokens;
    job->chat.sampling.seed = 7;
    job->receiver = receiver;
    return job;
}

TEST_F(GenerationQueueTest, ChatJobsOfEachSessionKeepTheirOwnPromptCache) {
    // The desktop app's turns ("desktop") and the API's requests ("api") alternate on one engine
    // thread; each continues its own conversation's KV instead of evicting the other's.
    GenerationQueue queue(model_, 8, 16);
    QObject receiver;
    std::vector<GenerationOutcome> outcomes;
    auto run = [&](const std::string& session, const std::string& text) {
        auto job = chatJob(&receiver, session, text, 2);
        job->onFinished = [&](const GenerationOutcome& o) { outcomes.push_back(o); };
        const std::size_t before = outcomes.size();
        EXPECT_TRUE(queue.enqueue(job));
        EXPECT_TRUE(spin([&] { return outcomes.size() > before; }));
        return outcomes.back();
    };
    const GenerationOutcome d1 = run("desktop", "the desktop app's conversation, first message");
    const GenerationOutcome a1 = run("api", "a different conversation over the API");
    ASSERT_EQ(d1.status, GenerationOutcome::Status::ok) << d1.error;
    ASSERT_EQ(a1.status, GenerationOutcome::Status::ok) << a1.error;
    EXPECT_EQ(a1.chat.usage.cached_tokens, 0);
    // The same desktop conversation again: its prompt is still cached although an API request ran
    // in between (one shared session would have re-read it).
    const GenerationOutcome d2 = run("desktop", "the desktop app's conversation, first message");
    ASSERT_EQ(d2.status, GenerationOutcome::Status::ok) << d2.error;
    EXPECT_GT(d2.chat.usage.cached_tokens, 0);
    EXPECT_EQ(d2.chat.usage.cached_tokens, d2.chat.usage.prompt_tokens - 1);
}

TEST_F(GenerationQueueTest, ChatJobContextRuleIsTheSameForEveryFrontEnd) {
    // A reply limit beyond the context left is refused before the prompt pass, for the desktop
    // app's session as for the API's: context_length_exceeded with the figures in the message.
    GenerationQueue queue(model_, 8, 16);
    QObject receiver;
    const std::int64_t context = model_->config().max_position_embeddings;
    ASSERT_GT(context, 0);
    for (const std::string session : {"desktop", "api"}) {
        std::optional<GenerationOutcome> out;
        bool started = false;
        auto job = chatJob(&receiver, session, "hello", static_cast<int>(context));
        job->onStarted = [&] { started = true; };
        job->onFinished = [&](const GenerationOutcome& o) { out = o; };
        ASSERT_TRUE(queue.enqueue(job));
        ASSERT_TRUE(spin([&] { return out.has_value(); }));
        EXPECT_EQ(out->status, GenerationOutcome::Status::badRequest) << session;
        EXPECT_EQ(out->errorCode, "context_length_exceeded") << session;
        EXPECT_NE(out->error.find(std::to_string(context)), std::string::npos) << out->error;
        EXPECT_FALSE(started) << "a refused request never starts its stream";
    }
}

TEST_F(GenerationQueueTest, CompletionLogprobsFollowTheTextPieces) {
    // The legacy route's logprobs: each released piece carries the entries of the tokens it
    // completes; together they are the outcome's, their bytes are the text, their offsets
    // count code points; greedy decoding takes each step's most likely token.
    GenerationQueue queue(model_, 8, 0);
    QObject receiver;
    auto run = [&](std::vector<std::string> stop) {
        auto job = std::make_shared<GenerationJob>();
        job->kind = GenerationJob::Kind::completion;
        job->completion.prompt =
            std::string("<|start|>user<|message|>Count<|end|><|start|>assistant");
        job->completion.max_tokens = 12;
        job->completion.sampling.temperature = 0;
        job->completion.logprobs = 2;
        job->completion.stop = std::move(stop);
        job->receiver = &receiver;
        auto pieces = std::make_shared<std::vector<TextPiece>>();
        std::optional<GenerationOutcome> out;
        job->onText = [pieces](const TextPiece& p) { pieces->push_back(p); };
        job->onFinished = [&](const GenerationOutcome& o) { out = o; };
        EXPECT_TRUE(queue.enqueue(job));
        EXPECT_TRUE(spin([&] { return out.has_value(); }));
        return std::make_pair(*out, *pieces);
    };
    const auto [whole, pieces] = run({});
    ASSERT_EQ(whole.status, GenerationOutcome::Status::ok) << whole.error;
    ASSERT_TRUE(whole.chat.logprobs.has_value());
    const auto& lps = *whole.chat.logprobs;
    ASSERT_EQ(lps.size(), whole.textOffsets.size());
    std::vector<chat::TokenLogprob> streamed;
    std::string text, bytes;
    for (const TextPiece& p : pieces) {
        text += p.text;
        ASSERT_EQ(p.logprobs.size(), p.offsets.size());
        streamed.insert(streamed.end(), p.logprobs.begin(), p.logprobs.end());
    }
    EXPECT_EQ(text, whole.text);
    ASSERT_EQ(streamed.size(), lps.size());
    std::int64_t codePoints = 0;
    for (unsigned char c : whole.text) codePoints += (c & 0xC0) != 0x80 ? 1 : 0;
    for (std::size_t i = 0; i < lps.size(); ++i) {
        EXPECT_EQ(streamed[i].bytes, lps[i].bytes);
        if (i > 0) {
            EXPECT_GE(whole.textOffsets[i], whole.textOffsets[i - 1]);
        }
        EXPECT_LE(whole.textOffsets[i], codePoints);
        bytes += lps[i].bytes;
        ASSERT_EQ(lps[i].top.size(), 2u);
        EXPECT_EQ(lps[i].top[0].bytes, lps[i].bytes);  // greedy: the most likely token
        EXPECT_DOUBLE_EQ(lps[i].top[0].logprob, lps[i].logprob);
        EXPECT_GE(lps[i].top[0].logprob, lps[i].top[1].logprob);
        EXPECT_LE(lps[i].logprob, 0.0);
    }
    // The tokens' bytes are the text, but where a token ends inside a UTF-8 sequence that the
    // next does not complete (the text has U+FFFD there).
    if (whole.text.find("\xEF\xBF\xBD") == std::string::npos) {
        EXPECT_EQ(bytes, whole.text);
        std::int64_t offset = 0;
        for (std::size_t i = 0; i < lps.size(); ++i) {
            EXPECT_EQ(whole.textOffsets[i], offset);
            for (unsigned char c : lps[i].bytes) offset += (c & 0xC0) != 0x80 ? 1 : 0;
        }
    }
    EXPECT_EQ(whole.textOffsets.front(), 0);
    // A stop sequence cuts the text: the tokens that reach into the kept text remain.
    ASSERT_GE(whole.text.size(), 4u);
    const std::string stop = whole.text.substr(2, 2);
    const auto [cut, cutPieces] = run({stop});
    ASSERT_EQ(cut.status, GenerationOutcome::Status::ok) << cut.error;
    const std::size_t kept = whole.text.find(stop);
    EXPECT_EQ(cut.text, whole.text.substr(0, kept));
    std::size_t covered = 0, n = 0;
    if (whole.text.find("\xEF\xBF\xBD") == std::string::npos) {
        while (covered < kept) covered += lps[n++].bytes.size();
        EXPECT_EQ(cut.chat.logprobs->size(), n);
    } else {
        n = cut.chat.logprobs->size();
        EXPECT_LE(n, lps.size());
    }
    std::size_t streamedCut = 0;
    for (const TextPiece& p : cutPieces) streamedCut += p.logprobs.size();
    EXPECT_EQ(streamedCut, n);
}

TEST_F(GenerationQueueTest, RunsJobsInOrderOneAtATime) {
    GenerationQueue queue(model_, 8, 16);
    QObject receiver;
    std::atomic<int> running{0};
    std::atomic<int> overlap{0};
    std::vector<int> order;
    int finished = 0;
    for (int i = 0; i < 4; ++i) {
        auto job = task(&receiver, [&, i](const std::atomic<bool>&) {
            if (running.fetch_add(1) != 0) overlap.fetch_add(1);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            order.push_back(i);  // one job at a time: no data race
            running.fetch_sub(1);
        });
        job->onFinished = [&](const GenerationOutcome& o) {
            EXPECT_EQ(o.status, GenerationOutcome::Status::ok);
            EXPECT_EQ(QThread::currentThread(), receiver.thread());
            ++finished;
        };
        ASSERT_TRUE(queue.enqueue(job));
    }
    ASSERT_TRUE(spin([&] { return finished == 4; }));
    EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(overlap.load(), 0);
    EXPECT_FALSE(queue.busy());
    // Server-side queue wait: every started job recorded; the last one waited behind three jobs
    // of >= 20 ms each, the first not at all (nearest rank: p50 of 4 is the 2nd, p99 the 4th).
    const QueueWaitStats& wait = queue.waitStats();
    EXPECT_EQ(wait.count(), 4u);
    EXPECT_GE(wait.quantile(0.99), 0.060);
    EXPECT_LT(wait.quantile(0.0), 0.020);
    EXPECT_GE(wait.quantile(0.5), 0.020);
    EXPECT_GE(wait.sum(), 0.020 + 0.040 + 0.060);
}

TEST_F(GenerationQueueTest, BoundedAndCancellable) {
    GenerationQueue queue(model_, 1, 16);
    QObject receiver;
    std::atomic<bool> started{false};
    GenerationOutcome::Status firstStatus = GenerationOutcome::Status::ok;
    bool firstDone = false;
    auto blocker = task(&receiver, [&](const std::atomic<bool>& cancel) {
        started = true;
        while (!cancel.load()) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    });
    blocker->onFinished = [&](const GenerationOutcome& o) {
        firstStatus = o.status;
        firstDone = true;
    };
    bool waitingRan = false;
    auto waiting = task(&receiver, [&](const std::atomic<bool>&) { waitingRan = true; });
    waiting->onFinished = [&](const GenerationOutcome&) { waitingRan = true; };
    ASSERT_TRUE(queue.enqueue(blocker));
    ASSERT_TRUE(spin([&] { return started.load(); }));
    ASSERT_TRUE(queue.enqueue(waiting));
    EXPECT_FALSE(queue.enqueue(task(&receiver, [](const std::atomic<bool>&) {})))
        << "one running and one waiting: the queue is full";
    EXPECT_EQ(queue.waiting(), 1);
    EXPECT_TRUE(queue.cancel(waiting->id));  // leaves the queue
    EXPECT_EQ(queue.waiting(), 0);
    EXPECT_FALSE(queue.cancel(blocker->id));  // running: cancelled, reports back
    ASSERT_TRUE(spin([&] { return firstDone; }));
    EXPECT_EQ(firstStatus, GenerationOutcome::Status::cancelled);
    drain(100);  // anything stray would arrive now
    EXPECT_FALSE(waitingRan);
    EXPECT_EQ(queue.waitStats().count(), 1u) << "a job cancelled while waiting never started";
}

TEST_F(GenerationQueueTest, ChatJobStreamsEventsToTheQueueThread) {
    GenerationQueue queue(model_, 8, 64);
    QObject receiver;
    auto job = std::make_shared<GenerationJob>();
    job->kind = GenerationJob::Kind::chat;
    job->chat.history.push_back(chat::Message::user("hi"));
    job->chat.sampling.temperature = 0;
    job->chat.forced_output = "<|channel|>final<|message|>Hello from the worker.<|return|>";
    job->receiver = &receiver;
    std::string streamed;
    bool started = false;
    GenerationOutcome outcome;
    bool done = false;
    job->onStarted = [&] { started = true; };
    job->onEvent = [&](const chat::ParserEvent& e) {
        EXPECT_EQ(QThread::currentThread(), receiver.thread());
        if (e.type == chat::EventType::content) streamed += e.text;
    };
    job->onFinished = [&](const GenerationOutcome& o) {
        outcome = o;
        done = true;
    };
    ASSERT_TRUE(queue.enqueue(job));
    ASSERT_TRUE(spin([&] { return done; }));
    EXPECT_TRUE(started);
    EXPECT_EQ(outcome.status, GenerationOutcome::Status::ok);
    EXPECT_EQ(outcome.chat.content, "Hello from the worker.");
    EXPECT_EQ(streamed, "Hello from the worker.");
    EXPECT_EQ(outcome.finishReason, "stop");
    EXPECT_GT(outcome.chat.usage.prompt_tokens, 0);
}

TEST_F(GenerationQueueTest, ReceiverGoneMeansNoCallbacks) {
    GenerationQueue queue(model_, 8, 16);
    bool called = false;
    auto receiver = std::make_unique<QObject>();
    std::atomic<bool> ran{false};
    auto job = task(receiver.get(), [&](const std::atomic<bool>&) { ran = true; });
    job->onFinished = [&](const GenerationOutcome&) { called = true; };
    receiver.reset();  // the request's connection went away before the job ran
    ASSERT_TRUE(queue.enqueue(job));
    ASSERT_TRUE(spin([&] { return ran.load() && !queue.busy(); }));
    EXPECT_FALSE(called);
}

}  // namespace
}  // namespace neural::host
