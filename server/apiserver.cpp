#include "apiserver.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include <QCryptographicHash>
#include <QDateTime>
#include <QDeadlineTimer>
#include <QDir>
#include <QHttpServerRequest>
#include <QPointer>
#include <QRandomGenerator>
#include <QRegularExpression>
#include <QTcpSocket>
#include <QUrl>
#include <QUrlQuery>

#if QT_VERSION >= QT_VERSION_CHECK(6, 8, 0)
#include <QHttpServerResponder>
#endif

#include "api/openai.h"
#include "api/responses.h"
#include "runtime/model.h"
#include "runtime/session.h"

Q_LOGGING_CATEGORY(lcNeuralServer, "neural.server")

namespace neural::server {

namespace {

QByteArray toBytes(const openai::Json& json) {
    return QByteArray::fromStdString(
        json.dump(-1, ' ', false, openai::Json::error_handler_t::replace));
}

QByteArray methodName(QHttpServerRequest::Method m) {
    switch (m) {
        case QHttpServerRequest::Method::Get:
            return "GET";
        case QHttpServerRequest::Method::Put:
            return "PUT";
        case QHttpServerRequest::Method::Delete:
            return "DELETE";
        case QHttpServerRequest::Method::Post:
            return "POST";
        case QHttpServerRequest::Method::Head:
            return "HEAD";
        case QHttpServerRequest::Method::Options:
            return "OPTIONS";
        case QHttpServerRequest::Method::Patch:
            return "PATCH";
        default:
            return "OTHER";
    }
}

// "application/json", optionally with parameters; a charset, if given, must be UTF-8.
bool isJsonContentType(const QByteArray& value) {
    const QList<QByteArray> parts = value.split(';');
    if (parts.first().trimmed().toLower() != "application/json") return false;
    for (qsizetype i = 1; i < parts.size(); ++i) {
        const QByteArray p = parts[i].trimmed().toLower();
        if (p.startsWith("charset=") && p != "charset=utf-8" && p != "charset=\"utf-8\"")
            return false;
    }
    return true;
}

QString requestId(const char* prefix) {
    const quint64 a = QRandomGenerator::global()->generate64();
    const quint32 b = QRandomGenerator::global()->generate();
    return QString::fromLatin1(prefix) + QString::number(a, 16).rightJustified(16, u'0') +
           QString::number(b, 16).rightJustified(8, u'0');
}

// Paths go into the log: keep them printable and short.
QString loggablePath(const QString& path) {
    QString out = path.left(200);
    for (QChar& c : out) {
        if (c.unicode() < 0x20 || c.unicode() == 0x7f) c = u'?';
    }
    return out;
}

// An engine error as clients see it: every absolute path (POSIX "/...", Windows "C:\..." or
// "\\server\...") cut to its file name. The message names the layer and the expert; where the
// files are on this machine goes to the log only.
QString withoutLocalPaths(const QString& message) {
    static const QRegularExpression path(
        QStringLiteral(R"((?<![\w.])(?:[A-Za-z]:[\\/]|\\\\|/)[^\s"'<>|]*[^\s"'<>|:.,;)])"));
    QString out;
    qsizetype last = 0;
    auto it = path.globalMatch(message);
    while (it.hasNext()) {
        const QRegularExpressionMatch m = it.next();
        out += message.mid(last, m.capturedStart() - last);
        QString name = m.captured();
        name = name.mid(std::max(name.lastIndexOf(u'/'), name.lastIndexOf(u'\\')) + 1);
        out += name.isEmpty() ? QStringLiteral("(path)") : name;
        last = m.capturedEnd();
    }
    return out + message.mid(last);
}

// An id from the request, as an error message repeats it: at most 64 bytes, cut on a UTF-8
// character boundary and marked, so a huge id is not sent back whole.
std::string echoedId(const std::string& id) {
    constexpr std::size_t kMax = 64;
    if (id.size() <= kMax) return id;
    std::size_t cut = kMax;
    while (cut > 0 && (static_cast<unsigned char>(id[cut]) & 0xC0) == 0x80) --cut;
    return id.substr(0, cut) + "...";
}

// GET /health's queue_wait: jobs started so far and the wait percentiles of the recent ones.
openai::Json queueWaitJson(const QueueWaitStats& stats) {
    auto ms = [](double seconds) { return std::round(seconds * 1e6) / 1e3; };  // 1 µs resolution
    return openai::Json{{"count", stats.count()},
                        {"p50_ms", ms(stats.quantile(0.5))},
                        {"p99_ms", ms(stats.quantile(0.99))}};
}

}  // namespace

// ---- one generation request, from the queue to the client -----------------------------------

namespace {
const QString kShuttingDown = QStringLiteral("the server is shutting down; retry later");
}  // namespace

class GenerationCall : public QObject {
public:
    using Api = ApiServer::Api;

    GenerationCall(ApiServer* server, ApiServer::Request request, HttpChannel* channel,
                   std::shared_ptr<GenerationJob> job, bool stream, bool includeUsage, Api api,
                   std::shared_ptr<openai::ResponsesRequest> responses)
        : QObject(server),
          m_server(server),
          m_request(std::move(request)),
          m_channel(channel),
          m_sse(channel),
          m_job(std::move(job)),
          m_stream(stream),
          m_includeUsage(includeUsage),
          m_chat(m_job->kind == GenerationJob::Kind::chat),
          m_api(api),
          m_id(requestId(api == Api::responses ? "resp_"
                         : m_chat              ? "chatcmpl-"
                                               : "cmpl-")
                   .toStdString()),
          m_created(QDateTime::currentSecsSinceEpoch()),
          m_model(server->modelId().toStdString()),
          m_encoder(m_id, m_created, m_model, includeUsage),
          m_responses(std::move(responses)) {
        if (m_api == Api::responses)
            m_responseEncoder.emplace(m_id, m_created, m_model, m_responses->echo,
                                      m_responses->tool_kinds, m_responses->reasoning_summary);
        if (m_stream && m_server->m_config.keepAliveMs > 0) {
            // Checked a few times per interval: a comment goes out once the stream has been
            // quiet for the whole interval (a long prompt, a slow first token).
            const int every = m_server->m_config.keepAliveMs;
            m_keepAlive.setInterval(std::max(20, every / 4));
            connect(&m_keepAlive, &QTimer::timeout, this, [this, every] {
                if (m_sse.begun() && !m_gone && !m_job->paused.load() && m_sse.idleMs() >= every)
                    m_sse.keepAlive();
            });
        }
        if (m_stream) {
            m_stall.setSingleShot(true);
            connect(&m_stall, &QTimer::timeout, this, [this] { onStalled(); });
            connect(channel, &HttpChannel::drained, this, [this] { resumeIfDrained(); });
        }
        channel->setParent(this);
        attachJob();
        connect(channel, &HttpChannel::closed, this, [this] { onClientGone(); });
        m_server->m_calls.insert(this);
    }

    ~GenerationCall() override {
        m_server->m_calls.remove(this);
        if (m_overflow) {
            auto& fifo = m_server->m_overflow;
            fifo.erase(std::remove(fifo.begin(), fifo.end(), this), fifo.end());
        }
        if (m_python) {
            const QString scratch = m_python->workDir();
            m_python.reset();  // ends the session first
            QDir(scratch).removeRecursively();
        }
    }

    const std::shared_ptr<GenerationJob>& job() const { return m_job; }

