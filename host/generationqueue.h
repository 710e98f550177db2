// The engine host: one generation at a time (the engine is single-stream). GenerationQueue (on
// the owner's thread: the server's, or the desktop app's GUI thread) keeps a bounded FIFO of
// waiting jobs and hands one job at a time to EngineWorker, which runs it on its own QThread, so
// the Qt event loop never waits for the engine. Results and streaming events travel back as
// queued calls and are delivered on the owner's thread.
//
// The chat turn lives here once for every front end: the API's chat requests and the desktop
// app's replies are both Kind::chat jobs, with the same prompt cache per session, the same
// cancellation and the same context rule (EngineWorker::tokenBudget: a prompt that does not fit,
// or a reply limit beyond the context left, is refused with context_length_exceeded).
#pragma once

#include <QObject>
#include <QPointer>
#include <QThread>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/openai.h"
#include "backend/kv_cache.h"
#include "chat/parser.h"
#include "queuewait.h"
#include "runtime/model.h"
#include "runtime/session.h"

namespace neural::host {

struct GenerationOutcome {
    enum class Status { ok, cancelled, badRequest, engineError };
    Status status = Status::ok;
    std::string error;  // badRequest / engineError
    // OpenAI error code for badRequest; for engineError "model_files_changed" when the model's
    // files changed on disk since the load (neural::ModelFilesChanged).
    std::string errorCode;
    openai::ChatResult chat;  // chat jobs (usage filled for both kinds; completion jobs with
                              // logprobs: chat.logprobs holds the text's tokens)
    std::string text;         // completion jobs: the whole text
    std::vector<std::int64_t> textOffsets;  // completion jobs: each logprobs token's offset
    std::string finishReason;               // "stop", "length", "tool_calls"
    // The reply limit the job ran with: its max_tokens, else the queue's default, else the rest
    // of the context (EngineWorker::tokenBudget); 0 when it never started.
    int tokenBudget = 0;
    double promptSeconds = 0;
    double firstTokenSeconds = 0;  // job start -> first generated token
    double decodeSeconds = 0;
    // Structured output: tokens sampled under a constraint, and of those the steps that
    // needed the whole-vocabulary mask.
    std::int64_t constrainedSteps = 0;
    std::int64_t fullMaskSteps = 0;
};

// A piece of a raw completion's text as it is released, with the log-probabilities of the
// tokens it completes (CompletionRequest::logprobs) and their offsets in the whole text (code
// points).
struct TextPiece {
    std::string text;
    std::vector<chat::TokenLogprob> logprobs;
    std::vector<std::int64_t> offsets;
};

struct GenerationJob {
    // task: any engine work of the embedding app (its own chat session, say), run on the engine
    // thread in turn with the server's requests.
    enum class Kind { chat, completion, task };
    Kind kind = Kind::chat;
    openai::ChatRequest chat;
    openai::CompletionRequest completion;
    std::function<void(const std::atomic<bool>& cancel)> task;  // Kind::task, engine thread
    // The chat session (prompt cache) a chat job continues. The API's requests share one; the
    // desktop app keeps its own, so a GUI turn and an API request do not evict each other's KV.
    std::string session = "api";
    int maxTokens = 0;  // 0: the server default
    // Longest prompt accepted, in tokens (ServerConfig::maxPromptTokens); 0: the model's context.
    std::int64_t maxPromptTokens = 0;
    bool simulateEngineError = false;  // test option: the worker fails this job

    // Set from any thread; the worker's forward pass and token loop watch it.
    std::atomic<bool> cancel{false};
    // Flow control for a stream whose client reads slower than the engine writes: while set
    // (by the receiver, when its send buffer is full), the worker waits before its next token.
    // The worker also waits while more than kMaxUndelivered of its events have not reached the
    // receiver yet, so a pause takes effect within that many tokens.
    std::atomic<bool> paused{false};
    std::atomic<int> undelivered{0};
    static constexpr int kMaxUndelivered = 64;
    quint64 id = 0;
    std::chrono::steady_clock::time_point enqueuedAt;  // set by enqueue(), for the wait metric

