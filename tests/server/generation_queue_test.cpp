// GenerationQueue + EngineWorker in-process (tiny fixture): FIFO order and one job at a time,
// the bound, cancelling waiting and running jobs, and callbacks arriving on the queue's thread.
#include <gtest/gtest.h>

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QThread>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "generationqueue.h"
#include "runtime/model.h"
#include "support/fixtures.h"

namespace neural::server {
namespace {

class GenerationQueueTest : public ::testing::Test {
protected:
    static void SetUpTestSuite()
    {
        static int argc = 1;
        static char name[] = "generation_queue_test";
        static char *argv[] = {name, nullptr};
        if (!QCoreApplication::instance())
            app_ = new QCoreApplication(argc, argv);
        LoadOptions one_thread;  // results do not depend on it; the machine is shared
        one_thread.threads = 1;
        model_ = Model::load(test::tiny_model_dir(), one_thread);
    }
    static void TearDownTestSuite() { model_.reset(); }

    // Runs the event loop until `done` or 10 s.
    template <typename Pred>
    static bool spin(Pred done)
    {
        QElapsedTimer t;
        t.start();
        while (!done() && t.elapsed() < 10000)
            QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
        return done();
    }

    static void drain(int ms)
    {
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < ms)
            QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
    }

    static std::shared_ptr<GenerationJob> task(QObject *receiver,
                                               std::function<void(const std::atomic<bool> &)> fn)
    {
        auto job = std::make_shared<GenerationJob>();
        job->kind = GenerationJob::Kind::task;
        job->task = std::move(fn);
        job->receiver = receiver;
        return job;
    }

    static QCoreApplication *app_;
    static std::shared_ptr<const Model> model_;
};
QCoreApplication *GenerationQueueTest::app_ = nullptr;
std::shared_ptr<const Model> GenerationQueueTest::model_;

TEST_F(GenerationQueueTest, RunsJobsInOrderOneAtATime)
{
    GenerationQueue queue(model_, 8, 16);
    QObject receiver;
    std::atomic<int> running{0};
    std::atomic<int> overlap{0};
    std::vector<int> order;
    int finished = 0;
    for (int i = 0; i < 4; ++i) {
        auto job = task(&receiver, [&, i](const std::atomic<bool> &) {
            if (running.fetch_add(1) != 0)
                overlap.fetch_add(1);
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            order.push_back(i);  // one job at a time: no data race
            running.fetch_sub(1);
        });
        job->onFinished = [&](const GenerationOutcome &o) {
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
    const QueueWaitStats &wait = queue.waitStats();
    EXPECT_EQ(wait.count(), 4u);
    EXPECT_GE(wait.quantile(0.99), 0.060);
    EXPECT_LT(wait.quantile(0.0), 0.020);
    EXPECT_GE(wait.quantile(0.5), 0.020);
    EXPECT_GE(wait.sum(), 0.020 + 0.040 + 0.060);
}

TEST_F(GenerationQueueTest, BoundedAndCancellable)
{
    GenerationQueue queue(model_, 1, 16);
    QObject receiver;
    std::atomic<bool> started{false};
    GenerationOutcome::Status firstStatus = GenerationOutcome::Status::ok;
    bool firstDone = false;
    auto blocker = task(&receiver, [&](const std::atomic<bool> &cancel) {
        started = true;
        while (!cancel.load())
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
    });
    blocker->onFinished = [&](const GenerationOutcome &o) {
        firstStatus = o.status;
        firstDone = true;
    };
    bool waitingRan = false;
    auto waiting = task(&receiver, [&](const std::atomic<bool> &) { waitingRan = true; });
    waiting->onFinished = [&](const GenerationOutcome &) { waitingRan = true; };
    ASSERT_TRUE(queue.enqueue(blocker));
    ASSERT_TRUE(spin([&] { return started.load(); }));
    ASSERT_TRUE(queue.enqueue(waiting));
    EXPECT_FALSE(queue.enqueue(task(&receiver, [](const std::atomic<bool> &) {})))
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

TEST_F(GenerationQueueTest, ChatJobStreamsEventsToTheQueueThread)
{
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
    job->onEvent = [&](const chat::ParserEvent &e) {
        EXPECT_EQ(QThread::currentThread(), receiver.thread());
        if (e.type == chat::EventType::content)
            streamed += e.text;
    };
    job->onFinished = [&](const GenerationOutcome &o) {
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

TEST_F(GenerationQueueTest, ReceiverGoneMeansNoCallbacks)
{
    GenerationQueue queue(model_, 8, 16);
    bool called = false;
    auto receiver = std::make_unique<QObject>();
    std::atomic<bool> ran{false};
    auto job = task(receiver.get(), [&](const std::atomic<bool> &) { ran = true; });
    job->onFinished = [&](const GenerationOutcome &) { called = true; };
    receiver.reset();  // the request's connection went away before the job ran
    ASSERT_TRUE(queue.enqueue(job));
    ASSERT_TRUE(spin([&] { return ran.load() && !queue.busy(); }));
    EXPECT_FALSE(called);
}

}  // namespace
}  // namespace neural::server
