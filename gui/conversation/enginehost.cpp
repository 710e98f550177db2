#include "conversation/enginehost.h"

#include <QDir>
#include <QFileInfo>
#include <QMetaObject>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <random>

#include "common/paths.h"
#include "chat/render.h"
#include "generationqueue.h"
#include "neural/error.h"
#include "runtime/session.h"
#include "api/openai.h"
#include "store/repack.h"
#include "synth/synth.h"

namespace neural::gui {

namespace {
std::string utf8(const QString& s) { return s.toStdString(); }
QString qstr(const std::string& s) { return QString::fromStdString(s); }
}  // namespace

double TurnReport::tokensPerSecond() const {
    // The first token's time is in ttft; the rate counts the tokens after it.
    return decodeSeconds > 0 && generatedTokens > 1
               ? static_cast<double>(generatedTokens - 1) / decodeSeconds
               : 0.0;
}

QJsonObject TurnReport::toJson() const {
    QJsonObject o{{QStringLiteral("finish"), finish},
                  {QStringLiteral("prompt_tokens"), promptTokens},
                  {QStringLiteral("cached_tokens"), cachedTokens},
                  {QStringLiteral("tokens"), generatedTokens},
                  {QStringLiteral("tokens_per_second"), tokensPerSecond()},
                  {QStringLiteral("ttft_s"), ttftSeconds},
                  {QStringLiteral("decode_s"), decodeSeconds}};
    if (reasoningSeconds > 0) o.insert(QStringLiteral("reasoning_s"), reasoningSeconds);
    if (!error.isEmpty()) o.insert(QStringLiteral("error"), error);
    return o;
}

EngineHost::EngineHost(QObject* parent) : QObject(parent) {
    qRegisterMetaType<neural::gui::TurnReport>();
    connect(&m_batcher, &DeltaBatcher::released, this, &EngineHost::turnDelta);
}

EngineHost::~EngineHost() {
    if (m_loader) {
        // Shutdown while loading: the load cannot be interrupted; wait for it.
        m_loader->wait();
        delete m_loader;
    }
    unload();
}

QString EngineHost::stateText() const {
    switch (m_state) {
        case State::empty:
            return tr("No model loaded");
        case State::loading:
            return tr("Loading %1\u2026 %2%")
                .arg(QFileInfo(m_modelDir).fileName())
                .arg(m_loadPercent);
        case State::ready:
            return tr("Ready: %1").arg(modelSummary());
        case State::failed:
            return tr("Loading failed: %1").arg(m_error);
    }
    return {};
}

QString EngineHost::modelSummary() const {
    if (!m_model) return {};
    const ModelConfig& c = m_model->config();
    return tr("%1 - %2 layers, %3 experts (top-%4), hidden %5, %6 KV heads, vocab %7%8")
               .arg(QFileInfo(m_modelDir).fileName())
               .arg(c.num_layers)
               .arg(c.num_experts)
               .arg(c.experts_per_token)
               .arg(c.hidden_size)
               .arg(c.num_kv_heads)
               .arg(c.vocab_size)
               .arg(m_model->store() ? tr(", experts from a store") : QString()) +
           backendSummary();
}

QString EngineHost::backendSummary() const {
    if (!m_model) return {};
    if (std::string_view(m_model->backend_name()) == "cuda") return tr(" - on the GPU");
    const std::string& why = m_model->gpu_unavailable_reason();
    // The engine's one line on why the GPU is not used (no driver, a driver too old, no GPU).
    return why.empty() ? tr(" - on the CPU")
                       : tr(" - on the CPU: %1").arg(QString::fromStdString(why));
}

void EngineHost::setState(State s) {
    m_state = s;
    emit stateChanged(s);
}

void EngineHost::unload() {
    if (m_jobId != 0 && m_queue) m_queue->cancel(m_jobId);
    if (m_queue || m_model) emit modelUnloading();
    // Deleting the queue stops and joins the engine thread; only then may the session go.
    delete m_queue;
    m_queue = nullptr;
    m_model.reset();
    if (m_jobId != 0) {
        // The queue went down with the turn; its onFinished never comes, so end it here.
        m_jobId = 0;
        m_batcher.flush();
        TurnReport r;
        r.cancelled = true;
        r.finish = QStringLiteral("cancelled");
        r.error = tr("the model was unloaded");
        emit busyChanged(false);
        emit turnFinished(r);
    }
}

bool EngineHost::unloadModel() {
    if (m_loader) return false;
    unload();
    m_isDemo = false;
    if (m_state != State::empty) setState(State::empty);
    return true;
}

void EngineHost::setLoadProgress(int percent, const QString& stage) {
    if (m_state != State::loading || percent <= m_loadPercent) return;
    m_loadPercent = percent;
    m_loadStage = stage;
    emit loadProgress(percent, stage);
}

void EngineHost::startLoad(std::function<std::shared_ptr<Model>(const Progress&)> work,
                           const QString& dir) {
    if (m_loader) {
        m_error = tr("a model is still loading");
        emit loadFailed(m_error);
        return;
    }
    unload();
    m_modelDir = dir;
    m_error.clear();
    m_isDemo = false;
    m_loadPercent = 0;
    m_loadStage.clear();
    setState(State::loading);
    auto result = std::make_shared<std::pair<std::shared_ptr<Model>, QString>>();
    // Called on the loader thread; delivered on this one (this object outlives the loader: the
    // destructor waits for it). Whole percents only, so a fine-grained load posts ~100 events.
    auto lastPosted = std::make_shared<int>(0);
    Progress progress = [this, lastPosted](double fraction, const std::string& stage) {
        const int percent = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * 100.0);
        if (percent <= *lastPosted) return;
        *lastPosted = percent;
        const QString what = QString::fromStdString(stage);
        QMetaObject::invokeMethod(
            this, [this, percent, what] { setLoadProgress(percent, what); }, Qt::QueuedConnection);
    };
    m_loader = QThread::create([work = std::move(work), result, progress] {
        try {
            result->first = work(progress);
        } catch (const std::exception& e) {
            result->second = QString::fromUtf8(e.what());
        }
    });
    m_loader->setObjectName(QStringLiteral("neural-loader"));
    connect(m_loader, &QThread::finished, this, [this, result] {
        m_loader->deleteLater();
        m_loader = nullptr;
        if (!result->first) {
            m_error = result->second.isEmpty() ? tr("unknown error") : result->second;
            spdlog::error("loading {} failed: {}", utf8(m_modelDir), utf8(m_error));
            setState(State::failed);
            emit loadFailed(m_error);
            return;
        }
        setLoadProgress(100, QStringLiteral("ready"));
        m_model = std::move(result->first);
        m_isDemo = QFileInfo::exists(m_modelDir + QLatin1Char('/') +
                                     QString::fromLatin1(synth::kSynthMarkerFile));
        // No default reply limit (neural-server's --default-max-tokens 0): an embedded API
        // request without max_tokens may use the rest of the context, as docs/API.md says, and
        // a desktop turn brings its own limit (TurnRequest::maxTokens).
        m_queue = new host::GenerationQueue(m_model, 8, 0, this);
        connect(m_queue, &host::GenerationQueue::changed, this, [this] {
            if (m_jobId != 0) emit queuePositionChanged(jobsAhead());
        });
        spdlog::info("model ready: {}", utf8(modelSummary()));
        setState(State::ready);
        emit ready();
    });
    m_loader->start();
}