    // Waits in the server's overflow FIFO for a place in the queue, until `deadline`.
    void waitForRoom(QDeadlineTimer deadline) {
        m_overflow = true;
        m_deadline = deadline;
    }
    void admitted() { m_overflow = false; }
    const QDeadlineTimer& deadline() const { return m_deadline; }

    // 503 with Retry-After: no place in the queue (now, or within the overflow wait).
    void refuseBusy(const QString& message) {
        m_gone = true;
        m_overflow = false;
        m_job->receiver = nullptr;
        m_keepAlive.stop();
        if (message != kShuttingDown) m_server->m_metrics.countRejected();
        m_server->m_metrics.countRequest(label(), 503);
        m_channel->setParent(m_server);  // outlives this call until the response is written
        m_server->sendError(m_channel, m_request, 503, message, "server_error", {},
                            message == kShuttingDown ? "server_shutting_down" : "server_overloaded",
                            {{"Retry-After", "1"}});
        deleteLater();
    }

    // Graceful shutdown (ApiServer::shutdown): a request waiting for a place or in the queue
    // gets 503 now; the running one is cancelled and ends with an error (an error event and the
    // stream's proper end, or 503 when nothing was sent yet) once the engine stopped.
    void shutdown() {
        if (m_gone) return;
        if (m_overflow) {
            auto& fifo = m_server->m_overflow;
            fifo.erase(std::remove(fifo.begin(), fifo.end(), this), fifo.end());
            refuseBusy(kShuttingDown);
            return;
        }
        m_shutdown = true;
        if (m_toolCall) {
            m_toolCall->cancel();  // continueAfterTool ends the request
            return;
        }
        if (m_server->m_queue->cancel(m_job->id)) refuseBusy(kShuttingDown);
    }

    // The server is going away: the job must not outlive this call's connection.
    void abandon() {
        m_gone = true;
        if (m_toolCall) m_toolCall->disconnect(this);
        if (m_server->m_queue) m_server->m_queue->cancel(m_job->id);
        m_job->receiver = nullptr;
    }

private:
    // Routes the job's callbacks here (the request's first job and each continuation after a
    // built-in tool call).
    void attachJob() {
        m_job->receiver = this;
        m_job->onStarted = [this] {
            // Headers (and the role chunk) go out as soon as the engine takes the request, so a
            // client sees it accepted while a long prompt is processed.
            if (m_stream && !m_gone) beginStream();
        };
        m_job->onEvent = [this](const chat::ParserEvent& e) { onEvent(e); };
        m_job->onText = [this](const host::TextPiece& t) { onText(t); };
        m_job->onFinished = [this](const GenerationOutcome& o) { onFinished(o); };
    }

    // Built-in tools (ServerConfig::toolPython / toolBrowser): when the turn ended with a call of
    // an enabled one, runs it and returns true; continueAfterTool then queues the turn's next
    // step with the result.
    bool startBuiltinTool(const GenerationOutcome& o) {
        const ServerConfig& config = m_server->m_config;
        if ((!config.toolPython && !config.toolBrowser) || m_turn.empty() ||
            o.chat.finish != chat::FinishReason::stop)
            return false;
        const chat::Message& last = m_turn.back();
        if (!last.is_tool_call() || !last.recipient || !last.has_text()) return false;
        const std::string& recipient = *last.recipient;
        toolhost::ToolProvider* provider = nullptr;
        QString tool;
        if (recipient == "python" && config.toolPython) {
            if (!m_python) {
                toolhost::PythonToolSettings settings = config.pythonTool;
                const QString base = settings.workDir.isEmpty()
                                         ? QDir(QDir::tempPath()).filePath("neural-server-python")
                                         : settings.workDir;
                settings.workDir = QDir(base).filePath(QString::fromStdString(m_id));
                m_python = std::make_unique<toolhost::PythonProvider>(settings);
            }
            provider = m_python.get();
        } else if (recipient.rfind("browser.", 0) == 0 && config.toolBrowser) {
            if (!m_browser)
                m_browser = std::make_unique<toolhost::BrowserProvider>(config.browserTool);
            provider = m_browser.get();
            tool = QString::fromStdString(recipient.substr(8));
        }
        if (!provider) return false;
        if (m_toolCalls >= config.maxToolCalls) {
            qCInfo(lcNeuralServer).noquote()
                << QStringLiteral(
                       "%1 %2: built-in tool call %3 not run: the request already "
                       "made %4 (--tool-calls-max); the turn ends")
                       .arg(m_request.remote, loggablePath(m_request.path),
                            QString::fromStdString(recipient))
                       .arg(m_toolCalls);
            return false;
        }
        ++m_toolCalls;
        // The steps so far count in the request's answer.
        m_earlierUsage = o.chat.usage;
        m_earlierReasoning = o.chat.reasoning;
        toolhost::ToolCall* call =
            provider->call(tool, QString::fromStdString(last.text()), toolhost::CallLimits{});
        call->setParent(this);
        m_toolCall = call;
        const chat::Message callMessage = last;
        connect(call, &toolhost::ToolCall::finished, this,
                [this, call, callMessage](const toolhost::ToolOutcome& outcome) {
                    call->deleteLater();
                    continueAfterTool(callMessage, outcome);
                });
        return true;
    }

    void continueAfterTool(const chat::Message& callMessage, const toolhost::ToolOutcome& outcome) {
        m_toolCall = nullptr;
        const QString recipient = QString::fromStdString(callMessage.recipient.value_or(""));
        qCInfo(lcNeuralServer).noquote()
            << QStringLiteral("%1 %2: built-in tool %3: %4 (%5 bytes to the model)")
                   .arg(m_request.remote, loggablePath(m_request.path), recipient,
                        toolhost::statusName(outcome.status))
                   .arg(outcome.text.toUtf8().size());
        if (m_gone || m_shutdown) {
            GenerationOutcome cancelled;
            cancelled.status = GenerationOutcome::Status::cancelled;
            onFinished(cancelled);
            return;
        }
        auto next = std::make_shared<GenerationJob>();
        next->kind = GenerationJob::Kind::chat;
        next->chat = m_job->chat;
        next->chat.forced_output.reset();
        next->chat.reply_start.reset();
        for (chat::Message& m : m_turn) next->chat.history.push_back(std::move(m));
        m_turn.clear();
        // As the reference tools answer: from the tool, on the call's channel.
        chat::Message result =
            chat::Message::tool_result(recipient.toStdString(), outcome.text.toStdString());
        if (callMessage.channel) result.channel = callMessage.channel;
        // A stored response keeps the round for a follow-up (previous_response_id).
        if (m_api == Api::responses) m_responseEncoder->builtin_round(callMessage, result);
        next->chat.history.push_back(std::move(result));
        if (auto scripted = m_server->nextScripted())
            next->chat.forced_output = std::move(scripted);
        next->session = m_job->session;
        next->maxTokens = m_job->maxTokens;
        next->maxPromptTokens = m_job->maxPromptTokens;
        m_job->receiver = nullptr;
        m_job = std::move(next);
        attachJob();
        if (!m_server->m_queue->enqueue(m_job)) {
            GenerationOutcome busy;
            busy.status = GenerationOutcome::Status::engineError;
            busy.errorCode = "server_overloaded";
            busy.error = "the queue was full when the turn went on after a built-in tool call";
            onFinished(busy);
        }
    }

