// An MCP server as a tool provider (docs/TOOLS.md "MCP servers"): start() launches (stdio) or
// connects to (HTTP) the server, runs the handshake (initialize, notifications/initialized) and
// lists its tools; each tool becomes a function of the namespace mcpNamespaceName(name). Calls
// are tools/call requests with a progress token; cancel, timeouts, crashes and malformed answers
// end a call with a clear outcome, never an exception.
#pragma once

#include <QHash>
#include <QPointer>
#include <QStringList>
#include <QTimer>

#include "jsonrpc.h"
#include "mcpserverconfig.h"
#include "mcptransport.h"
#include "tool.h"

namespace neural::toolhost {

class McpToolCall;

class McpProvider : public ToolProvider {
    Q_OBJECT
public:
    // The revision asked for first; the server may answer with an older one it speaks.
    static constexpr const char* kProtocolVersion = "2025-06-18";
    static QStringList supportedProtocolVersions();  // newest first
    // Caps on what a server can put into the prompt.
    static constexpr int kMaxTools = 128;
    static constexpr int kMaxToolPages = 64;
    static constexpr int kMaxDescriptionChars = 4000;
    static constexpr int kMaxSchemaBytes = 32 * 1024;
    static constexpr int kMaxSchemaDepth = 32;

    explicit McpProvider(McpServerConfig config, QObject* parent = nullptr);
    ~McpProvider() override;

    // Starts (or restarts) the server; changed() follows when it is ready or failed.
    void start();
    // Stops the server; running calls finish cancelled.
    void stop();
    const McpServerConfig& config() const { return config_; }
    // Time for the whole start (process launch, initialize, tools/list); default 60 s (npx may
    // download the server first).
    void setStartTimeoutMs(int ms) { startTimeoutMs_ = ms; }

    // What the server said about itself in initialize (empty before).
    QString protocolVersion() const { return protocolVersion_; }
    QString serverName() const { return serverName_; }
    QString serverVersion() const { return serverVersion_; }
    // Recent diagnostic lines: the server's stderr / log notifications / skipped messages.
    QString diagnostics() const;
    // The tool names as the server spells them, in its order (those offered to the model).
    QStringList toolNames() const;

    QString name() const override;
    bool inSystemMessage() const override { return false; }
    chat::ToolNamespace toolNamespace() const override;
    bool ready() const override { return state_ == State::ready; }
    QString problem() const override { return problem_; }
    ToolCall* call(const QString& tool, const QString& arguments,
                   const CallLimits& limits) override;

    // The transport in use (tests kill its process); null while stopped.
    McpTransport* transport() const { return transport_; }

private:
    friend class McpToolCall;
    enum class State { stopped, starting, ready, failed };
    struct Tool {
        QString name;       // the server's spelling (sent in tools/call)
        QString modelName;  // as offered to the model: [A-Za-z0-9_-], at most 64 characters
        chat::ToolDescription description;
    };

    void onOpened();
    void onInitialized(const JsonRpcReply& reply);
    void listTools(const std::string& cursor, QList<Tool> sofar, int page);
    void setTools(const QList<Tool>& tools);
    void onNotification(const QString& method, const Json& params);
    void onClosed(const QString& problem, const QString& detail);
    void fail(const QString& problem, const QString& detail);
    void teardown();
    void note(const QString& line);

    // From McpToolCall.
    void sendCall(McpToolCall* call, const Json& arguments);
    void cancelCall(McpToolCall* call, const QString& reason);
    void callDone(McpToolCall* call);

    McpServerConfig config_;
    State state_ = State::stopped;
    QString problem_;
    QPointer<McpTransport> transport_;
    JsonRpcConnection* rpc_ = nullptr;
    QTimer startTimer_;
    int startTimeoutMs_ = 60'000;
    int generation_ = 0;
    QString protocolVersion_, serverName_, serverVersion_, instructions_;
    bool listingTools_ = false, listAgain_ = false;
    QList<Tool> tools_;
    QStringList notes_;  // our own diagnostic lines (log notifications, skipped messages)
    QHash<QString, McpToolCall*> byProgressToken_;
    QList<McpToolCall*> running_;
    qint64 nextCall_ = 1;
};

// One tools/call. Owned by its provider (parent); deleteLater after finished is fine.
class McpToolCall : public ToolCall {
    Q_OBJECT
public:
    void cancel() override;
    // Deleting a call before it finished cancels it (no finished signal then).
    ~McpToolCall() override;

private:
    friend class McpProvider;
    McpToolCall(McpProvider* provider, QString tool, CallLimits limits);
    void finish(ToolOutcome outcome);
    void finishWith(ToolOutcome::Status status, const QString& text, const QString& detail);

    QPointer<McpProvider> provider_;
    QString tool_;
    CallLimits limits_;
    QTimer timer_;
    QString progressToken_;
    qint64 requestId_ = -1;
    bool done_ = false;
};

// The text the model reads for a tools/call result: text items joined by newlines, other content
// (images, audio, resources) as one short bracketed line each. Returns false with *error set when
// the result is malformed. *isError: the result's "isError".
bool mcpResultText(const Json& result, QString* text, bool* isError, QString* error);

}  // namespace neural::toolhost