void EngineHost::load(const QString& dir, const LoadOptions& options) {
    const std::string path = utf8(dir);
    startLoad(
        [path, options, dir](const Progress& progress) {
            LoadOptions o = options;
            o.on_progress = progress;
            // The learned statistics go to the app's data folder, not into the checkpoint's
            // folder (common/paths.h desktopRoutingStatsPath).
            const std::filesystem::path stats =
                desktopRoutingStatsPath(QString::fromStdString(o.routing_stats), dir,
                                        QString::fromStdString(o.store.string()));
            o.routing_stats = stats.empty() ? std::string("off") : stats.string();
            return std::shared_ptr<Model>(Model::load(path, o));
        },
        dir);
}

std::filesystem::path demoStorePath(const std::filesystem::path& demoDir) {
    return demoDir / "experts-raw.nstore";
}

void EngineHost::loadDemo(const QString& dir, const QString& tokenizer) {
    const std::string path = utf8(dir);
    const std::string tok = utf8(tokenizer);
    startLoad(
        [path, tok](const Progress& progress) {
            if (!std::filesystem::exists(std::filesystem::path(path) / "config.json")) {
                if (tok.empty())
                    fail(
                        "the demo model's tokenizer (share/neural/demo/tokenizer.json) is "
                        "missing from this installation: reinstall Neural, or set "
                        "NEURAL_DEMO_TOKENIZER to a gpt-oss tokenizer.json");
                spdlog::info("creating the demo model in {} (random weights)", path);
                synth::Options o;
                o.shape = synth::shape_named("tiny");
                synth::WriteOptions w;
                w.tokenizer = tok;
                w.force = true;  // our own folder: replace what an interrupted attempt left
                w.threads = 2;   // leave the rest of the machine alone
                synth::write_checkpoint(synth::make_plan(o), path, w);
            }
            // The demo runs as a set-up model does: with its expert store (the fused kernels
            // read the store's records; without one the reference path ran it at a tenth of the
            // speed). Made once beside the demo's checkpoint, in the app's own folder.
            LoadOptions o;
            o.on_progress = progress;
            // The GPU when there is a usable one, as the built-in profiles do; else the CPU, and
            // the one-line reason goes to the log and the status bar.
            o.backend = "auto";
            const std::filesystem::path store = demoStorePath(path);
            if (!std::filesystem::exists(store)) {
                try {
                    store::RepackOptions r;
                    r.checkpoint = path;
                    r.out = store;
                    r.kind = store::StoreKind::kRaw;
                    r.threads = 2;
                    r.created_by = "neural-desktop (demo)";
                    store::repack(r);
                    spdlog::info("created the demo model's expert store {}", store.string());
                } catch (const std::exception& e) {
                    // Still usable without it (slower): say why in the log.
                    spdlog::warn("the demo model's expert store was not created: {}", e.what());
                }
            }
            if (std::filesystem::exists(store)) o.store = store;
            return std::shared_ptr<Model>(Model::load(path, o));
        },
        dir);
}

