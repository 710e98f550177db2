// The OpenAI-compatible HTTP endpoint (embeddable: neural-server runs it headless, the desktop
// app inside its window). Routes:
//   POST /v1/chat/completions   harmony chat, JSON or SSE stream
//   POST /v1/completions        raw prompt completion, JSON or SSE stream
//   POST /v1/responses          the Responses API, JSON or SSE stream (docs/API.md)
//   GET  /v1/models, /v1/models/{id}
//   GET  /health                no key needed
//   GET  /metrics               Prometheus text
// Errors are OpenAI error objects. One generation runs at a time (GenerationQueue); requests
// beyond the queue wait in a bounded overflow FIFO, if configured, and otherwise get 503 with
// Retry-After. A client that disconnects cancels its request.
#pragma once

#include <QAbstractHttpServer>
#include <QDeadlineTimer>
#include <QElapsedTimer>
#include <QHostAddress>
#include <QList>
#include <QLoggingCategory>
#include <QSet>
#include <QString>
#include <QTimer>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "builtin/browsertool.h"
#include "builtin/pythontool.h"
#include "connectionguard.h"
#include "generationqueue.h"
#include "httpchannel.h"
#include "responsestore.h"
#include "servermetrics.h"

class QHttpServerRequest;
class QTcpSocket;

Q_DECLARE_LOGGING_CATEGORY(lcNeuralServer)

namespace neural {
class Model;
}

namespace neural::server {

// The engine thread, its queue and the chat turn live in host/ (shared with the desktop app).
using host::GenerationJob;
using host::GenerationOutcome;
using host::GenerationQueue;
using host::QueueWaitStats;

struct ServerConfig {
    QHostAddress host = QHostAddress(QHostAddress::LocalHost);
    quint16 port = 8080;  // 0: any free port (see ApiServer::serverPort)
    // Empty: no authentication. Otherwise every route but /health needs
    // "Authorization: Bearer KEY".
    QByteArray apiKey;
    // Origins allowed to call the API from a browser ("*" for any). Empty: no CORS headers, so
    // browsers keep web pages from reading responses.
    QList<QByteArray> corsOrigins;
    QString modelId;  // the name clients use in "model"; empty: the model folder's name
    ConnectionLimits limits;
    int maxJsonDepth = 64;
    int maxQueue = 8;  // requests waiting behind the running one
    // Requests that, finding the queue full, wait for a place in it (first come, first served)
    // for up to overflowWaitMs before they get 503; more get 503 at once. 0: no waiting.
    int maxOverflow = 64;
    int overflowWaitMs = 2000;
    int defaultMaxTokens = 0;  // when a request gives no limit; 0: the rest of the context
    // Longest prompt a request may send, in tokens; a longer one gets 400
    // (context_length_exceeded) before the engine runs it. 0: the model's context.
    std::int64_t maxPromptTokens = 0;
    // Test-only request options: the "neural_forced_output" field and the
    // "X-Neural-Test-Engine-Error" header. Never on in production.
    bool testOptions = false;
    // Test-only (with testOptions): harmony texts that the chat / responses generations emit in
    // turn instead of sampling, the last one repeating (neural-server --test-script).
    std::vector<std::string> testScript;
    // Unknown request fields: false (the default) ignores them and logs each name once; true
    // answers 400.
    bool strictRequests = false;
    // Host header names accepted besides the loopback names (localhost, 127.0.0.1, ::1) and the
    // listen address; "*" accepts any. Any host is accepted when an API key is set. A browser
    // page on another name that resolves to this machine (DNS rebinding) gets 403.
    QList<QByteArray> allowedHosts;
    // A streamed response that has sent nothing for this long gets an SSE comment
    // (": keep-alive"), so clients and proxies keep waiting for a long prompt. 0: never.
    int keepAliveMs = 5000;
    // Responses kept for previous_response_id (the oldest is dropped first). 0: none.
    int maxStoredResponses = 64;
    // Backpressure for streams: once this many bytes wait to be sent on a stream's connection
    // (beyond what the kernel's socket buffer holds), the generation pauses within
    // GenerationJob::kMaxUndelivered tokens; it resumes when the client has read half of them.
    // A stream paused for writeTimeoutMs is cancelled and its connection closed (logged,
    // counted in neural_streams_stalled_total), so the engine goes on with the queue.
    qint64 sendBufferBytes = 256 * 1024;
    int writeTimeoutMs = 15'000;
    // gpt-oss's built-in tools the server runs itself (neural-server --tools; docs/API.md
    // "Built-in tools"). Off by default; never enabled by a request. When on, every chat
    // completion's system message declares them, and a call of one is run here and the turn
    // continues with its result, at most maxToolCalls times per request.
    bool toolPython = false;
    bool toolBrowser = false;
    // workDir: the folder under which each request gets its own scratch folder (removed when
    // the request ends); empty: the temp folder's neural-server-python.
    toolhost::PythonToolSettings pythonTool;
    toolhost::BrowserToolSettings browserTool;
    int maxToolCalls = 8;
};

class GenerationCall;

class ApiServer : public QAbstractHttpServer {
    Q_OBJECT
public:
    // A server with its own engine thread and queue.
    ApiServer(std::shared_ptr<Model> model, ServerConfig config, QObject* parent = nullptr);
    // A server that shares the embedding app's queue, so that app and server together run one
    // generation at a time. The queue is not owned and must outlive the server.
    ApiServer(std::shared_ptr<Model> model, GenerationQueue* sharedQueue, ServerConfig config,
              QObject* parent = nullptr);
    ~ApiServer() override;

