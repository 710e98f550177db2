#include "generationqueue.h"

#include <QMetaObject>

#include <algorithm>
#include <chrono>
#include <thread>

#include "chat/render.h"
#include "chat/utf8_stream.h"
#include "neural/error.h"
#include "runtime/generate.h"

namespace neural::host {

namespace {
using Clock = std::chrono::steady_clock;
double secondsBetween(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}
}  // namespace

// ---- EngineWorker (engine thread) -------------------------------------------------------------

EngineWorker::EngineWorker(std::shared_ptr<Model> model, GenerationQueue* queue,
                           int defaultMaxTokens)
    : m_model(std::move(model)), m_queue(queue), m_defaultMaxTokens(defaultMaxTokens) {}

int EngineWorker::tokenBudget(std::int64_t promptTokens, std::optional<int> requested,
                              std::int64_t maxPromptTokens) const {
    // Checked before the prompt pass: a refused prompt costs its tokenization only.
    if (maxPromptTokens > 0 && promptTokens > maxPromptTokens) {
        throw openai::RequestError(
            fmt::format("the prompt has {} tokens; this server accepts prompts of at most {} "
                        "tokens (--max-prompt-tokens)",
                        promptTokens, maxPromptTokens),
            "messages", "context_length_exceeded");
    }
    const std::int64_t context = m_model->context_length();
    // A model without a known context (never the case for gpt-oss files) gets a fixed limit.
    if (context <= 0) return requested.value_or(m_defaultMaxTokens > 0 ? m_defaultMaxTokens : 4096);
    const std::int64_t room = context - promptTokens;
    if (room < 1) {
        throw openai::RequestError(
            fmt::format("the prompt has {} tokens; the model's context is {} tokens", promptTokens,
                        context),
            "messages", "context_length_exceeded");
    }
    if (requested && *requested > room) {
        throw openai::RequestError(
            fmt::format("the model's context is {} tokens, but {} were requested ({} in the "
                        "prompt, {} for the completion)",
                        context, promptTokens + *requested, promptTokens, *requested),
            "max_tokens", "context_length_exceeded");
    }
    // Without a request limit, answer up to the server default (0: none) or the end of the
    // context, as OpenAI's API does: agents treat a reply cut short as a failed turn.
    if (requested) return *requested;
    const std::int64_t limit =
        m_defaultMaxTokens > 0 ? std::min<std::int64_t>(m_defaultMaxTokens, room) : room;
    return static_cast<int>(std::min<std::int64_t>(limit, std::int64_t{1} << 30));
}

void EngineWorker::run(const std::shared_ptr<GenerationJob>& job) {
    GenerationOutcome out;
    if (job->cancel.load()) {
        out.status = GenerationOutcome::Status::cancelled;
        m_queue->postFinished(job, std::move(out));
        return;
    }
    try {
        if (job->simulateEngineError) fail("simulated engine failure (test option)");
        // Every request first: a store changed on disk since the load is refused before any work.
        if (job->kind != GenerationJob::Kind::task) m_model->check_files();
        switch (job->kind) {
            case GenerationJob::Kind::chat:
                out = runChat(job);
                break;
            case GenerationJob::Kind::completion:
                out = runCompletion(job);
                break;
            case GenerationJob::Kind::task:
                m_queue->postStarted(job);
                if (job->task) job->task(job->cancel);
                if (job->cancel.load()) out.status = GenerationOutcome::Status::cancelled;
                break;
        }
    } catch (const openai::RequestError& e) {
        out = {};
        out.status = GenerationOutcome::Status::badRequest;
        out.error = e.what();
        out.errorCode = e.code();
    } catch (const std::exception& e) {
        // Engine failures end this request only; the session is rebuilt for the next one.
        out = {};
        out.status = GenerationOutcome::Status::engineError;
        out.error = e.what();
        // The model's files changed under it: unavailable until reloaded (the server's 503).
        if (dynamic_cast<const ModelFilesChanged*>(&e) != nullptr)
            out.errorCode = "model_files_changed";
        m_sessions.erase(job->session);
        m_rawCache.reset();
        m_rawTokens.clear();
    }
    m_queue->postFinished(job, std::move(out));
}

void EngineWorker::waitForReceiver(const GenerationJob& job) {
    // Polled: a pause lasts seconds (a client that stopped reading) and ends with the receiver
    // draining its buffer or cancelling the job; 2 ms costs nothing beside a token's time.
    while (!job.cancel.load() &&
           (job.paused.load() || job.undelivered.load() > GenerationJob::kMaxUndelivered)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
}

GenerationOutcome EngineWorker::runChat(const std::shared_ptr<GenerationJob>& job) {
    std::unique_ptr<ChatSession>& session = m_sessions[job->session];
    if (!session) session = std::make_unique<ChatSession>(*m_model);
    const openai::ChatRequest& req = job->chat;
    const Tokenizer& tok = m_model->tokenizer();
    // The whole history arrives with every request; the session keeps the KV of the previous
    // one and processes only what differs (the prompt cache).
    session->set_conversation(req.system, req.developer, req.history);
    std::vector<TokenId> replyStart;
    if (req.reply_start)
        replyStart = chat::render_reply_start(req.reply_start->reasoning, req.reply_start->content)
                         .tokens(tok);
    const auto promptTokens = static_cast<std::int64_t>(
        chat::render_for_completion(session->conversation()).tokens(tok).size() +
        replyStart.size());

    TurnOptions options;
    options.max_tokens = tokenBudget(promptTokens, req.max_tokens, job->maxPromptTokens);
    options.sampling = req.sampling;
    if (req.forced_output) options.forced_tokens = tok.encode(*req.forced_output, true);
    options.prefill_tokens = std::move(replyStart);
    options.stop_sequences = req.stop;
    options.constraint = req.constraint;
    options.logprobs = req.logprobs;
    options.cancel = &job->cancel;
    m_queue->postStarted(job);  // the request is valid: a stream may begin
    TurnResult r = session->respond(options, [&](const chat::ParserEvent& e) {
        m_queue->postEvent(job, e);
        waitForReceiver(*job);
    });

    GenerationOutcome out;
    out.status = r.cancelled ? GenerationOutcome::Status::cancelled : GenerationOutcome::Status::ok;
    out.chat.reasoning = std::move(r.reasoning);
    out.chat.content = std::move(r.content);
    out.chat.tool_calls = std::move(r.tool_calls);
    out.chat.finish = r.finish;
    if (req.logprobs >= 0) out.chat.logprobs = std::move(r.logprobs);
    out.chat.usage = {r.stats.prompt_tokens, r.stats.generated_tokens, r.stats.cached_tokens,
                      r.stats.reasoning_tokens};
    out.constrainedSteps = r.stats.constraint.steps;
    out.fullMaskSteps = r.stats.constraint.full_masks;
    out.finishReason = std::string(chat::finish_reason_name(r.finish));
    out.tokenBudget = options.max_tokens;
    out.promptSeconds = r.stats.prompt_seconds;
    out.firstTokenSeconds = r.stats.first_token_seconds;
    out.decodeSeconds = r.stats.decode_seconds;
    out.chat.timings = openai::Timings{
        r.stats.prompt_tokens - r.stats.cached_tokens,
        1e3 * (r.stats.generated_tokens > 0 ? r.stats.first_token_seconds : r.stats.prompt_seconds),
        r.stats.generated_tokens, 1e3 * r.stats.decode_seconds};
    return out;
}

GenerationOutcome EngineWorker::runCompletion(const std::shared_ptr<GenerationJob>& job) {
    const openai::CompletionRequest& req = job->completion;
    const Tokenizer& tok = m_model->tokenizer();
    std::vector<TokenId> prompt;
    if (const auto* text = std::get_if<std::string>(&req.prompt)) {
        // A raw prompt is a harmony prompt written by hand: special tokens count as such.
        prompt = tok.encode(*text, true);
    } else {
        prompt = std::get<std::vector<TokenId>>(req.prompt);
        for (TokenId t : prompt) {
            if (t < 0 || static_cast<std::size_t>(t) >= m_model->sampleable_vocab()) {
                throw openai::RequestError(fmt::format("prompt token {} is not a token id", t),
                                           "prompt", "invalid_value");
            }
        }
    }
    if (prompt.empty())
        throw openai::RequestError("the prompt has no tokens", "prompt", "invalid_value");
    const int budget =
        tokenBudget(static_cast<std::int64_t>(prompt.size()), req.max_tokens, job->maxPromptTokens);

    // The same prefix reuse as the chat session, on a cache of its own.
    if (!m_rawCache) m_rawCache = std::make_unique<KvCache>(m_model->config());
    std::size_t common = 0;
    while (common < m_rawTokens.size() && common < prompt.size() &&
           m_rawTokens[common] == prompt[common])
        ++common;
    if (common == prompt.size()) --common;
    m_rawCache->truncate(static_cast<std::int64_t>(common));
    m_rawTokens.resize(common);

    GenerateOptions options;
    options.max_tokens = budget;
    options.sampling = req.sampling;
    options.stop_tokens = m_model->stop_tokens();
    options.cancel = &job->cancel;
    chat::Utf8Stream utf8;
    StopMatcher stops(req.stop);
    std::string text;
    // logprobs: every text token's entry and its span in the UTF-8 stream's output (the text
    // before stop sequences; a byte sequence split across tokens counts for the token that
    // completes it); an entry goes out with the piece that releases its span (stop sequences
    // hold text back and may cut it).
    struct Pending {
        chat::TokenLogprob logprob;
        std::size_t begin = 0, end = 0;
    };
    std::vector<Pending> tokens;
    std::size_t streamed = 0, sent = 0;
    std::vector<chat::TokenLogprob> allLogprobs;
    std::vector<std::int64_t> allOffsets;
    auto codePoints = [&](std::size_t bytes) {
        std::int64_t n = 0;
        for (std::size_t i = 0; i < bytes && i < text.size(); ++i)
            n += (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80 ? 1 : 0;
        return n;
    };
    // The entries whose tokens the text now holds (all of whose bytes, or with `final`, any).
    auto takeLogprobs = [&](TextPiece& piece, bool final) {
        while (sent < tokens.size() &&
               (tokens[sent].end <= text.size() || (final && tokens[sent].begin < text.size()))) {
            piece.logprobs.push_back(tokens[sent].logprob);
            piece.offsets.push_back(codePoints(tokens[sent].begin));
            allLogprobs.push_back(tokens[sent].logprob);
            allOffsets.push_back(piece.offsets.back());
            ++sent;
        }
    };
    auto release = [&](const std::string& piece) {
        if (piece.empty()) return;
        text += piece;
        TextPiece out;
        out.text = piece;
        if (req.logprobs >= 0) takeLogprobs(out, false);
        m_queue->postText(job, std::move(out));
    };
    std::optional<chat::TokenLogprob> chosen;  // this step's, until on_token sees the token
    if (req.logprobs >= 0) {
        options.logprobs = req.logprobs;
        options.on_logprob = [&](TokenId, double lp,
                                 const std::vector<std::pair<TokenId, double>>& top) {
            chat::TokenLogprob t;
            t.logprob = lp;
            for (const auto& [id, alt] : top)
                t.top.push_back({tok.decode(std::span<const TokenId>(&id, 1)), alt});
            chosen = std::move(t);
        };
    }
    const auto t0 = Clock::now();
    Clock::time_point first{};
    bool sawToken = false;
    auto onToken = [&](TokenId t) {
        if (!sawToken) {
            first = Clock::now();
            sawToken = true;
        }
        // A stop token ends the text; it is not part of it.
        if (std::find(options.stop_tokens.begin(), options.stop_tokens.end(), t) !=
            options.stop_tokens.end())
            return true;
        const std::string bytes = tok.decode(std::span<const TokenId>(&t, 1));
        const std::string valid = utf8.push(bytes);
        if (chosen) {
            chosen->bytes = bytes;
            tokens.push_back({std::move(*chosen), streamed, streamed + valid.size()});
            chosen.reset();
        }
        streamed += valid.size();
        release(stops.push(valid));
        waitForReceiver(*job);
        return !stops.stopped() && !job->cancel.load();
    };
    const std::span<const TokenId> fresh(prompt.data() + common, prompt.size() - common);
    m_queue->postStarted(job);
    GenerateResult g = generate(*m_model, *m_rawCache, fresh, options, onToken);
    const auto t1 = Clock::now();
    if (!stops.stopped()) {
        release(stops.push(utf8.flush()));
        release(stops.flush());
    }
    if (req.logprobs >= 0 && sent < tokens.size()) {
        TextPiece last;  // tokens cut by a stop sequence, or never released as text
        takeLogprobs(last, true);
        if (!last.logprobs.empty()) m_queue->postText(job, std::move(last));
    }
    m_rawTokens = prompt;
    m_rawTokens.insert(m_rawTokens.end(), g.tokens.begin(), g.tokens.end());
    m_rawTokens.resize(
        std::min<std::size_t>(m_rawTokens.size(), static_cast<std::size_t>(m_rawCache->size())));

    GenerationOutcome out;
    out.status = GenerationOutcome::Status::ok;
    if (stops.stopped() || g.finish == FinishReason::kStop) {
        out.finishReason = "stop";
    } else if (g.finish == FinishReason::kLength) {
        out.finishReason = "length";
    } else {
        out.status = GenerationOutcome::Status::cancelled;
        out.finishReason = "stop";
    }
    out.text = std::move(text);
    out.tokenBudget = budget;
    if (req.logprobs >= 0) {
        out.chat.logprobs = std::move(allLogprobs);
        out.textOffsets = std::move(allOffsets);
    }
    out.chat.usage = {static_cast<std::int64_t>(prompt.size()),
                      static_cast<std::int64_t>(g.tokens.size()),
                      static_cast<std::int64_t>(common)};
    out.promptSeconds = secondsBetween(t0, sawToken ? first : t1);
    out.firstTokenSeconds = out.promptSeconds;
    out.decodeSeconds = sawToken ? secondsBetween(first, t1) : 0.0;
    return out;
}

// ---- GenerationQueue (server thread) ----------------------------------------------------------

GenerationQueue::GenerationQueue(std::shared_ptr<Model> model, int maxWaiting, int defaultMaxTokens,
                                 QObject* parent)
    : QObject(parent), m_maxWaiting(std::max(0, maxWaiting)) {
    m_worker = new EngineWorker(std::move(model), this, defaultMaxTokens);
    m_worker->moveToThread(&m_thread);
    connect(&m_thread, &QThread::finished, m_worker, &QObject::deleteLater);
    m_thread.setObjectName(QStringLiteral("neural-engine"));
    m_thread.start();
}

GenerationQueue::~GenerationQueue() {
    for (auto& job : m_waiting) job->cancel = true;
    m_waiting.clear();
    if (m_running) m_running->cancel = true;
    m_thread.quit();
    m_thread.wait();
}

bool GenerationQueue::enqueue(const std::shared_ptr<GenerationJob>& job) {
    if (m_running && waiting() >= m_maxWaiting) return false;
    job->id = m_nextId++;
    job->enqueuedAt = std::chrono::steady_clock::now();
    m_waiting.push_back(job);
    startNext();
    emit changed();
    return true;
}

bool GenerationQueue::cancel(quint64 jobId) {
    auto it = std::find_if(m_waiting.begin(), m_waiting.end(),
                           [&](const auto& j) { return j->id == jobId; });
    if (it != m_waiting.end()) {
        (*it)->cancel = true;
        m_waiting.erase(it);
        emit changed();
        return true;
    }
    if (m_running && m_running->id == jobId) m_running->cancel = true;
    return false;
}

int GenerationQueue::jobsAhead(quint64 jobId) const {
    if (m_running && m_running->id == jobId) return 0;
    for (std::size_t i = 0; i < m_waiting.size(); ++i)
        if (m_waiting[i]->id == jobId) return static_cast<int>(i) + (m_running ? 1 : 0);
    return -1;
}

void GenerationQueue::startNext() {
    if (m_running || m_waiting.empty()) return;
    m_running = m_waiting.front();
    m_waiting.pop_front();
    m_waitStats.record(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - m_running->enqueuedAt)
            .count());
    QMetaObject::invokeMethod(
        m_worker, [worker = m_worker, job = m_running] { worker->run(job); }, Qt::QueuedConnection);
}

void GenerationQueue::postStarted(const std::shared_ptr<GenerationJob>& job) {
    QMetaObject::invokeMethod(
        this,
        [job] {
            if (job->receiver && job->onStarted) job->onStarted();
        },
        Qt::QueuedConnection);
}

void GenerationQueue::postEvent(const std::shared_ptr<GenerationJob>& job,
                                chat::ParserEvent event) {
    job->undelivered.fetch_add(1);
    QMetaObject::invokeMethod(
        this,
        [job, event = std::move(event)] {
            job->undelivered.fetch_sub(1);
            if (job->receiver && job->onEvent) job->onEvent(event);
        },
        Qt::QueuedConnection);
}

void GenerationQueue::postText(const std::shared_ptr<GenerationJob>& job, TextPiece piece) {
    job->undelivered.fetch_add(1);
    QMetaObject::invokeMethod(
        this,
        [job, piece = std::move(piece)] {
            job->undelivered.fetch_sub(1);
            if (job->receiver && job->onText) job->onText(piece);
        },
        Qt::QueuedConnection);
}

void GenerationQueue::postFinished(const std::shared_ptr<GenerationJob>& job,
                                   GenerationOutcome outcome) {
    QMetaObject::invokeMethod(
        this,
        [this, job, outcome = std::move(outcome)] {
            if (m_running == job) m_running.reset();
            if (job->receiver && job->onFinished) job->onFinished(outcome);
            startNext();
            emit changed();
        },
        Qt::QueuedConnection);
}

}  // namespace neural::host