openai::ChatRequest EngineHost::chatRequest(const TurnRequest& request) const {
    // Everything is converted up front: no Qt types cross over to the engine thread.
    openai::ChatRequest req;
    req.system.conversation_start_date = today_iso_date();
    try {
        req.system.reasoning_effort =
            chat::reasoning_effort_from_name(utf8(request.reasoningEffort));
    } catch (const Error&) {
        req.system.reasoning_effort = chat::ReasoningEffort::medium;
    }
    if (!request.systemPrompt.trimmed().isEmpty())
        req.developer.instructions = utf8(request.systemPrompt);
    req.system.tools = request.systemTools;
    req.developer.tools = request.developerTools;
    for (const ChatTurn& t : request.history) {
        if (t.role == QLatin1String("assistant")) {
            req.history.push_back(chat::Message::assistant("final", utf8(t.content)));
        } else if (t.role == QLatin1String("tool")) {
            // The round as the model wrote it: its reasoning, the call, then the tool's answer
            // authored by the recipient on the call's channel (harmony's tool message).
            const std::string channel =
                t.toolChannel.isEmpty() ? std::string("commentary") : utf8(t.toolChannel);
            if (!t.reasoning.isEmpty())
                req.history.push_back(chat::Message::assistant("analysis", utf8(t.reasoning)));
            if (!t.toolPreamble.isEmpty())
                req.history.push_back(chat::Message::assistant("commentary", utf8(t.toolPreamble)));
            chat::Message call = chat::Message::assistant(channel, utf8(t.toolArguments));
            call.recipient = utf8(t.toolRecipient);
            if (!t.toolContentType.isEmpty()) call.content_type = utf8(t.toolContentType);
            req.history.push_back(std::move(call));
            chat::Message result =
                chat::Message::tool_result(utf8(t.toolRecipient), utf8(t.content));
            result.channel = channel;
            req.history.push_back(std::move(result));
        } else {
            req.history.push_back(chat::Message::user(utf8(t.content)));
        }
    }
    // The user's reply limit; none (0): the rest of the context, the API's rule without one.
    if (request.maxTokens > 0) req.max_tokens = request.maxTokens;
    // The API's fields (openai::parse_chat_request fills the same SamplingParams; the panel's
    // widgets hold the values within its limits).
    req.sampling.temperature = static_cast<float>(request.temperature);
    req.sampling.top_p = static_cast<float>(request.topP);
    req.sampling.top_k = request.topK;
    req.sampling.min_p = static_cast<float>(request.minP);
    req.seed_given = request.seed != 0;
    req.sampling.seed = request.seed != 0 ? request.seed : std::random_device{}();
    const QString forced = !request.forcedOutput.isEmpty() ? request.forcedOutput
                           : !m_forcedQueue.isEmpty()      ? m_forcedQueue.first()
                                                           : m_forcedOutput;
    if (!forced.isEmpty()) req.forced_output = utf8(forced);
    if (request.continueReply)
        req.reply_start = openai::ChatRequest::ReplyStart{utf8(request.continueReasoning),
                                                          utf8(request.continueContent)};
    return req;
}