    // Starts listening; false with a message in `error` when the address cannot be bound.
    bool start(QString* error = nullptr);
    // Graceful shutdown (SIGTERM, Ctrl+C, the console closing): stops accepting connections;
    // requests waiting in the queue or the overflow get 503, the running one is cancelled and
    // ends with an error (a stream: an error event and its proper end), later requests on open
    // connections get 503; each is logged. `finished` runs once every answer was written, or
    // after `timeoutMs` at the latest.
    void shutdown(int timeoutMs, std::function<void()> finished);
    bool shuttingDown() const { return m_shuttingDown; }
    quint16 serverPort() const;
    const QString& modelId() const { return m_modelId; }
    const ServerConfig& config() const { return m_config; }
    GenerationQueue& queue() { return *m_queue; }
    const ServerMetrics& metrics() const { return m_metrics; }

signals:
    // One line per answered request (method, path, status, time, tokens); never contains the
    // API key or any other header.
    void requestLogged(const QString& line);

protected:
#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)
    bool handleRequest(const QHttpServerRequest& request, QTcpSocket* socket) override;
    void missingHandler(const QHttpServerRequest& request, QTcpSocket* socket) override;
#else
    bool handleRequest(const QHttpServerRequest& request, QHttpServerResponder& responder) override;
    void missingHandler(const QHttpServerRequest& request,
                        QHttpServerResponder& responder) override;
#endif

private:
    friend class GenerationCall;

    // What a handler needs from a request (Qt's request object is reused for the next request
    // on the connection, so nothing refers to it after dispatch).
    struct Request {
        QByteArray method;
        QString path;
        QString query;  // the URL's query, without '?'
        QByteArray authorization;
        QByteArray contentType;
        QByteArray origin;
        QByteArray host;
        QByteArray body;
        QString remote;
        bool simulateEngineError = false;
        bool absoluteForm = false;  // the target was an absolute URL (its host is `host`)
        QElapsedTimer timer;
    };

