#include "jsonrpc.h"

#include <climits>

namespace neural::toolhost {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
}  // namespace

QString JsonRpcReply::describe() const {
    switch (kind) {
        case Kind::result:
            return QStringLiteral("ok");
        case Kind::error:
            return QStringLiteral("error %1: %2").arg(errorCode).arg(errorMessage);
        case Kind::failure:
            return errorMessage;
    }
    return errorMessage;
}

JsonRpcConnection::JsonRpcConnection(QObject* parent) : QObject(parent) {}

QString JsonRpcConnection::excerpt(const QByteArray& bytes) {
    QString text = QString::fromUtf8(bytes.left(kExcerptChars * 4)).trimmed();
    if (text.size() > kExcerptChars) text = text.left(kExcerptChars) + QStringLiteral("...");
    return text;
}

void JsonRpcConnection::send(const Json& message, qint64 requestId) {
    // dump() with replacement: a lone surrogate in a string never throws.
    const std::string text = message.dump(-1, ' ', false, Json::error_handler_t::replace);
    emit outgoing(QByteArray::fromStdString(text), requestId);
}

qint64 JsonRpcConnection::request(const QString& method, Json params, Callback done) {
    const qint64 id = nextId_++;
    pending_.insert(id, std::move(done));
    Json message = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method.toStdString()}};
    if (!params.is_null()) message["params"] = std::move(params);
    send(message, id);
    return id;
}

void JsonRpcConnection::notify(const QString& method, Json params) {
    Json message = {{"jsonrpc", "2.0"}, {"method", method.toStdString()}};
    if (!params.is_null()) message["params"] = std::move(params);
    send(message, -1);
}

void JsonRpcConnection::fail(qint64 id, const QString& why) {
    const auto it = pending_.find(id);
    if (it == pending_.end()) return;
    Callback done = std::move(it.value());
    pending_.erase(it);
    JsonRpcReply reply;
    reply.kind = JsonRpcReply::Kind::failure;
    reply.errorMessage = why;
    if (done) done(reply);
}

void JsonRpcConnection::failAll(const QString& why) {
    const QList<qint64> ids = pending_.keys();
    for (qint64 id : ids) fail(id, why);
}

bool JsonRpcConnection::forget(qint64 id) { return pending_.remove(id) > 0; }

void JsonRpcConnection::receive(const QByteArray& message) {
    Json parsed = Json::parse(message.constData(), message.constData() + message.size(), nullptr,
                              /*allow_exceptions=*/false);
    if (parsed.is_discarded()) {
        emit protocolError(QStringLiteral("not JSON: %1").arg(excerpt(message)));
        return;
    }
    if (parsed.is_array()) {  // a batch (MCP 2025-03-26; later revisions send none)
        if (parsed.empty()) emit protocolError(QStringLiteral("an empty batch"));
        for (const Json& one : parsed) receiveOne(one, message);
        return;
    }
    receiveOne(parsed, message);
}

void JsonRpcConnection::receiveOne(const Json& m, const QByteArray& raw) {
    if (!m.is_object()) {
        emit protocolError(QStringLiteral("not a JSON-RPC message (a %1): %2")
                               .arg(QLatin1String(m.type_name()), excerpt(raw)));
        return;
    }
    const auto jsonrpc = m.find("jsonrpc");
    if (jsonrpc == m.end() || *jsonrpc != "2.0") {
        emit protocolError(
            QStringLiteral("not a JSON-RPC 2.0 message (no \"jsonrpc\": \"2.0\"): %1")
                .arg(excerpt(raw)));
        return;
    }
    const auto method = m.find("method");
    const auto id = m.find("id");
    if (method != m.end()) {
        if (!method->is_string()) {
            emit protocolError(QStringLiteral("\"method\" is not a string: %1").arg(excerpt(raw)));
            if (id != m.end()) answerError(*id, -32600, QStringLiteral("Invalid Request"));
            return;
        }
        const QString name = q(method->get<std::string>());
        Json params = Json::object();
        if (const auto p = m.find("params"); p != m.end()) params = *p;
        if (id == m.end()) {
            emit notificationReceived(name, params);
            return;
        }
        if (!id->is_string() && !id->is_number_integer()) {
            emit protocolError(QStringLiteral("a request id must be a string or an integer: %1")
                                   .arg(excerpt(raw)));
            answerError(nullptr, -32600, QStringLiteral("Invalid Request"));
            return;
        }
        // The server's requests: ping is answered; the client declares no capabilities
        // (roots, sampling, elicitation), so everything else is "method not found".
        if (name == QLatin1String("ping")) {
            answer(*id, Json::object());
        } else {
            answerError(*id, -32601, QStringLiteral("Method not found: %1").arg(name));
        }
        return;
    }
    // An answer to one of our requests.
    if (id == m.end()) {
        emit protocolError(
            QStringLiteral("neither a request nor an answer (no \"method\", no \"id\"): %1")
                .arg(excerpt(raw)));
        return;
    }
    const auto result = m.find("result");
    const auto error = m.find("error");
    if (!id->is_number_integer()) {
        // id null: the server could not read one of our messages; it names no request.
        QString what = excerpt(raw);
        if (error != m.end() && error->is_object() && error->contains("message") &&
            (*error)["message"].is_string())
            what = q((*error)["message"].get<std::string>());
        emit protocolError(
            QStringLiteral("the server reported an error for no request: %1").arg(what));
        return;
    }
    const qint64 rid = id->get<qint64>();
    const auto it = pending_.find(rid);
    if (it == pending_.end()) {
        // An answer after we gave up (cancelled, timed out) is normal; anything else is noise.
        emit protocolError(QStringLiteral("an answer to no waiting request (id %1)").arg(rid));
        return;
    }
    Callback done = std::move(it.value());
    pending_.erase(it);
    JsonRpcReply reply;
    if (result != m.end() && error == m.end()) {
        reply.kind = JsonRpcReply::Kind::result;
        reply.result = *result;
    } else if (error != m.end() && result == m.end() && error->is_object() &&
               error->contains("code") && (*error)["code"].is_number_integer()) {
        reply.kind = JsonRpcReply::Kind::error;
        const qint64 code = (*error)["code"].get<qint64>();
        reply.errorCode = code < INT_MIN || code > INT_MAX ? -32603 : int(code);
        if (const auto msg = error->find("message"); msg != error->end() && msg->is_string())
            reply.errorMessage = q(msg->get<std::string>());
        else
            reply.errorMessage = QStringLiteral("(no message)");
        if (const auto data = error->find("data"); data != error->end()) reply.errorData = *data;
    } else {
        reply.kind = JsonRpcReply::Kind::failure;
        reply.errorMessage =
            QStringLiteral(
                "malformed JSON-RPC answer (needs exactly one of \"result\" and an "
                "\"error\" object with an integer \"code\"): %1")
                .arg(excerpt(raw));
    }
    if (done) done(reply);
}

void JsonRpcConnection::answer(const Json& id, Json result) {
    send(Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}}, -1);
}

void JsonRpcConnection::answerError(const Json& id, int code, const QString& message) {
    send(Json{{"jsonrpc", "2.0"},
              {"id", id},
              {"error", {{"code", code}, {"message", message.toStdString()}}}},
         -1);
}

}  // namespace neural::toolhost
