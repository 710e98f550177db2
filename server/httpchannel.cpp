#include "httpchannel.h"

#include <QTcpSocket>

#include "connectionguard.h"

namespace neural::server {

QByteArray httpReason(int status) {
    switch (status) {
        case 200:
            return "OK";
        case 204:
            return "No Content";
        case 400:
            return "Bad Request";
        case 401:
            return "Unauthorized";
        case 403:
            return "Forbidden";
        case 404:
            return "Not Found";
        case 405:
            return "Method Not Allowed";
        case 408:
            return "Request Timeout";
        case 411:
            return "Length Required";
        case 413:
            return "Payload Too Large";
        case 415:
            return "Unsupported Media Type";
        case 431:
            return "Request Header Fields Too Large";
        case 500:
            return "Internal Server Error";
        case 503:
            return "Service Unavailable";
        default:
            return "Status";
    }
}

#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)

SocketHttpChannel::SocketHttpChannel(QTcpSocket* socket, bool keepAlive, QObject* parent)
    : HttpChannel(parent), m_socket(socket), m_keepAlive(keepAlive) {
    socket->setProperty(kResponseInProgressProperty, true);
    // Queued: closed() handlers may delete this channel, which must not happen inside the
    // socket's own signal emission.
    connect(socket, &QTcpSocket::disconnected, this, &SocketHttpChannel::onGone,
            Qt::QueuedConnection);
    connect(socket, &QObject::destroyed, this, &SocketHttpChannel::onGone, Qt::QueuedConnection);
    connect(socket, &QTcpSocket::bytesWritten, this, &HttpChannel::drained);
}

qint64 SocketHttpChannel::pendingBytes() const {
    return m_socket && !m_gone ? m_socket->bytesToWrite() : 0;
}

void SocketHttpChannel::abort() {
    if (m_socket && !m_gone && !m_finished) m_socket->abort();
}

SocketHttpChannel::~SocketHttpChannel() {
    if (m_socket && !m_finished) {
        // Abandoned mid-response (the server is shutting down): the client cannot tell where the
        // response ends, so the connection must go.
        m_socket->setProperty(kResponseInProgressProperty, false);
        m_socket->abort();
    }
}

void SocketHttpChannel::onGone() {
    if (m_gone || m_finished) return;
    m_gone = true;
    emit closed();
}

bool SocketHttpChannel::isOpen() const {
    return !m_gone && !m_finished && m_socket &&
           m_socket->state() == QAbstractSocket::ConnectedState;
}

QByteArray SocketHttpChannel::head(int status, const HttpHeaders& headers) const {
    QByteArray out = "HTTP/1.1 " + QByteArray::number(status) + ' ' + httpReason(status) + "\r\n";
    for (const auto& [name, value] : headers) out += name + ": " + value + "\r\n";
    out += m_keepAlive ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
    return out;
}

void SocketHttpChannel::finish() {
    m_finished = true;
    if (!m_socket) return;
    m_socket->setProperty(kResponseInProgressProperty, false);
    if (!m_keepAlive) {
        m_socket->disconnectFromHost();  // after the write buffer is flushed
        return;
    }
    // The connection's next request (if one was sent meanwhile) may go now.
    if (auto* guard = m_socket->findChild<ConnectionGuard*>(QString(), Qt::FindDirectChildrenOnly))
        guard->responseFinished();
}

void SocketHttpChannel::sendResponse(int status, const HttpHeaders& headers,
                                     const QByteArray& body) {
    if (!isOpen()) return;
    QByteArray out = head(status, headers);
    out += "Content-Length: " + QByteArray::number(body.size()) + "\r\n\r\n";
    out += body;
    m_socket->write(out);
    finish();
}

void SocketHttpChannel::beginStream(int status, const HttpHeaders& headers) {
    if (!isOpen() || m_streaming) return;
    m_streaming = true;
    // A stream's unsent bytes are bounded: the kernel's share (Linux autotunes a loopback send
    // buffer to megabytes) is capped here, the rest is the server's (ServerConfig::
    // sendBufferBytes), so a client that stops reading pauses the engine after a few hundred KB.
    m_socket->setSocketOption(QAbstractSocket::SendBufferSizeSocketOption, kStreamKernelBuffer);
    m_socket->write(head(status, headers) + "Transfer-Encoding: chunked\r\n\r\n");
}

void SocketHttpChannel::writeChunk(const QByteArray& data) {
    if (!isOpen() || !m_streaming || data.isEmpty()) return;
    m_socket->write(QByteArray::number(data.size(), 16) + "\r\n" + data + "\r\n");
}

void SocketHttpChannel::endStream() {
    if (!isOpen() || !m_streaming) return;
    m_socket->write("0\r\n\r\n");
    finish();
}

#else  // Qt >= 6.8

namespace {
QHttpHeaders toQHttpHeaders(const HttpHeaders& headers) {
    QHttpHeaders out;
    for (const auto& [name, value] : headers) out.append(name, value);
    return out;
}
}  // namespace

ResponderHttpChannel::ResponderHttpChannel(QHttpServerResponder&& responder, QObject* parent)
    : HttpChannel(parent), m_responder(std::move(responder)) {
#if QT_VERSION >= QT_VERSION_CHECK(6, 11, 0)
    m_poll.setInterval(200);
    connect(&m_poll, &QTimer::timeout, this, [this] {
        if (!m_finished && !m_gone && m_responder.isResponseCanceled()) {
            m_gone = true;
            m_poll.stop();
            emit closed();
        }
    });
    m_poll.start();
#endif
}

bool ResponderHttpChannel::isOpen() const { return !m_gone && !m_finished; }

void ResponderHttpChannel::sendResponse(int status, const HttpHeaders& headers,
                                        const QByteArray& body) {
    if (!isOpen()) return;
    m_responder.write(body, toQHttpHeaders(headers),
                      static_cast<QHttpServerResponder::StatusCode>(status));
    m_finished = true;
}

void ResponderHttpChannel::beginStream(int status, const HttpHeaders& headers) {
    if (!isOpen() || m_streaming) return;
    m_streaming = true;
    m_responder.writeBeginChunked(toQHttpHeaders(headers),
                                  static_cast<QHttpServerResponder::StatusCode>(status));
}

void ResponderHttpChannel::writeChunk(const QByteArray& data) {
    if (isOpen() && m_streaming && !data.isEmpty()) m_responder.writeChunk(data);
}

void ResponderHttpChannel::endStream() {
    if (!isOpen() || !m_streaming) return;
    m_responder.writeEndChunked(QByteArray());
    m_finished = true;
}

#endif

void SseWriter::begin(const HttpHeaders& extraHeaders) {
    if (m_begun) return;
    m_begun = true;
    HttpHeaders headers{{"Content-Type", "text/event-stream; charset=utf-8"},
                        {"Cache-Control", "no-cache"},
                        {"X-Accel-Buffering", "no"}};
    headers += extraHeaders;
    m_channel->beginStream(200, headers);
    m_lastWrite.start();
}

void SseWriter::event(const QByteArray& json) {
    m_channel->writeChunk("data: " + json + "\n\n");
    m_lastWrite.start();
}

void SseWriter::namedEvent(const QByteArray& name, const QByteArray& json) {
    m_channel->writeChunk("event: " + name + "\ndata: " + json + "\n\n");
    m_lastWrite.start();
}

void SseWriter::keepAlive() {
    m_channel->writeChunk(": keep-alive\n\n");
    m_lastWrite.start();
}

void SseWriter::done() {
    m_channel->writeChunk("data: [DONE]\n\n");
    m_channel->endStream();
}

void SseWriter::end() { m_channel->endStream(); }

}  // namespace neural::server
