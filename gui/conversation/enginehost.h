// The GUI's side of the engine. One engine per app: a loaded Model and ONE engine thread, the
// engine host's GenerationQueue with its EngineWorker (host/, a QObject on a worker QThread).
// The GUI's chat turns run there as GenerationJob::Kind::chat jobs (the same chat turn, prompt
// cache, cancellation and context rule as the API's requests), in turn with the embedded API
// server's requests, so GUI and server share the model, its memory and its telemetry, and one
// generation runs at a time.
//
// Everything here is called on and signals on the GUI thread: requests go to the engine thread
// as queued jobs, streaming events come back queued (GenerationQueue::postEvent) and are
// batched to ~30 Hz (DeltaBatcher) before turnDelta. Loading (Model::load, creating the demo
// model) runs on a short-lived loader QThread, so the window stays responsive meanwhile.
#pragma once

#include <QJsonObject>
#include <QList>
#include <QObject>
#include <QString>
#include <QStringList>
#include <QThread>

#include <filesystem>
#include <functional>
#include <memory>
#include <vector>

#include "api/openai.h"
#include "conversation/deltabatcher.h"
#include "runtime/model.h"

namespace neural::host {
class GenerationQueue;
}

namespace neural::gui {

struct ChatTurn {
    QString role;     // "user" / "assistant" / "tool"
    QString content;  // a tool round: the result the model reads (empty: not run yet)
    // Role "tool": one tool round of the reply (docs/TOOLS.md "Tools in the desktop app"): the
    // reasoning that led to the call, the call as the model wrote it (recipient "NS.TOOL" or
    // "python", its channel and content type) and, in `content`, the result.
    QString reasoning;
    QString toolRecipient;
    QString toolChannel;
    QString toolContentType;
    QString toolArguments;
    QString toolPreamble;  // a note to the user the model wrote before the call (commentary)
};

struct TurnRequest {
    QList<ChatTurn> history;  // the conversation so far, ending with the user's message
    QString systemPrompt;     // developer instructions; empty: none
    // The tools the model may call: the built-ins' namespaces (python, browser) go into the
    // system message, the MCP servers' into the developer message (docs/CHAT_FORMAT.md).
    std::vector<chat::ToolNamespace> systemTools;
    std::vector<chat::ToolNamespace> developerTools;
    QString reasoningEffort = QStringLiteral("medium");
    // Most tokens in the reply; 0: the rest of the context. A limit beyond the context left is
    // refused with context_length_exceeded (the API's rule, docs/API.md).
    int maxTokens = 2048;
    // The sampler's settings (SamplingParams; the limits are the API's, SamplingSettings).
    double temperature = 1.0;
    double topP = 1.0;
    int topK = 0;
    double minP = 0.0;
    quint64 seed = 0;  // 0: a fresh seed per turn
    // Harmony text emitted instead of sampling at the start of the reply (special tokens count
    // as such); sampling continues after it. Tests use it to get reasoning and answer text from
    // a random-weight model; everything after the sampler is the real path.
    QString forcedOutput;
    // Continue: the history ends before the reply cut by the token limit, whose reasoning and
    // text so far are here; the reply goes on from them (chat::render_reply_start) and the
    // report's reasoning and content are the whole reply.
    bool continueReply = false;
    QString continueReasoning;
    QString continueContent;
};

struct TurnReport {
    QString reasoning;
    QString content;
    QString finish;     // "stop" / "length" / "tool_calls" / "cancelled" / "error"
    QString error;      // engine error text (finish == "error")
    QString errorCode;  // the engine host's code, e.g. context_length_exceeded
    bool cancelled = false;
    qint64 promptTokens = 0;
    qint64 cachedTokens = 0;
    qint64 generatedTokens = 0;
    double ttftSeconds = 0;       // request start -> first token
    double decodeSeconds = 0;     // first -> last token
    double reasoningSeconds = 0;  // first reasoning text -> first answer text
    qint64 tokenLimit = 0;        // the reply limit the turn ran with (0: it never started)
    // finish == "tool_calls": the reply ended in a call (<|call|>) of a namespace of the prompt
    // or of any other recipient the model wrote; `reasoning` is then what came before it.
    QString toolRecipient;    // "filesystem.read_file", "python", "browser.search"
    QString toolChannel;      // "commentary" (functions), "analysis" (built-ins)
    QString toolContentType;  // "<|constrain|>json", "json", "code", or empty
    QString toolArguments;    // as generated (JSON, or python's code)
    double tokensPerSecond() const;
    QJsonObject toJson() const;  // the per-message stats stored with the reply
};

// The demo model's expert store, made with it (EngineHost::loadDemo).
std::filesystem::path demoStorePath(const std::filesystem::path& demoDir);

class EngineHost : public QObject {
    Q_OBJECT
public:
    enum class State { empty, loading, ready, failed };
    Q_ENUM(State)

