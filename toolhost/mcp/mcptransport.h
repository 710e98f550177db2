// How MCP messages travel (docs/TOOLS.md "MCP servers"): a child process's stdin/stdout
// (McpStdioTransport) or Streamable HTTP (McpHttpTransport). A transport moves whole JSON-RPC
// messages; JsonRpcConnection gives them meaning.
#pragma once

#include <QByteArray>
#include <QObject>
#include <QString>

namespace neural::toolhost {

class McpTransport : public QObject {
    Q_OBJECT
public:
    using QObject::QObject;
    // Begins connecting; `opened` or `closed` follows (never inside this call).
    virtual void open() = 0;
    // Sends one message; requestId is its JSON-RPC id when it is a request of ours, else -1.
    virtual void send(const QByteArray& message, qint64 requestId) = 0;
    // No longer interested in the answer to requestId (cancelled): frees what waits for it.
    virtual void abandon(qint64 requestId) { Q_UNUSED(requestId); }
    // Ends the connection; no signals follow.
    virtual void close() = 0;
    // Set after initialize: the protocol revision the server chose (HTTP sends it as a header).
    virtual void setProtocolVersion(const QString& version) { Q_UNUSED(version); }
    // The transport's last diagnostic lines (stderr of a process, HTTP errors), newest last.
    virtual QString diagnostics() const = 0;

signals:
    void opened();
    void messageReceived(const QByteArray& message);
    // The answer to requestId will not come over this transport (an HTTP error, a stream that
    // ended without it); the connection itself may still work.
    void requestFailed(qint64 requestId, const QString& why);
    // The connection is gone (the process exited, could not start, ...). `problem` is one line
    // for the user; `detail` adds what the transport knows (exit code, last stderr lines).
    void closed(const QString& problem, const QString& detail);
    // A line worth keeping for error messages (a log line, a skipped message).
    void diagnostic(const QString& line);
};

}  // namespace neural::toolhost