    // After each write to a stream: a client that does not keep up pauses the engine.
    void checkBackpressure() {
        if (m_gone || m_job->paused.load()) return;
        if (m_channel->pendingBytes() <= m_server->m_config.sendBufferBytes) return;
        m_job->paused = true;
        m_stall.start(m_server->m_config.writeTimeoutMs);
    }

    void resumeIfDrained() {
        if (!m_job->paused.load() ||
            m_channel->pendingBytes() > m_server->m_config.sendBufferBytes / 2)
            return;
        m_stall.stop();
        m_job->paused = false;
    }

    // The client read nothing (or too little) for the write timeout: the request is cancelled
    // and the connection closed, which frees the engine for the queue.
    void onStalled() {
        if (m_gone) return;
        m_stalled = true;
        m_server->m_metrics.countStalled();
        qCWarning(lcNeuralServer).noquote()
            << QStringLiteral(
                   "%1 %2 %3: the client stopped reading (%4 bytes unsent for %5 s); "
                   "the request is cancelled")
                   .arg(m_request.remote, QString::fromLatin1(m_request.method),
                        loggablePath(m_request.path))
                   .arg(m_channel->pendingBytes())
                   .arg(m_server->m_config.writeTimeoutMs / 1000.0);
        m_channel->abort();  // closed() follows: onClientGone cancels the job
    }

    QByteArray label() const { return ApiServer::routeLabel(m_api); }

    void sendResponseEvents(const std::vector<openai::Json>& events) {
        for (const openai::Json& e : events)
            m_sse.namedEvent(QByteArray::fromStdString(e["type"].get<std::string>()), toBytes(e));
        checkBackpressure();
    }

    void beginStream() {
        if (m_sse.begun()) return;
        m_sse.begin(m_server->corsHeaders(m_request.origin));
        if (m_keepAlive.interval() > 0) m_keepAlive.start();
        if (m_api == Api::responses)
            sendResponseEvents(m_responseEncoder->begin());
        else if (m_chat)
            m_sse.event(toBytes(m_encoder.role_chunk()));
    }

    void onEvent(const chat::ParserEvent& e) {
        if (m_gone) return;
        if (m_api != Api::completion && e.type == chat::EventType::message_end)
            m_turn.push_back(e.message);  // for a built-in tool call (startBuiltinTool)
        if (m_api == Api::responses) {
            // The encoder builds the output items for the final object in any case.
            const auto events = m_responseEncoder->event(e);
            if (m_stream && !events.empty()) {
                beginStream();
                sendResponseEvents(events);
            }
            return;
        }
        if (!m_stream) return;
        if (auto chunk = m_encoder.event_chunk(e)) {
            beginStream();
            m_sse.event(toBytes(*chunk));
            checkBackpressure();
        }
    }

    void onText(const host::TextPiece& piece) {
        if (!m_stream || m_gone) return;
        beginStream();
        // With logprobs, each chunk carries its tokens' entries (legacy format).
        openai::Json logprobs = nullptr;
        if (m_job->completion.logprobs >= 0)
            logprobs = openai::completion_logprobs_json(piece.logprobs, piece.offsets);
        m_sse.event(toBytes(openai::text_completion_chunk(
            m_id, m_created, m_model, piece.text, nullptr, m_includeUsage, std::move(logprobs))));
        checkBackpressure();
    }

    // Counts, logs and retires the call once its response is complete (or abandoned).
    void done(int status, const QString& detail) {
        m_keepAlive.stop();
        m_stall.stop();
        m_server->m_metrics.countRequest(label(), status);
        m_server->logRequest(m_request, status, detail);
        deleteLater();
    }

    void onFinished(const GenerationOutcome& step) {
        using Status = GenerationOutcome::Status;
        if (step.status == Status::ok || step.status == Status::cancelled) {
            const auto& s = step.chat.usage;
            m_server->m_metrics.countGeneration(s.prompt_tokens, s.cached_tokens,
                                                s.completion_tokens, step.promptSeconds,
                                                step.decodeSeconds);
        }
        // With built-in tool calls the answer is several steps: usage and reasoning add up.
        GenerationOutcome o = step;
        if (m_toolCalls > 0) {
            o.chat.usage.prompt_tokens += m_earlierUsage.prompt_tokens;
            o.chat.usage.completion_tokens += m_earlierUsage.completion_tokens;
            o.chat.usage.cached_tokens += m_earlierUsage.cached_tokens;
            o.chat.usage.reasoning_tokens += m_earlierUsage.reasoning_tokens;
            o.chat.reasoning = m_earlierReasoning + o.chat.reasoning;
        }
        const auto& u = o.chat.usage;
        const QString tokens = QStringLiteral("prompt=%1 cached=%2 generated=%3")
                                   .arg(u.prompt_tokens)
                                   .arg(u.cached_tokens)
                                   .arg(u.completion_tokens);
        if (m_shutdown && !m_gone && o.status == Status::cancelled) {
            // Cancelled by the shutdown: the client learns why, and a stream ends properly.
            const std::string message = kShuttingDown.toStdString();
            if (m_sse.begun() && m_api == Api::responses) {
                m_sse.namedEvent("response.failed", toBytes(m_responseEncoder->failed(
                                                        message, "server_shutting_down")));
                m_sse.end();
            } else if (m_sse.begun()) {
                m_sse.event(toBytes(
                    openai::error_body(message, "server_error", {}, "server_shutting_down")));
                m_sse.done();
            } else {
                m_channel->sendResponse(503, jsonHeaders() + HttpHeaders{{"Retry-After", "1"}},
                                        toBytes(openai::error_body(message, "server_error", {},
                                                                   "server_shutting_down")));
            }
            done(503, tokens + QStringLiteral(" (server shutting down)"));
            return;
        }
        if (m_gone || o.status == Status::cancelled) {
            // 499: nginx's "client closed request"; only the log and the metrics see it.
            m_server->m_metrics.countCancelled();
            done(499, tokens + (m_stalled ? QStringLiteral(" (client stopped reading)")
                                          : QStringLiteral(" (client went away)")));
            return;
        }
        if (o.status == Status::badRequest || o.status == Status::engineError) {
            const bool bad = o.status == Status::badRequest;
            // The store changed on disk: the model cannot answer until it is reloaded.
            const bool unavailable = o.errorCode == "model_files_changed";
            const int status = bad ? 400 : unavailable ? 503 : 500;
            const QString full = QString::fromStdString(o.error);
            const QString message =
                bad ? full : QStringLiteral("the engine failed: ") + withoutLocalPaths(full);
            const char* type = bad ? "invalid_request_error" : "server_error";
            if (!bad) {
                qCWarning(lcNeuralServer).noquote() << "engine failure:" << full;
                m_server->m_healthIssue = withoutLocalPaths(full);
            }
            if (m_sse.begun() && m_api == Api::responses) {
                m_sse.namedEvent("response.failed", toBytes(m_responseEncoder->failed(
                                                        message.toStdString(), o.errorCode)));
                m_sse.end();
            } else if (m_sse.begun()) {
                // Too late for a status code: OpenAI streams report errors as an error event.
                m_sse.event(
                    toBytes(openai::error_body(message.toStdString(), type, {}, o.errorCode)));
                m_channel->endStream();
            } else {
                const openai::Json body = openai::error_body(
                    message.toStdString(), type,
                    o.errorCode == "context_length_exceeded" ? "messages" : "", o.errorCode);
                m_channel->sendResponse(status, jsonHeaders(), toBytes(body));
            }
            done(status, message.left(200));
            return;
        }
        m_server->m_healthIssue.clear();  // the model answered
        if (m_api != Api::completion && startBuiltinTool(o)) return;
        if (m_api == Api::responses) {
            const auto events = m_responseEncoder->finish(o.chat);
            if (m_responses->store) {
                m_server->m_responses.put(m_id, m_responseEncoder->state_after(*m_responses));
            }
            if (m_stream) {
                beginStream();
                sendResponseEvents(events);
                m_sse.end();
                done(200, tokens + QStringLiteral(" stream"));
            } else {
                m_channel->sendResponse(200, jsonHeaders(), toBytes(m_responseEncoder->response()));
                done(200, tokens);
            }
            return;
        }
        if (m_stream) {
            beginStream();
            if (m_chat) {
                m_sse.event(toBytes(m_encoder.finish_chunk(o.chat.finish)));
                if (m_includeUsage) m_sse.event(toBytes(m_encoder.usage_chunk(u)));
            } else {
                m_sse.event(toBytes(openai::text_completion_chunk(m_id, m_created, m_model, "",
                                                                  o.finishReason, m_includeUsage)));
                if (m_includeUsage) {
                    m_sse.event(toBytes(openai::Json{{"id", m_id},
                                                     {"object", "text_completion"},
                                                     {"created", m_created},
                                                     {"model", m_model},
                                                     {"choices", openai::Json::array()},
                                                     {"usage", openai::usage_json(u)}}));
                }
            }
            m_sse.done();
            done(200, tokens + QStringLiteral(" stream"));
            return;
        }
        const openai::Json body =
            m_chat ? openai::chat_completion(m_id, m_created, m_model, o.chat)
                   : openai::text_completion(
                         m_id, m_created, m_model, o.text, o.finishReason, u,
                         m_job->completion.logprobs >= 0
                             ? openai::completion_logprobs_json(
                                   o.chat.logprobs.value_or(std::vector<chat::TokenLogprob>{}),
                                   o.textOffsets)
                             : openai::Json(nullptr));
        m_channel->sendResponse(200, jsonHeaders(), toBytes(body));
        done(200, tokens);
    }

