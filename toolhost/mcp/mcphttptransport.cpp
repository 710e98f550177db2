#include "mcphttptransport.h"

#include <QTimer>

#include "jsonrpc.h"

namespace neural::toolhost {

McpHttpTransport::McpHttpTransport(const McpServerConfig& config, QObject* parent)
    : McpTransport(parent), config_(config), manager_(new QNetworkAccessManager(this)) {}

McpHttpTransport::~McpHttpTransport() { close(); }

void McpHttpTransport::note(const QString& line) {
    recent_ << line;
    while (recent_.size() > 20) recent_.removeFirst();
    emit diagnostic(line);
}

QString McpHttpTransport::diagnostics() const { return recent_.join(QLatin1Char('\n')); }

void McpHttpTransport::open() {
    // Nothing to connect ahead: the first POST (initialize) opens the session.
    QTimer::singleShot(0, this, [this] {
        if (!closed_) emit opened();
    });
}

QNetworkRequest McpHttpTransport::makeRequest() const {
    QNetworkRequest request(config_.url);
    for (auto it = config_.headers.cbegin(); it != config_.headers.cend(); ++it)
        request.setRawHeader(it.key().toUtf8(), it.value().toUtf8());
    if (!sessionId_.isEmpty()) request.setRawHeader("Mcp-Session-Id", sessionId_.toUtf8());
    if (!protocolVersion_.isEmpty())
        request.setRawHeader("MCP-Protocol-Version", protocolVersion_.toUtf8());
    return request;
}

void McpHttpTransport::track(QNetworkReply* reply, qint64 requestId, bool listen) {
    auto ex = std::make_shared<Exchange>();
    ex->requestId = requestId;
    ex->listen = listen;
    exchanges_.insert(reply, ex);
    connect(reply, &QNetworkReply::readyRead, this, [this, reply] { onReadyRead(reply); });
    connect(reply, &QNetworkReply::finished, this, [this, reply] { onFinished(reply); });
}

void McpHttpTransport::send(const QByteArray& message, qint64 requestId) {
    if (closed_) {
        if (requestId >= 0)
            emit requestFailed(requestId, QStringLiteral("the connection is closed"));
        return;
    }
    if (notificationsInFlight_ > 0) {
        queued_.append({message, requestId});
        return;
    }
    post(message, requestId);
}

void McpHttpTransport::post(const QByteArray& message, qint64 requestId) {
    QNetworkRequest request = makeRequest();
    request.setHeader(QNetworkRequest::ContentTypeHeader, QByteArrayLiteral("application/json"));
    request.setRawHeader("Accept", "application/json, text/event-stream");
    QNetworkReply* reply = manager_->post(request, message);
    track(reply, requestId, false);
    if (requestId >= 0) return;
    ++notificationsInFlight_;
    // Once the server answered it (202 Accepted, or an error), what waits behind it goes out.
    connect(reply, &QNetworkReply::metaDataChanged, this, [this, reply] { release(reply); });
    connect(reply, &QNetworkReply::finished, this, [this, reply] { release(reply); });
}

void McpHttpTransport::release(QNetworkReply* reply) {
    if (reply->property("neuralReleased").toBool()) return;
    reply->setProperty("neuralReleased", true);
    --notificationsInFlight_;
    while (notificationsInFlight_ == 0 && !queued_.isEmpty() && !closed_) {
        const auto [message, id] = queued_.takeFirst();
        post(message, id);
    }
    if (notificationsInFlight_ == 0 && listenWanted_) {
        listenWanted_ = false;
        openListenStream();
    }
}

void McpHttpTransport::setProtocolVersion(const QString& version) {
    protocolVersion_ = version;
    // The GET stream opens once notifications/initialized (sent next) was accepted.
    QTimer::singleShot(0, this, [this] {
        if (notificationsInFlight_ > 0)
            listenWanted_ = true;
        else
            openListenStream();
    });
}

void McpHttpTransport::openListenStream() {
    if (closed_ || sessionId_.isEmpty()) return;  // without a session there is nothing to join
    QNetworkRequest request = makeRequest();
    request.setRawHeader("Accept", "text/event-stream");
    track(manager_->get(request), -1, true);
}

void McpHttpTransport::abandon(qint64 requestId) {
    for (auto it = exchanges_.begin(); it != exchanges_.end(); ++it) {
        if ((*it)->requestId == requestId && !(*it)->listen) {
            QNetworkReply* reply = it.key();
            exchanges_.erase(it);
            reply->disconnect(this);
            reply->abort();
            reply->deleteLater();
            return;
        }
    }
}

void McpHttpTransport::onReadyRead(QNetworkReply* reply) {
    auto it = exchanges_.find(reply);
    if (it == exchanges_.end() || closed_) return;
    const std::shared_ptr<Exchange> keep = *it;
    Exchange& ex = *keep;
    if (ex.buffer.isEmpty() && !ex.stream) {
        const QString type = reply->header(QNetworkRequest::ContentTypeHeader).toString().toLower();
        ex.stream = type.startsWith(QLatin1String("text/event-stream"));
    }
    ex.buffer.append(reply->readAll());
    if (ex.stream) {
        parseSse(ex, false);
        if (closed_ || !exchanges_.contains(reply)) return;
    }
    if (ex.buffer.size() > kMaxMessageBytes || ex.eventData.size() > kMaxMessageBytes) {
        const qint64 id = ex.requestId;
        exchanges_.remove(reply);
        reply->disconnect(this);
        reply->abort();
        reply->deleteLater();
        const QString why = QStringLiteral("the server sent a message longer than %1 MiB")
                                .arg(kMaxMessageBytes / (1024 * 1024));
        note(why);
        if (id >= 0) emit requestFailed(id, why);
    }
}

void McpHttpTransport::parseSse(Exchange& ex, bool atEnd) {
    // Server-sent events: lines "field: value"; a blank line dispatches the event. Only "data"
    // and "event" matter here ("id" and "retry" are for resuming, which this client does not).
    qsizetype start = 0;
    for (;;) {
        qsizetype end = -1;
        for (qsizetype i = start; i < ex.buffer.size(); ++i) {
            if (ex.buffer[i] == '\n' || ex.buffer[i] == '\r') {
                end = i;
                break;
            }
        }
        if (end < 0) break;
        // "\r\n" is one line end; a lone '\r' at the end of the buffer waits for what follows.
        if (ex.buffer[end] == '\r' && end + 1 >= ex.buffer.size() && !atEnd) break;
        QByteArray line = ex.buffer.mid(start, end - start);
        start = end + 1;
        if (ex.buffer[end] == '\r' && start < ex.buffer.size() && ex.buffer[start] == '\n') ++start;
        if (line.isEmpty()) {
            const bool message = ex.eventType.isEmpty() || ex.eventType == QLatin1String("message");
            QByteArray data = ex.eventData;
            ex.eventData.clear();
            ex.eventType.clear();
            if (message && !data.isEmpty()) {
                emit messageReceived(data);
                if (closed_) return;
            }
            continue;
        }
        if (line.startsWith(':')) continue;  // a comment (keep-alive)
        const qsizetype colon = line.indexOf(':');
        const QByteArray field = colon < 0 ? line : line.left(colon);
        QByteArray value = colon < 0 ? QByteArray() : line.mid(colon + 1);
        if (value.startsWith(' ')) value.remove(0, 1);
        if (field == "data") {
            if (!ex.eventData.isEmpty()) ex.eventData.append('\n');
            ex.eventData.append(value);
        } else if (field == "event") {
            ex.eventType = QString::fromUtf8(value);
        }
    }
    ex.buffer.remove(0, start);
}

void McpHttpTransport::onFinished(QNetworkReply* reply) {
    reply->deleteLater();
    auto it = exchanges_.find(reply);
    if (it == exchanges_.end() || closed_) return;
    const std::shared_ptr<Exchange> keep = *it;
    Exchange& ex = *keep;
    exchanges_.erase(it);
    const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    if (sessionId_.isEmpty() && reply->hasRawHeader("Mcp-Session-Id"))
        sessionId_ = QString::fromUtf8(reply->rawHeader("Mcp-Session-Id"));
    ex.buffer.append(reply->readAll());
    if (ex.listen) {
        // The GET stream is optional (405: the server offers none). A stream that ends after
        // it worked is opened again a few times; after that, server notifications are missed.
        if (status == 200 && ex.stream) parseSse(ex, true);
        if (status == 200 && listenRetries_ < 5 && !closed_) {
            ++listenRetries_;
            QTimer::singleShot(1000, this, [this] { openListenStream(); });
        }
        return;
    }
    if (status >= 400 || (status == 0 && reply->error() != QNetworkReply::NoError)) {
        QString why;
        if (status >= 400) {
            const QString reason =
                reply->attribute(QNetworkRequest::HttpReasonPhraseAttribute).toString();
            why = QStringLiteral("HTTP %1%2")
                      .arg(status)
                      .arg(reason.isEmpty() ? QString() : QLatin1Char(' ') + reason);
            const QString body = JsonRpcConnection::excerpt(ex.buffer);
            if (!body.isEmpty()) why += QStringLiteral(": ") + body;
        } else {
            why = QStringLiteral("could not reach %1: %2")
                      .arg(config_.url.toString(QUrl::RemoveUserInfo), reply->errorString());
        }
        note(why);
        if (status == 404 && !sessionId_.isEmpty()) {
            // The spec's signal that the session is gone: everything waiting on it is lost.
            closed_ = true;
            emit closed(QStringLiteral("the server ended the MCP session (HTTP 404)"),
                        diagnostics());
            return;
        }
        if (ex.requestId >= 0) emit requestFailed(ex.requestId, why);
        return;
    }
    if (ex.stream || reply->header(QNetworkRequest::ContentTypeHeader)
                         .toString()
                         .toLower()
                         .startsWith(QLatin1String("text/event-stream"))) {
        ex.stream = true;
        parseSse(ex, true);
        if (closed_) return;
        if (ex.requestId >= 0)  // ignored when the answer came on the stream
            emit requestFailed(
                ex.requestId,
                QStringLiteral("the server closed the event stream without an answer"));
        return;
    }
    if (!ex.buffer.trimmed().isEmpty()) {
        const QString type = reply->header(QNetworkRequest::ContentTypeHeader).toString();
        if (!type.toLower().startsWith(QLatin1String("application/json"))) {
            const QString why =
                QStringLiteral("HTTP %1 with Content-Type \"%2\" instead of JSON: %3")
                    .arg(status)
                    .arg(type, JsonRpcConnection::excerpt(ex.buffer));
            note(why);
            if (ex.requestId >= 0) emit requestFailed(ex.requestId, why);
            return;
        }
        emit messageReceived(ex.buffer);
        if (closed_) return;
    }
    if (ex.requestId >= 0)  // ignored when the body answered it
        emit requestFailed(ex.requestId,
                           QStringLiteral("HTTP %1 without an answer to the request").arg(status));
}

void McpHttpTransport::close() {
    if (closed_) return;
    closed_ = true;
    const QList<QNetworkReply*> replies = exchanges_.keys();
    exchanges_.clear();
    queued_.clear();
    for (QNetworkReply* reply : replies) {
        reply->disconnect(this);
        reply->abort();
        reply->deleteLater();
    }
    if (!sessionId_.isEmpty()) {
        // Ends the session on the server (best effort; a 405 means it keeps sessions itself).
        QNetworkReply* reply =
            manager_->sendCustomRequest(makeRequest(), QByteArrayLiteral("DELETE"));
        connect(reply, &QNetworkReply::finished, reply, &QObject::deleteLater);
    }
}

}  // namespace neural::toolhost
