// JSON-RPC 2.0 as MCP uses it (docs/TOOLS.md "MCP servers"), independent of the transport: the
// client's requests get integer ids and are matched with their answers; notifications and the
// server's own requests are routed; `ping` is answered and every other server request gets
// error -32601. Malformed input never throws: it is reported (protocolError, or a failed reply
// for the request it answers) and skipped.
#pragma once

#include <QByteArray>
#include <QHash>
#include <QObject>
#include <QString>

#include <functional>

#include <nlohmann/json.hpp>

namespace neural::toolhost {

// ordered_json throughout: tool schemas keep the key order the server wrote (the prompt renders
// them in that order).
using Json = nlohmann::ordered_json;

// The answer to one request: a result, a JSON-RPC error object, or a failure on our side (the
// transport broke, the answer was malformed, the request was abandoned).
struct JsonRpcReply {
    enum class Kind { result, error, failure } kind = Kind::failure;
    Json result;           // Kind::result
    int errorCode = 0;     // Kind::error
    QString errorMessage;  // Kind::error: the server's message; Kind::failure: ours
    Json errorData;        // Kind::error: the optional "data"
    bool ok() const { return kind == Kind::result; }
    // One line for messages: "error -32601: Method not found" or the failure text.
    QString describe() const;
};

class JsonRpcConnection : public QObject {
    Q_OBJECT
public:
    using Callback = std::function<void(const JsonRpcReply&)>;

    explicit JsonRpcConnection(QObject* parent = nullptr);

    // Sends a request (through `outgoing`); `done` runs once with its answer. Returns the id.
    qint64 request(const QString& method, Json params, Callback done);
    void notify(const QString& method, Json params);
    // Feeds one received message (a JSON-RPC object, or a batch array of them).
    void receive(const QByteArray& message);

    // Answers request `id` (if still waiting) with a failure: the transport lost it.
    void fail(qint64 id, const QString& why);
    // Fails every waiting request (the connection is gone).
    void failAll(const QString& why);
    // Stops waiting for `id` without calling its callback (the caller cancelled it). True if it
    // was waiting.
    bool forget(qint64 id);
    bool waiting(qint64 id) const { return pending_.contains(id); }
    int waitingCount() const { return int(pending_.size()); }

    // The longest message excerpt quoted in error messages.
    static constexpr int kExcerptChars = 200;
    static QString excerpt(const QByteArray& bytes);

signals:
    // A message to send; requestId is the id of a request of ours, or -1 (notifications and
    // our answers to the server's requests).
    void outgoing(const QByteArray& message, qint64 requestId);
    void notificationReceived(const QString& method, const neural::toolhost::Json& params);
    // Input that was not a valid message or answered nothing we asked; it was skipped.
    void protocolError(const QString& description);

private:
    void receiveOne(const Json& message, const QByteArray& raw);
    void answer(const Json& id, Json result);
    void answerError(const Json& id, int code, const QString& message);
    void send(const Json& message, qint64 requestId);

    qint64 nextId_ = 1;
    QHash<qint64, Callback> pending_;
};

}  // namespace neural::toolhost