    HttpHeaders jsonHeaders() const {
        HttpHeaders h{{"Content-Type", "application/json"}};
        h += m_server->corsHeaders(m_request.origin);
        return h;
    }

    void onClientGone() {
        if (m_gone || !m_server->m_queue) return;
        m_gone = true;
        if (m_toolCall) {
            m_toolCall->cancel();  // continueAfterTool ends the request
            return;
        }
        if (m_overflow) {
            auto& fifo = m_server->m_overflow;
            fifo.erase(std::remove(fifo.begin(), fifo.end(), this), fifo.end());
            m_overflow = false;
            m_server->armOverflowTimer();
            m_server->m_metrics.countCancelled();
            done(499, QStringLiteral("left the overflow wait"));
            return;
        }
        // A job still waiting leaves the queue and never reaches the worker: finish here. A
        // running one stops between layers or tokens and reports back through onFinished.
        if (m_server->m_queue->cancel(m_job->id)) {
            m_server->m_metrics.countCancelled();
            done(499, QStringLiteral("left the queue"));
        }
    }

    ApiServer* m_server;
    ApiServer::Request m_request;
    HttpChannel* m_channel;
    SseWriter m_sse;
    std::shared_ptr<GenerationJob> m_job;
    bool m_stream;
    bool m_includeUsage;
    bool m_chat;
    Api m_api;
    std::string m_id;
    std::int64_t m_created;
    std::string m_model;
    openai::ChatChunkEncoder m_encoder;
    std::shared_ptr<openai::ResponsesRequest> m_responses;  // Api::responses
    std::optional<openai::ResponseEncoder> m_responseEncoder;
    QTimer m_keepAlive;
    QTimer m_stall;          // runs while the stream is paused (ServerConfig::writeTimeoutMs)
    bool m_stalled = false;  // cancelled because the client stopped reading
    bool m_gone = false;
    bool m_shutdown = false;  // cancelled by ApiServer::shutdown
    bool m_overflow = false;  // in m_server->m_overflow, not in the queue yet
    QDeadlineTimer m_deadline;
    // Built-in tools (ServerConfig::toolPython / toolBrowser): the messages of the current step,
    // the providers of this request, the running call and what the earlier steps produced.
    std::vector<chat::Message> m_turn;
    std::unique_ptr<toolhost::PythonProvider> m_python;
    std::unique_ptr<toolhost::BrowserProvider> m_browser;
    QPointer<toolhost::ToolCall> m_toolCall;
    int m_toolCalls = 0;
    openai::Usage m_earlierUsage;
    std::string m_earlierReasoning;
};

// ---- ApiServer --------------------------------------------------------------------------------

ApiServer::ApiServer(std::shared_ptr<Model> model, ServerConfig config, QObject* parent)
    : ApiServer(model, nullptr, std::move(config), parent) {}

ApiServer::ApiServer(std::shared_ptr<Model> model, GenerationQueue* sharedQueue,
                     ServerConfig config, QObject* parent)
    : QAbstractHttpServer(parent),
      m_model(std::move(model)),
      m_config(std::move(config)),
      m_createdAt(QDateTime::currentSecsSinceEpoch()),
      m_queue(sharedQueue),
      m_ownsQueue(sharedQueue == nullptr),
      m_responses(static_cast<std::size_t>(std::max(0, m_config.maxStoredResponses))) {
    m_modelId = m_config.modelId.isEmpty()
                    ? QString::fromStdString(m_model->dir().filename().string())
                    : m_config.modelId;
    if (m_modelId.isEmpty()) m_modelId = QStringLiteral("gpt-oss");
    if (m_ownsQueue) {
        m_queue = new GenerationQueue(m_model, m_config.maxQueue, m_config.defaultMaxTokens, this);
    }
    // A place freed in the queue goes to the overflow FIFO's first request.
    connect(m_queue, &GenerationQueue::changed, this, &ApiServer::admitOverflow);
    m_overflowTimer.setSingleShot(true);
    connect(&m_overflowTimer, &QTimer::timeout, this, &ApiServer::expireOverflow);
}

ApiServer::~ApiServer() {
    // Requests in flight are cancelled and their connections closed before the queue (if it is
    // ours) stops the engine thread; nothing may call back into this object afterwards.
    const QSet<GenerationCall*> calls = m_calls;
    for (GenerationCall* call : calls) {
        call->abandon();
        delete call;
    }
    if (m_ownsQueue) delete m_queue;
    m_queue = nullptr;
}