qint64 EngineHost::promptTokens(const TurnRequest& request) const {
    if (!m_model) return -1;
    const openai::ChatRequest req = chatRequest(request);
    const Tokenizer& tok = m_model->tokenizer();
    std::size_t n =
        chat::render_for_completion(turn_conversation(req.system, req.developer, req.history))
            .tokens(tok)
            .size();
    if (req.reply_start)
        n += chat::render_reply_start(req.reply_start->reasoning, req.reply_start->content)
                 .tokens(tok)
                 .size();
    return static_cast<qint64>(n);
}

qint64 EngineHost::contextLength() const { return m_model ? m_model->context_length() : 0; }

bool EngineHost::send(const TurnRequest& request) {
    if (m_state != State::ready || !m_queue || m_jobId != 0) return false;

    // The turn runs on the engine host like an API chat request (host/generationqueue.h): the
    // same prompt cache, cancellation and context rule.
    auto job = std::make_shared<host::GenerationJob>();
    job->kind = host::GenerationJob::Kind::chat;
    job->session = "desktop";
    job->chat = chatRequest(request);
    if (request.forcedOutput.isEmpty() && !m_forcedQueue.isEmpty()) m_forcedQueue.removeFirst();

    // When the reasoning and the answer began to arrive (GUI thread, for reasoningSeconds).
    // And the reply's tool call: the parser's message for it (its header and arguments) and
    // whether <|call|> ended the reply.
    struct Timing {
        std::optional<std::chrono::steady_clock::time_point> firstReasoning, firstContent;
        std::optional<chat::Message> call;
        bool callFinish = false;
    };
    auto timing = std::make_shared<Timing>();
    job->receiver = this;
    job->onStarted = [this] { emit turnStarted(); };
    job->onEvent = [this, timing](const chat::ParserEvent& e) {
        if (e.type == chat::EventType::message_end && e.message.role == chat::Role::assistant &&
            e.message.is_tool_call())
            timing->call = e.message;
        if (e.type == chat::EventType::finish)
            timing->callFinish = e.finish_reason == chat::FinishReason::tool_calls;
        const bool thinking = e.type == chat::EventType::reasoning;
        if (!thinking && e.type != chat::EventType::content && e.type != chat::EventType::preamble)
            return;
        auto& first = thinking ? timing->firstReasoning : timing->firstContent;
        if (!first) first = std::chrono::steady_clock::now();
        if (thinking)
            m_batcher.addReasoning(qstr(e.text));
        else
            m_batcher.addContent(qstr(e.text));
    };
    job->onFinished = [this, timing](const host::GenerationOutcome& outcome) {
        m_batcher.flush();
        TurnReport r;
        r.reasoning = qstr(outcome.chat.reasoning);
        r.content = qstr(outcome.chat.content);
        r.cancelled = outcome.status == host::GenerationOutcome::Status::cancelled;
        r.promptTokens = outcome.chat.usage.prompt_tokens;
        r.cachedTokens = outcome.chat.usage.cached_tokens;
        r.generatedTokens = outcome.chat.usage.completion_tokens;
        r.ttftSeconds = outcome.firstTokenSeconds;
        r.decodeSeconds = outcome.decodeSeconds;
        r.tokenLimit = outcome.tokenBudget;
        if (timing->firstReasoning) {
            // Thinking lasts from its first text to the answer's first text (or the end).
            const auto end = timing->firstContent.value_or(std::chrono::steady_clock::now());
            r.reasoningSeconds =
                std::chrono::duration<double>(end - *timing->firstReasoning).count();
        }
        if (outcome.status == host::GenerationOutcome::Status::engineError ||
            outcome.status == host::GenerationOutcome::Status::badRequest) {
            r.finish = QStringLiteral("error");
            r.errorCode = qstr(outcome.errorCode);
            r.error = outcome.errorCode == "context_length_exceeded"
                          ? tr("This conversation no longer fits the model's context (%1). "
                               "Start a new conversation, or lower the reply's token limit.")
                                .arg(qstr(outcome.error))
                          : qstr(outcome.error);
            spdlog::error("generation failed: {}", outcome.error);
        } else if (r.cancelled) {
            r.finish = QStringLiteral("cancelled");
        } else {
            r.finish = QString::fromStdString(outcome.finishReason);
        }
        if (!r.cancelled && r.finish != QLatin1String("error") && timing->callFinish &&
            timing->call && timing->call->has_text()) {
            // A call of any recipient, the built-ins' too (chat::Completion reports only
            // functions.* calls and counts a built-in call's text as reasoning: taken off here).
            const chat::Message& call = *timing->call;
            r.finish = QStringLiteral("tool_calls");
            r.toolRecipient = qstr(call.recipient.value_or(std::string()));
            r.toolChannel = qstr(call.channel.value_or(std::string()));
            r.toolContentType = qstr(call.content_type.value_or(std::string()));
            r.toolArguments = qstr(call.text());
            if (!r.toolRecipient.startsWith(QLatin1String("functions.")) &&
                r.reasoning.endsWith(r.toolArguments))
                r.reasoning.chop(r.toolArguments.size());
        }
        m_jobId = 0;
        emit busyChanged(false);
        emit turnFinished(r);
    };
    m_lastRequest = job->chat;  // before the engine thread may read the job
    if (!m_queue->enqueue(job)) return false;
    m_jobId = job->id;
    emit busyChanged(true);
    emit queuePositionChanged(jobsAhead());
    return true;
}

int EngineHost::jobsAhead() const {
    if (m_jobId == 0 || !m_queue) return 0;
    return std::max(0, m_queue->jobsAhead(m_jobId));
}

void EngineHost::stop() {
    if (m_jobId == 0 || !m_queue) return;
    // A job still waiting behind an API request leaves the queue without any callback.
    if (m_queue->cancel(m_jobId)) {
        m_jobId = 0;
        m_batcher.flush();
        TurnReport r;
        r.cancelled = true;
        r.finish = QStringLiteral("cancelled");
        emit busyChanged(false);
        emit turnFinished(r);
    }
}

}  // namespace neural::gui