    static Request extract(const QHttpServerRequest& request);
    void dispatch(Request request, HttpChannel* channel);
    // The body as JSON under the server's depth limit (throws openai::RequestError).
    openai::Json parseBody(const Request& request, openai::ParseLimits& limits) const;
    // The checks every JSON POST route makes before parsing: a JSON content type (415) and the
    // body size limit (413). False: refused, the error sent and counted under `route`.
    bool acceptJsonBody(const Request& request, HttpChannel* channel, const char* route);
    // The three generation routes (/v1/chat/completions, /v1/completions, /v1/responses): each
    // supplies only its body parser to serveGeneration.
    void handleChat(Request& request, HttpChannel* channel);
    void handleCompletion(Request& request, HttpChannel* channel);
    void handleResponses(Request& request, HttpChannel* channel);
    // GET / DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items.
    void handleStoredResponse(Request& request, HttpChannel* channel, const std::string& id,
                              bool inputItems);
    enum class Api { chat, completion, responses };
    // The route's name in the metrics and the log: "chat", "completions", "responses".
    static const char* routeLabel(Api api);
    // Maps a validated body into the job (Api::chat: job.chat; Api::completion:
    // job.completion; Api::responses: the route's own ResponsesRequest). Throws
    // openai::RequestError for a body the API refuses.
    using BodyParser = std::function<void(const openai::Json& body,
                                          const openai::ParseLimits& limits, GenerationJob& job)>;
    // The skeleton the generation routes share: the body checks (415, 413), the route's parser
    // (400; an unknown item_reference 404), the model check (404), the operator's built-in tools,
    // a test script's output and a random seed, then the queue (enqueue: streamed or not, the
    // overflow, a client that disconnects). `responses`: Api::responses' request, which `parse`
    // fills; the job runs its chat request.
    void serveGeneration(Request& request, HttpChannel* channel, Api api, const BodyParser& parse,
                         std::shared_ptr<openai::ResponsesRequest> responses = {});
    // The chat parser's options from the server's configuration (date, test options, strict).
    openai::ChatRequestOptions chatOptions(const openai::ParseLimits& limits) const;
    void enqueue(Request& request, HttpChannel* channel, std::shared_ptr<GenerationJob> job,
                 bool stream, bool includeUsage, Api api,
                 std::shared_ptr<openai::ResponsesRequest> responses = {});
    // Logs each unknown field name the first time a request carries it.
    void logIgnoredFields(const std::vector<std::string>& fields);
    // Logs each of a request's notices (what it asked for that the server does not do, e.g. a
    // dropped hosted tool) the first time it comes.
    void logNotices(const std::vector<std::string>& notices);
    // A random seed for a request that gave none, so identical requests differ.
    static std::uint64_t randomSeed();
    bool hostAllowed(const QByteArray& host) const;
    // The Host value names this machine: a loopback name, an IP address or an --allowed-host.
    bool namesThisServer(const QByteArray& host) const;

    bool authorized(const QByteArray& authorization) const;
    HttpHeaders corsHeaders(const QByteArray& origin) const;
    void sendJson(HttpChannel* channel, const Request& request, int status, const QByteArray& json,
                  const HttpHeaders& extra = {});
    void sendError(HttpChannel* channel, const Request& request, int status, const QString& message,
                   const char* type, const QByteArray& param = {}, const QByteArray& code = {},
                   const HttpHeaders& extra = {});
    void logRequest(const Request& request, int status, const QString& detail = {});
    // A line about a connection rather than a routed request (guard answers, closed ones).
    void logConnection(const QString& line);
#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)
    void serveGuarded(QTcpSocket* socket, GuardedRequest request);
#endif
    // The overflow FIFO (ServerConfig::maxOverflow): admits its first requests while the queue
    // takes them; refuses those whose wait is over.
    void admitOverflow();
    void armOverflowTimer();
    void expireOverflow();
    void checkShutdown();

    std::shared_ptr<Model> m_model;
    ServerConfig m_config;
    QString m_modelId;
    qint64 m_createdAt;
    GuardedTcpServer* m_tcp = nullptr;
    GenerationQueue* m_queue;
    bool m_ownsQueue;
    QSet<GenerationCall*> m_calls;           // requests in flight
    std::deque<GenerationCall*> m_overflow;  // waiting for a place in the queue, oldest first
    QTimer m_overflowTimer;
    bool m_admitting = false;
    ServerMetrics m_metrics;
    ResponseStore m_responses;
    QSet<QString> m_ignoredLogged;     // unknown field names already logged
    QSet<QString> m_noticesLogged;     // notices already logged
    std::size_t m_testScriptNext = 0;  // the next ServerConfig::testScript entry
    // The next scripted output, if the server runs a test script.
    std::optional<std::string> nextScripted();
    bool m_shuttingDown = false;
    // Why the model cannot answer (GET /health "degraded"): the last engine failure, cleared by
    // the next generation that succeeds. Empty: healthy.
    QString m_healthIssue;
    QDeadlineTimer m_shutdownDeadline;
    QTimer m_shutdownPoll;
    std::function<void()> m_shutdownFinished;
};

}  // namespace neural::server