    explicit EngineHost(QObject* parent = nullptr);
    ~EngineHost() override;

    // Loads `dir` (async; loadProgress, then stateChanged/ready/loadFailed follow). A running turn is cancelled and
    // the previous model unloaded first (modelUnloading lets the API server let go of it).
    // The CPU team's thread count is options.threads.
    void load(const QString& dir, const LoadOptions& options = {});
    // Creates the demo model (random weights, `neural synth --shape tiny`) in `dir` unless it is
    // there already, then loads it. Needs a tokenizer.json (demoTokenizerPath()).
    void loadDemo(const QString& dir, const QString& tokenizer);

    // Releases the model and the engine thread (the benchmark panel frees RAM/VRAM for its own
    // models): a running turn is cancelled, modelUnloading is emitted, the state becomes empty.
    // False (nothing done) while a model is loading.
    bool unloadModel();

    State state() const { return m_state; }
    QString stateText() const;  // "Loading NAME... 42%" while loading
    // The load's progress in percent (LoadOptions::on_progress) while loading, else -1.
    int loadPercent() const { return m_state == State::loading ? m_loadPercent : -1; }
    QString modelDir() const { return m_modelDir; }
    // True for a synthetic checkpoint (its weights are random: replies are nonsense).
    bool isDemo() const { return m_isDemo; }
    // "tiny: 2 layers, 8 experts (top-2), ... - on the CPU: no NVIDIA driver found (...)"
    QString modelSummary() const;
    // " - on the GPU", " - on the CPU" or " - on the CPU: <why the GPU is not used>".
    QString backendSummary() const;
    QString lastError() const { return m_error; }
    std::shared_ptr<Model> model() const { return m_model; }
    // The engine thread's queue (for ApiServer's shared-queue constructor); null unless ready.
    host::GenerationQueue* queue() const { return m_queue; }

    // Starts a reply; false (and nothing happens) when no model is ready or a turn is running.
    bool send(const TurnRequest& request);
    // The tokens of the prompt `request` renders to with the loaded tokenizer (the history, the
    // system and developer messages and, for a Continue, the reply so far): what the context
    // meter shows. -1 when no model is loaded.
    qint64 promptTokens(const TurnRequest& request) const;
    // The model's context in tokens (Model::context_length); 0 when no model is loaded.
    qint64 contextLength() const;
    void stop();  // cancels the running turn; it still ends with turnFinished (cancelled)
    bool busy() const { return m_jobId != 0; }
    // The jobs the running turn waits behind (API requests, which share the engine): 0 once it
    // runs or when there is none. queuePositionChanged follows each change.
    int jobsAhead() const;
    DeltaBatcher& batcher() { return m_batcher; }
    // Test hook: TurnRequest::forcedOutput for every turn (the smoke tests' main window).
    void setForcedOutput(const QString& text) { m_forcedOutput = text; }
    // Test hook: the next turns' forced outputs, one per turn, before setForcedOutput's.
    void queueForcedOutput(const QString& text) { m_forcedQueue.push_back(text); }
    // The chat request of the last turn sent, as its job carries it to the engine host (the
    // sampling parameters reach the sampler from there as an API request's do).
    const openai::ChatRequest& lastRequest() const { return m_lastRequest; }

signals:
    void stateChanged(neural::gui::EngineHost::State state);
    void ready();
    // While loading: the percent done (rising, 100 when the model is ready) and the step.
    void loadProgress(int percent, const QString& stage);
    void loadFailed(const QString& error);
    void modelUnloading();
    void turnStarted();
    void turnDelta(const QString& reasoning, const QString& content);  // batched
    void turnFinished(const neural::gui::TurnReport& report);
    void busyChanged(bool busy);
    void queuePositionChanged(int jobsAhead);

private:
    struct LoadResult;
    using Progress = std::function<void(double fraction, const std::string& stage)>;
    void startLoad(std::function<std::shared_ptr<Model>(const Progress&)> work, const QString& dir);
    void setLoadProgress(int percent, const QString& stage);
    void unload();
    void setState(State s);
    // The engine host's chat request for a turn (everything converted from Qt types).
    openai::ChatRequest chatRequest(const TurnRequest& request) const;

    State m_state = State::empty;
    QString m_modelDir;
    QString m_error;
    bool m_isDemo = false;
    QString m_forcedOutput;
    QStringList m_forcedQueue;
    std::shared_ptr<Model> m_model;
    host::GenerationQueue* m_queue = nullptr;
    QThread* m_loader = nullptr;
    quint64 m_jobId = 0;
    int m_loadPercent = 0;
    QString m_loadStage;
    openai::ChatRequest m_lastRequest;
    DeltaBatcher m_batcher;
};

}  // namespace neural::gui

Q_DECLARE_METATYPE(neural::gui::TurnReport)