bool ApiServer::start(QString* error) {
    m_tcp = new GuardedTcpServer(m_config.limits, this);
    if (!m_tcp->listen(m_config.host, m_config.port)) {
        if (error) {
            *error = QStringLiteral("cannot listen on %1:%2: %3")
                         .arg(m_config.host.toString())
                         .arg(m_config.port)
                         .arg(m_tcp->errorString());
        }
        delete m_tcp;
        m_tcp = nullptr;
        return false;
    }
    bind(m_tcp);
#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)
    // The guards parse the requests (connectionguard.h) and hand them over one at a time per
    // connection, in order.
    m_tcp->setRequestHandler(this, [this](QTcpSocket* socket, GuardedRequest request) {
        serveGuarded(socket, std::move(request));
    });
#endif
    connect(m_tcp, &GuardedTcpServer::connectionRejected, this,
            [this](const QString& remote, int status, const QByteArray& message) {
                m_metrics.countConnectionError(status);
                logConnection(QStringLiteral("%1 - - %2 %3 (answered by the connection guard)")
                                  .arg(remote)
                                  .arg(status)
                                  .arg(QString::fromUtf8(message)));
            });
    connect(
        m_tcp, &GuardedTcpServer::connectionDropped, this,
        [this](const QString& remote, const QByteArray& reason, const QByteArray& detail) {
            m_metrics.countConnectionDropped(reason);
            logConnection(QStringLiteral("%1 connection closed (%2): %3")
                              .arg(remote, QString::fromLatin1(reason), QString::fromUtf8(detail)));
        });
    if (!m_config.host.isLoopback()) {
        qCWarning(lcNeuralServer).noquote()
            << "listening on" << m_config.host.toString()
            << "- not a loopback address: other machines can reach this API"
            << (m_config.apiKey.isEmpty() ? "and no API key is set" : "(an API key is required)");
    }
    return true;
}

void ApiServer::shutdown(int timeoutMs, std::function<void()> finished) {
    if (m_shuttingDown) return;
    m_shuttingDown = true;
    m_shutdownFinished = std::move(finished);
    if (m_tcp) m_tcp->close();  // no new connections; open ones finish below
    int queued = static_cast<int>(m_overflow.size()) + m_queue->waiting();
    const int running = static_cast<int>(m_calls.size()) - queued;
    qCInfo(lcNeuralServer).noquote()
        << QStringLiteral("shutting down: %1 running and %2 waiting requests end with an error")
               .arg(std::max(0, running))
               .arg(queued);
    const QSet<GenerationCall*> calls = m_calls;
    for (GenerationCall* call : calls) call->shutdown();
    m_shutdownDeadline = QDeadlineTimer(timeoutMs);
    connect(&m_shutdownPoll, &QTimer::timeout, this, &ApiServer::checkShutdown);
    m_shutdownPoll.start(20);
    checkShutdown();
}

void ApiServer::checkShutdown() {
    // Done when every request has its answer and every answer has left the process.
    const bool drained = m_calls.isEmpty() && (!m_tcp || m_tcp->bytesToWrite() == 0);
    const bool late = m_shutdownDeadline.hasExpired();
    if (!drained && !late) return;
    m_shutdownPoll.stop();
    if (late && !drained) {
        qCWarning(lcNeuralServer).noquote()
            << QStringLiteral(
                   "shutdown: %1 requests did not end within the shutdown timeout; "
                   "their connections are closed")
                   .arg(m_calls.size());
    }
    if (m_shutdownFinished) {
        auto finished = std::move(m_shutdownFinished);
        m_shutdownFinished = nullptr;
        finished();
    }
}

quint16 ApiServer::serverPort() const { return m_tcp ? m_tcp->serverPort() : 0; }

ApiServer::Request ApiServer::extract(const QHttpServerRequest& request) {
    Request r;
    r.timer.start();
    r.method = methodName(request.method());
    r.path = request.url().path();
    r.query = request.url().query();
    r.authorization = request.value("authorization");
    r.contentType = request.value("content-type");
    r.origin = request.value("origin");
    r.host = request.value("host");
    r.body = request.body();
    r.remote = request.remoteAddress().toString();
    r.simulateEngineError = !request.value("x-neural-test-engine-error").isEmpty();
    return r;
}

#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)
void ApiServer::serveGuarded(QTcpSocket* socket, GuardedRequest request) {
    Request r;
    r.timer.start();
    r.method = request.method;
    // "//v1/..." would parse as a URL with host "v1": a base URL with a trailing slash writes
    // it, so extra leading slashes are dropped first.
    QByteArray target = request.target;
    while (target.startsWith("//")) target.remove(0, 1);
    const QUrl url = QUrl::fromEncoded(target);
    r.path = url.path();
    r.query = url.query();
    r.authorization = request.value("authorization");
    r.contentType = request.value("content-type");
    r.origin = request.value("origin");
    r.host = request.value("host");
    r.body = std::move(request.body);
    r.remote = socket->peerAddress().toString();
    r.simulateEngineError = !request.value("x-neural-test-engine-error").isEmpty();
    // An absolute-form target ("GET http://host/v1/models") asks for a proxy: answered only when
    // it names this server (the guard checked that it matches the Host header).
    r.absoluteForm = !request.target.startsWith('/') && request.target != "*";
    dispatch(std::move(r), new SocketHttpChannel(socket, request.keepAlive, this));
}

bool ApiServer::handleRequest(const QHttpServerRequest& request, QTcpSocket* socket) {
    // Not reached: the connection guards parse the requests (serveGuarded). Kept for the base
    // class, and answered the same way should Qt's parser ever get a request.
    const bool keepAlive = !request.value("connection").toLower().contains("close");
    dispatch(extract(request), new SocketHttpChannel(socket, keepAlive, this));
    return true;
}

void ApiServer::missingHandler(const QHttpServerRequest& request, QTcpSocket* socket) {
    // Not reached (handleRequest answers everything), but the base class requires it.
    auto* channel = new SocketHttpChannel(socket, true, this);
    Request r = extract(request);
    sendError(channel, r, 404, QStringLiteral("not found"), "invalid_request_error", {},
              "not_found");
}
#else
bool ApiServer::handleRequest(const QHttpServerRequest& request, QHttpServerResponder& responder) {
    dispatch(extract(request), new ResponderHttpChannel(std::move(responder), this));
    return true;
}

void ApiServer::missingHandler(const QHttpServerRequest& request, QHttpServerResponder& responder) {
    auto* channel = new ResponderHttpChannel(std::move(responder), this);
    Request r = extract(request);
    sendError(channel, r, 404, QStringLiteral("not found"), "invalid_request_error", {},
              "not_found");
}
#endif