    // Delivered on the queue's thread while `receiver` lives.
    QPointer<QObject> receiver;
    std::function<void()> onStarted;  // validated and running: a stream may send its headers
    std::function<void(const chat::ParserEvent&)> onEvent;  // chat
    std::function<void(const TextPiece&)> onText;           // completion
    std::function<void(const GenerationOutcome&)> onFinished;
};

class GenerationQueue;

// Lives on the engine thread; owns the chat sessions (the prompt caches, one per
// GenerationJob::session) and the raw-completion KV cache.
class EngineWorker : public QObject {
    Q_OBJECT
public:
    EngineWorker(std::shared_ptr<Model> model, GenerationQueue* queue, int defaultMaxTokens);

    void run(const std::shared_ptr<GenerationJob>& job);

private:
    // Blocks the engine thread while the job is paused or its receiver is behind
    // (GenerationJob::paused), until it resumes or is cancelled.
    static void waitForReceiver(const GenerationJob& job);
    GenerationOutcome runChat(const std::shared_ptr<GenerationJob>& job);
    GenerationOutcome runCompletion(const std::shared_ptr<GenerationJob>& job);
    int tokenBudget(std::int64_t promptTokens, std::optional<int> requested,
                    std::int64_t maxPromptTokens) const;

    std::shared_ptr<Model> m_model;
    GenerationQueue* m_queue;
    int m_defaultMaxTokens;
    std::map<std::string, std::unique_ptr<ChatSession>> m_sessions;
    std::unique_ptr<KvCache> m_rawCache;
    std::vector<TokenId> m_rawTokens;  // tokens whose K/V m_rawCache holds
};

class GenerationQueue : public QObject {
    Q_OBJECT
public:
    // `maxWaiting`: jobs that may wait behind the running one; more are refused.
    GenerationQueue(std::shared_ptr<Model> model, int maxWaiting, int defaultMaxTokens,
                    QObject* parent = nullptr);
    ~GenerationQueue() override;

    // False when the queue is full (the caller answers 503).
    bool enqueue(const std::shared_ptr<GenerationJob>& job);
    // A waiting job leaves the queue (returns true: no callback of it will come); the running
    // one is cancelled (the worker stops between layers or tokens) and still reports through
    // onFinished.
    bool cancel(quint64 jobId);

    int waiting() const { return static_cast<int>(m_waiting.size()); }
    // The jobs that run before job `jobId`: the running one and those waiting in front of it
    // (0 while it runs; -1 when it is neither waiting nor running). changed() follows a move.
    int jobsAhead(quint64 jobId) const;
    bool busy() const { return m_running != nullptr; }
    int maxWaiting() const { return m_maxWaiting; }
    // Time from enqueue() to the hand-over to the engine thread, of every job started (HTTP
    // requests and the embedding app's tasks; jobs cancelled while waiting never start).
    const QueueWaitStats& waitStats() const { return m_waitStats; }

    // Called by the worker (any thread): posts the delivery to this object's thread.
    void postStarted(const std::shared_ptr<GenerationJob>& job);
    void postEvent(const std::shared_ptr<GenerationJob>& job, chat::ParserEvent event);
    void postText(const std::shared_ptr<GenerationJob>& job, TextPiece piece);
    void postFinished(const std::shared_ptr<GenerationJob>& job, GenerationOutcome outcome);

signals:
    void changed();  // queue length or busy state changed

private:
    void startNext();

    int m_maxWaiting;
    std::deque<std::shared_ptr<GenerationJob>> m_waiting;
    std::shared_ptr<GenerationJob> m_running;
    QThread m_thread;
    EngineWorker* m_worker;  // lives on m_thread
    quint64 m_nextId = 1;
    QueueWaitStats m_waitStats;
};

}  // namespace neural::host