bool ApiServer::authorized(const QByteArray& authorization) const {
    if (m_config.apiKey.isEmpty()) return true;
    QByteArray given;
    if (authorization.size() > 7 && authorization.left(7).toLower() == "bearer ")
        given = authorization.mid(7).trimmed();
    // Compare digests, byte by byte without an early exit: the time taken does not depend on
    // how much of the key a guess got right, nor on the key's length.
    const QByteArray a = QCryptographicHash::hash(given, QCryptographicHash::Sha256);
    const QByteArray b = QCryptographicHash::hash(m_config.apiKey, QCryptographicHash::Sha256);
    unsigned char diff = given.isEmpty() ? 1 : 0;
    for (qsizetype i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
    return diff == 0;
}

HttpHeaders ApiServer::corsHeaders(const QByteArray& origin) const {
    if (m_config.corsOrigins.isEmpty() || origin.isEmpty()) return {};
    if (m_config.corsOrigins.contains("*")) return {{"Access-Control-Allow-Origin", "*"}};
    if (!m_config.corsOrigins.contains(origin)) return {};
    return {{"Access-Control-Allow-Origin", origin}, {"Vary", "Origin"}};
}

void ApiServer::logConnection(const QString& line) {
    qCInfo(lcNeuralServer).noquote() << line;
    emit requestLogged(line);
}

void ApiServer::logRequest(const Request& request, int status, const QString& detail) {
    const QString line =
        QStringLiteral("%1 %2 %3 %4 %5 ms%6")
            .arg(request.remote, QString::fromLatin1(request.method), loggablePath(request.path))
            .arg(status)
            .arg(request.timer.elapsed())
            .arg(detail.isEmpty() ? QString() : QStringLiteral(" ") + detail);
    qCInfo(lcNeuralServer).noquote() << line;
    emit requestLogged(line);
}

void ApiServer::sendJson(HttpChannel* channel, const Request& request, int status,
                         const QByteArray& json, const HttpHeaders& extra) {
    HttpHeaders headers{{"Content-Type", "application/json"}};
    headers += corsHeaders(request.origin);
    headers += extra;
    channel->sendResponse(status, headers, json);
    logRequest(request, status);
    channel->deleteLater();
}

void ApiServer::sendError(HttpChannel* channel, const Request& request, int status,
                          const QString& message, const char* type, const QByteArray& param,
                          const QByteArray& code, const HttpHeaders& extra) {
    const openai::Json body =
        openai::error_body(message.toStdString(), type, param.toStdString(), code.toStdString());
    HttpHeaders headers{{"Content-Type", "application/json"}};
    headers += corsHeaders(request.origin);
    headers += extra;
    channel->sendResponse(status, headers, toBytes(body));
    logRequest(request, status, message.left(200));
    channel->deleteLater();
}

void ApiServer::dispatch(Request request, HttpChannel* channel) {
    struct Route {
        const char* path;
        const char* methods;  // the Allow header
        QByteArray label;
    };
    static const Route routes[] = {
        {"/v1/chat/completions", "POST, OPTIONS", "chat"},
        {"/v1/completions", "POST, OPTIONS", "completions"},
        {"/v1/responses", "POST, OPTIONS", "responses"},
        {"/v1/models", "GET, OPTIONS", "models"},
        {"/health", "GET, OPTIONS", "health"},
        {"/metrics", "GET, OPTIONS", "metrics"},
    };
    // "//v1/models" (a base URL with a trailing slash) is "/v1/models".
    while (request.path.contains(QLatin1String("//")))
        request.path.replace(QLatin1String("//"), QLatin1String("/"));
    const QString& path = request.path;
    const Route* route = nullptr;
    QString modelInPath;
    for (const Route& r : routes) {
        if (path == QLatin1String(r.path)) route = &r;
    }
    if (!route && path.startsWith(QLatin1String("/v1/models/"))) {
        route = &routes[3];
        modelInPath = path.mid(11);
    }
    // A stored response: GET / DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items.
    static const Route storedResponse{"/v1/responses/", "GET, DELETE, OPTIONS", "response"};
    static const Route inputItems{"/v1/responses/", "GET, OPTIONS", "response_items"};
    QString responseInPath;
    if (!route && path.startsWith(QLatin1String("/v1/responses/"))) {
        responseInPath = path.mid(14);
        if (responseInPath.endsWith(QLatin1String("/input_items"))) {
            responseInPath.chop(12);
            route = &inputItems;
        } else {
            route = &storedResponse;
        }
        if (responseInPath.isEmpty() || responseInPath.contains(QLatin1Char('/'))) route = nullptr;
    }
    const QByteArray label = route ? route->label : QByteArray("other");
    auto count = [&](int status) { m_metrics.countRequest(label, status); };

    if (m_shuttingDown) {
        count(503);
        sendError(channel, request, 503, kShuttingDown, "server_error", {}, "server_shutting_down",
                  {{"Retry-After", "1"}});
        return;
    }
    if (request.absoluteForm && !m_config.allowedHosts.contains("*") &&
        !namesThisServer(request.host)) {
        count(400);
        sendError(channel, request, 400,
                  QStringLiteral("the request names another host (%1); this server is not a proxy")
                      .arg(loggablePath(QString::fromLatin1(request.host.left(100)))),
                  "invalid_request_error", {}, "invalid_request");
        return;
    }
    if (label != "health" && !hostAllowed(request.host)) {
        // A page on another name that resolves to this machine (DNS rebinding) must not reach
        // the API through the user's browser.
        count(403);
        sendError(channel, request, 403,
                  QStringLiteral("Host '%1' is not allowed; start the server with "
                                 "--allowed-host NAME to accept it")
                      .arg(loggablePath(QString::fromLatin1(request.host.left(100)))),
                  "invalid_request_error", {}, "host_not_allowed");
        return;
    }
    if (request.method == "OPTIONS") {
        // CORS preflight (answered without a key: browsers send no credentials here).
        if (!route) {
            count(404);
            sendError(channel, request, 404, QStringLiteral("no such route: ") + path,
                      "invalid_request_error", {}, "not_found");
            return;
        }
        HttpHeaders headers{{"Allow", route->methods}};
        const HttpHeaders cors = corsHeaders(request.origin);
        headers += cors;
        if (!cors.isEmpty()) {
            headers += {{"Access-Control-Allow-Methods", route->methods},
                        {"Access-Control-Allow-Headers", "Authorization, Content-Type"},
                        {"Access-Control-Max-Age", "600"}};
        }
        count(204);
        channel->sendResponse(204, headers, {});
        logRequest(request, 204);
        channel->deleteLater();
        return;
    }
    if (label != "health" && !authorized(request.authorization)) {
        count(401);
        sendError(channel, request, 401,
                  QStringLiteral("invalid or missing API key (send \"Authorization: Bearer "
                                 "KEY\")"),
                  "invalid_request_error", {}, "invalid_api_key", {{"WWW-Authenticate", "Bearer"}});
        return;
    }
    if (!route) {
        count(404);
        sendError(channel, request, 404, QStringLiteral("no such route: ") + loggablePath(path),
                  "invalid_request_error", {}, "not_found");
        return;
    }
    const QByteArray expected = QByteArray(route->methods).split(',').first();
    const bool allowed = request.method == expected ||
                         (request.method != "OPTIONS" &&
                          QByteArray(route->methods).split(',').contains(" " + request.method));
    if (!allowed) {
        count(405);
        sendError(
            channel, request, 405,
            QStringLiteral("%1 is not allowed on %2 (use %3)")
                .arg(QString::fromLatin1(request.method), path, QString::fromLatin1(expected)),
            "invalid_request_error", {}, "method_not_allowed", {{"Allow", route->methods}});
        return;
    }

    if (label == "health") {
        // "degraded" (503) while the model cannot answer: the last generation failed in the
        // engine (a damaged store record, the store changed on disk, a lost GPU) and none has
        // succeeded since. The reason names no local path.
        const bool degraded = !m_healthIssue.isEmpty();
        openai::Json body{{"status", degraded ? "degraded" : "ok"},
                          {"model", m_modelId.toStdString()},
                          {"busy", m_queue->busy()},
                          {"queue", m_queue->waiting()},
                          {"queue_wait", queueWaitJson(m_queue->waitStats())}};
        if (degraded) body["reason"] = m_healthIssue.toStdString();
        const int status = degraded ? 503 : 200;
        count(status);
        sendJson(channel, request, status, toBytes(body));
    } else if (label == "metrics") {
        count(200);
        channel->sendResponse(
            200,
            HttpHeaders{{"Content-Type", "text/plain; version=0.0.4; charset=utf-8"}} +
                corsHeaders(request.origin),
            m_metrics.prometheusText(m_queue->waiting(), m_queue->maxWaiting(), m_queue->busy(),
                                     m_tcp ? m_tcp->openConnections() : 0,
                                     m_model ? &m_model->telemetry() : nullptr,
                                     &m_queue->waitStats()));
        logRequest(request, 200);
        channel->deleteLater();
    } else if (label == "models") {
        const openai::Json model{{"id", m_modelId.toStdString()},
                                 {"object", "model"},
                                 {"created", m_createdAt},
                                 {"owned_by", "neural"},
                                 {"context_length", m_model->context_length()}};
        if (!modelInPath.isNull()) {
            if (modelInPath != m_modelId) {
                count(404);
                sendError(
                    channel, request, 404,
                    QStringLiteral("model '%1' does not exist").arg(loggablePath(modelInPath)),
                    "invalid_request_error", "model", "model_not_found");
                return;
            }
            count(200);
            sendJson(channel, request, 200, toBytes(model));
            return;
        }
        count(200);
        sendJson(channel, request, 200,
                 toBytes(openai::Json{{"object", "list"}, {"data", openai::Json::array({model})}}));
    } else if (label == "response" || label == "response_items") {
        handleStoredResponse(request, channel, responseInPath.toStdString(),
                             label == "response_items");
    } else if (label == "chat") {
        handleChat(request, channel);
    } else if (label == "responses") {
        handleResponses(request, channel);
    } else {
        handleCompletion(request, channel);
    }
}

openai::Json ApiServer::parseBody(const Request& request, openai::ParseLimits& limits) const {
    limits.max_json_depth = m_config.maxJsonDepth;
    return openai::parse_body(
        std::string_view(request.body.constData(), static_cast<size_t>(request.body.size())),
        limits);
}

bool ApiServer::acceptJsonBody(const Request& request, HttpChannel* channel, const char* route) {
    auto refuse = [&](int status, const QString& message, const QByteArray& code) {
        m_metrics.countRequest(route, status);
        sendError(channel, request, status, message, "invalid_request_error", {}, code);
    };
    if (!isJsonContentType(request.contentType)) {
        refuse(415, QStringLiteral("Content-Type must be application/json"),
               "unsupported_media_type");
        return false;
    }
    if (request.body.size() > m_config.limits.maxBodyBytes) {
        refuse(413, QStringLiteral("the request body is too large"), "request_too_large");
        return false;
    }
    return true;
}

const char* ApiServer::routeLabel(Api api) {
    switch (api) {
        case Api::chat:
            return "chat";
        case Api::completion:
            return "completions";
        case Api::responses:
            return "responses";
    }
    return "completions";
}

openai::ChatRequestOptions ApiServer::chatOptions(const openai::ParseLimits& limits) const {
    openai::ChatRequestOptions options;
    options.current_date = today_iso_date();
    options.allow_test_options = m_config.testOptions;
    options.strict = m_config.strictRequests;
    options.limits = limits;
    return options;
}

void ApiServer::serveGeneration(Request& request, HttpChannel* channel, Api api,
                                const BodyParser& parse,
                                std::shared_ptr<openai::ResponsesRequest> responses) {
    const char* route = routeLabel(api);
    auto refuse = [&](int status, const QString& message, const QByteArray& param,
                      const QByteArray& code) {
        m_metrics.countRequest(route, status);
        sendError(channel, request, status, message, "invalid_request_error", param, code);
    };
    if (!acceptJsonBody(request, channel, route)) return;
    auto job = std::make_shared<GenerationJob>();
    job->kind =
        api == Api::completion ? GenerationJob::Kind::completion : GenerationJob::Kind::chat;
    try {
        openai::ParseLimits limits;
        const openai::Json body = parseBody(request, limits);
        parse(body, limits, *job);
    } catch (const openai::RequestError& e) {
        // An item_reference to an unknown item (/v1/responses) is a missing resource, as in
        // OpenAI's API.
        refuse(e.code() == "item_not_found" ? 404 : 400, QString::fromStdString(e.what()),
               QByteArray::fromStdString(e.param()), QByteArray::fromStdString(e.code()));
        return;
    }
    // The chat request the job runs: /v1/responses keeps it in its own request until queued.
    openai::ChatRequest* chat = api == Api::responses ? &responses->chat
                                : api == Api::chat    ? &job->chat
                                                      : nullptr;
    const std::string& model = chat ? chat->model : job->completion.model;
    if (QString::fromStdString(model) != m_modelId) {
        refuse(404,
               QStringLiteral("model '%1' does not exist (this server serves '%2')")
                   .arg(loggablePath(QString::fromStdString(model)), m_modelId),
               "model", "model_not_found");
        return;
    }
    request.body.clear();  // parsed; no need to keep it for the whole generation
    bool stream = false, usage = false;
    if (chat) {
        logIgnoredFields(chat->ignored_fields);
        logNotices(chat->notices);
        // The built-in tools the operator enabled, in harmony's order (never by a request alone).
        if (m_config.toolBrowser) chat->system.tools.push_back(chat::ToolNamespace::browser());
        if (m_config.toolPython) chat->system.tools.push_back(chat::ToolNamespace::python());
        if (auto scripted = nextScripted()) chat->forced_output = std::move(scripted);
        if (!chat->seed_given) chat->sampling.seed = randomSeed();
        stream = chat->stream;
        // A response reports its usage in its own object, never as a chat usage chunk.
        usage = api == Api::chat && chat->include_usage;
        if (api == Api::responses) job->chat = *chat;
    } else {
        logIgnoredFields(job->completion.ignored_fields);
        if (!job->completion.seed_given) job->completion.sampling.seed = randomSeed();
        stream = job->completion.stream;
        usage = job->completion.include_usage;
    }
    enqueue(request, channel, std::move(job), stream, usage, api, std::move(responses));
}

void ApiServer::handleChat(Request& request, HttpChannel* channel) {
    serveGeneration(
        request, channel, Api::chat,
        [this](const openai::Json& body, const openai::ParseLimits& limits, GenerationJob& job) {
            job.chat = openai::parse_chat_request(body, chatOptions(limits));
        });
}

void ApiServer::handleCompletion(Request& request, HttpChannel* channel) {
    serveGeneration(
        request, channel, Api::completion,
        [this](const openai::Json& body, const openai::ParseLimits& limits, GenerationJob& job) {
            job.completion =
                openai::parse_completion_request(body, limits, m_config.strictRequests);
        });
}

void ApiServer::handleResponses(Request& request, HttpChannel* channel) {
    auto responses = std::make_shared<openai::ResponsesRequest>();
    auto parse = [this, &responses](const openai::Json& body, const openai::ParseLimits& limits,
                                    GenerationJob&) {
        // The conversation previous_response_id continues is looked up before parsing.
        const openai::ConversationState* previous = nullptr;
        if (const auto id = openai::previous_response_id(body)) {
            previous = m_responses.find(*id);
            if (!previous) {
                throw openai::RequestError(
                    fmt::format("Previous response with id '{}' not found (this server keeps "
                                "the last {} responses, in memory)",
                                echoedId(*id), m_responses.capacity()),
                    "previous_response_id", "previous_response_not_found");
            }
        }
        *responses = openai::parse_responses_request(
            body, chatOptions(limits), previous,
            [this](const std::string& id) { return m_responses.findItem(id); });
    };
    serveGeneration(request, channel, Api::responses, parse, responses);
}

void ApiServer::handleStoredResponse(Request& request, HttpChannel* channel, const std::string& id,
                                     bool inputItems) {
    const QByteArray label = inputItems ? "response_items" : "response";
    const openai::ConversationState* state = m_responses.find(id);
    if (!state) {
        m_metrics.countRequest(label, 404);
        sendError(channel, request, 404,
                  QStringLiteral("No response with id '%1' found (this server keeps the last %2 "
                                 "stored responses, in memory)")
                      .arg(loggablePath(QString::fromStdString(id)))
                      .arg(m_responses.capacity()),
                  "invalid_request_error", {}, "not_found");
        return;
    }
    if (request.method == "DELETE") {
        m_responses.remove(id);
        m_metrics.countRequest(label, 200);
        sendJson(channel, request, 200,
                 toBytes(openai::Json{{"id", id}, {"object", "response"}, {"deleted", true}}));
        return;
    }
    if (!inputItems) {
        m_metrics.countRequest(label, 200);
        sendJson(channel, request, 200, toBytes(state->response));
        return;
    }
    // A page of the input items: order (desc by default, as OpenAI's), limit (1-100, default
    // 20), after (an item id).
    const QUrlQuery query(request.query);
    const bool ascending = query.queryItemValue(QStringLiteral("order")) == QLatin1String("asc");
    bool limitOk = false;
    int limit = query.queryItemValue(QStringLiteral("limit")).toInt(&limitOk);
    if (!limitOk) limit = 20;
    limit = std::clamp(limit, 1, 100);
    const std::string after = query.queryItemValue(QStringLiteral("after")).toStdString();
    std::vector<const openai::Json*> items;
    for (const openai::Json& item : state->input_items) items.push_back(&item);
    if (!ascending) std::reverse(items.begin(), items.end());
    std::size_t from = 0;
    if (!after.empty()) {
        for (std::size_t i = 0; i < items.size(); ++i) {
            if ((*items[i]).value("id", openai::Json()) == after) from = i + 1;
        }
    }
    openai::Json data = openai::Json::array();
    for (std::size_t i = from; i < items.size() && data.size() < static_cast<std::size_t>(limit);
         ++i)
        data.push_back(*items[i]);
    const bool more = from + data.size() < items.size();
    openai::Json body{{"object", "list"}, {"data", data}};
    body["first_id"] = data.empty() ? openai::Json(nullptr) : data.front()["id"];
    body["last_id"] = data.empty() ? openai::Json(nullptr) : data.back()["id"];
    body["has_more"] = more;
    m_metrics.countRequest(label, 200);
    sendJson(channel, request, 200, toBytes(body));
}

std::optional<std::string> ApiServer::nextScripted() {
    const auto& script = m_config.testScript;
    if (!m_config.testOptions || script.empty()) return std::nullopt;
    const std::size_t i = std::min(m_testScriptNext, script.size() - 1);
    ++m_testScriptNext;
    return script[i];
}

void ApiServer::logNotices(const std::vector<std::string>& notices) {
    for (const std::string& n : notices) {
        const QString line = QString::fromStdString(n).left(400);
        if (m_noticesLogged.contains(line) || m_noticesLogged.size() >= 1024) continue;
        m_noticesLogged.insert(line);
        qCWarning(lcNeuralServer).noquote() << line + QStringLiteral(" (logged once)");
    }
}

void ApiServer::logIgnoredFields(const std::vector<std::string>& fields) {
    for (const std::string& f : fields) {
        const QString name = QString::fromStdString(f).left(200);
        if (m_ignoredLogged.contains(name) || m_ignoredLogged.size() >= 1024) continue;
        m_ignoredLogged.insert(name);
        qCWarning(lcNeuralServer).noquote()
            << QStringLiteral(
                   "ignoring the unknown request field '%1' (logged once; "
                   "--strict refuses unknown fields)")
                   .arg(loggablePath(name));
    }
}

std::uint64_t ApiServer::randomSeed() { return QRandomGenerator::global()->generate64(); }

bool ApiServer::hostAllowed(const QByteArray& host) const {
    // No Host header (HTTP/1.0; HTTP/1.1 needs one, connectionguard.cpp): not a browser (they
    // always send one), so not a rebinding page.
    if (host.isEmpty() || !m_config.apiKey.isEmpty() || m_config.allowedHosts.contains("*"))
        return true;
    return namesThisServer(host);
}

bool ApiServer::namesThisServer(const QByteArray& host) const {
    QByteArray name = host.trimmed().toLower();
    if (name.startsWith('[')) {
        const qsizetype end = name.indexOf(']');
        if (end < 0) return false;
        name = name.mid(1, end - 1);
    } else if (name.count(':') == 1) {
        name = name.left(name.indexOf(':'));
    }
    if (name.endsWith('.')) name.chop(1);
    // An address literal cannot be rebound: a page that uses it is served from that address.
    if (QHostAddress address; address.setAddress(QString::fromLatin1(name))) return true;
    if (name == "localhost" || name.endsWith(".localhost"))  // RFC 6761: always loopback
        return true;
    for (const QByteArray& allowed : m_config.allowedHosts) {
        if (allowed.toLower() == name) return true;
    }
    return false;
}

void ApiServer::enqueue(Request& request, HttpChannel* channel, std::shared_ptr<GenerationJob> job,
                        bool stream, bool includeUsage, Api api,
                        std::shared_ptr<openai::ResponsesRequest> responses) {
    job->simulateEngineError = m_config.testOptions && request.simulateEngineError;
    job->maxPromptTokens = m_config.maxPromptTokens;
    auto* call = new GenerationCall(this, request, channel, job, stream, includeUsage, api,
                                    std::move(responses));
    // Requests already waiting in the overflow FIFO go first: a newcomer does not overtake them.
    admitOverflow();
    if (m_overflow.empty() && m_queue->enqueue(job)) return;
    if (static_cast<int>(m_overflow.size()) < m_config.maxOverflow) {
        call->waitForRoom(QDeadlineTimer(m_config.overflowWaitMs));
        m_overflow.push_back(call);
        armOverflowTimer();
        return;
    }
    call->refuseBusy(QStringLiteral("the server is busy (%1 requests are waiting); retry later")
                         .arg(m_queue->waiting() + static_cast<int>(m_overflow.size())));
}

void ApiServer::admitOverflow() {
    if (m_admitting) return;  // enqueue() below emits changed() again
    m_admitting = true;
    while (!m_overflow.empty()) {
        GenerationCall* call = m_overflow.front();
        if (!m_queue->enqueue(call->job())) break;
        m_overflow.pop_front();
        call->admitted();
    }
    m_admitting = false;
    armOverflowTimer();
}

void ApiServer::armOverflowTimer() {
    if (m_overflow.empty()) {
        m_overflowTimer.stop();
        return;
    }
    // All wait equally long, so the first to come is the first to expire.
    m_overflowTimer.start(
        static_cast<int>(std::max<qint64>(0, m_overflow.front()->deadline().remainingTime())));
}

void ApiServer::expireOverflow() {
    while (!m_overflow.empty() && m_overflow.front()->deadline().hasExpired()) {
        GenerationCall* call = m_overflow.front();
        m_overflow.pop_front();
        call->refuseBusy(QStringLiteral("the server is busy: no place in the queue within %1 s; "
                                        "retry later")
                             .arg(m_config.overflowWaitMs / 1000.0));
    }
    armOverflowTimer();
}

}  // namespace neural::server
