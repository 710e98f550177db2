// Where one request's response goes: a whole response, or a chunked stream (SSE). Qt HttpServer
// has no chunked-response API before 6.8, so there are two implementations: on Qt < 6.8 the
// response is written as HTTP/1.1 straight onto the request's QTcpSocket (which 6.4's
// QAbstractHttpServer::handleRequest hands over); on Qt >= 6.8 the responder's
// writeBeginChunked / writeChunk / writeEndChunked are used.
#pragma once

#include <QByteArray>
#include <QElapsedTimer>
#include <QList>
#include <QObject>
#include <QPair>
#include <QPointer>
#include <QTimer>
#include <QtGlobal>

#include <memory>

#if QT_VERSION >= QT_VERSION_CHECK(6, 8, 0)
#include <QHttpServerResponder>
#endif

class QTcpSocket;

namespace neural::server {

using HttpHeaders = QList<QPair<QByteArray, QByteArray>>;

// Reason phrase of an HTTP status ("Not Found").
QByteArray httpReason(int status);

// Dynamic property set on a socket while a response on it is in progress (Qt < 6.8, where the
// server writes on the socket itself): the connection guard then keeps the connection out of its
// idle timeout and out of the idle connections it may close at the connection cap.
inline constexpr const char* kResponseInProgressProperty = "neuralResponseInProgress";

// SO_SNDBUF of a connection while it streams (Qt < 6.8): 64 KiB (Linux doubles it).
inline constexpr int kStreamKernelBuffer = 64 * 1024;

class HttpChannel : public QObject {
    Q_OBJECT
public:
    using QObject::QObject;
    ~HttpChannel() override = default;

    // A complete response; the body length is set from `body`.
    virtual void sendResponse(int status, const HttpHeaders& headers, const QByteArray& body) = 0;
    // Starts a chunked response (status line and headers now, body in chunks).
    virtual void beginStream(int status, const HttpHeaders& headers) = 0;
    virtual void writeChunk(const QByteArray& data) = 0;
    virtual void endStream() = 0;
    // False once the client has gone (closed() was emitted) or the response is complete.
    virtual bool isOpen() const = 0;
    // Bytes written but not yet taken by the connection (the client's reading pace). Qt >= 6.8
    // does not expose them: 0 there.
    virtual qint64 pendingBytes() const { return 0; }
    // Closes the connection at once, mid-response (the client stopped reading); closed() follows.
    virtual void abort() {}
    bool streaming() const { return m_streaming; }

signals:
    // The client disconnected before the response was complete.
    void closed();
    // The connection passed some of the pending bytes on to the client.
    void drained();

protected:
    bool m_streaming = false;
    bool m_finished = false;
};

#if QT_VERSION < QT_VERSION_CHECK(6, 8, 0)
// HTTP/1.1 written by hand on the connection's socket. Keeps the connection alive unless the
// request asked to close it (GuardedRequest::keepAlive); the chunked encoding frames streams,
// Content-Length the rest. A complete response tells the socket's ConnectionGuard, which then
// hands out the connection's next request.
class SocketHttpChannel : public HttpChannel {
    Q_OBJECT
public:
    SocketHttpChannel(QTcpSocket* socket, bool keepAlive, QObject* parent = nullptr);
    ~SocketHttpChannel() override;

    void sendResponse(int status, const HttpHeaders& headers, const QByteArray& body) override;
    void beginStream(int status, const HttpHeaders& headers) override;
    void writeChunk(const QByteArray& data) override;
    void endStream() override;
    bool isOpen() const override;
    qint64 pendingBytes() const override;
    void abort() override;

private:
    QByteArray head(int status, const HttpHeaders& headers) const;
    void finish();
    void onGone();

    QPointer<QTcpSocket> m_socket;
    bool m_keepAlive;
    bool m_gone = false;
};
#else
// Qt >= 6.8: the responder's own chunked API. Disconnects are detected with
// isResponseCanceled() from Qt 6.11 on; 6.8 - 6.10 offer no way to see them.
class ResponderHttpChannel : public HttpChannel {
    Q_OBJECT
public:
    ResponderHttpChannel(QHttpServerResponder&& responder, QObject* parent = nullptr);

    void sendResponse(int status, const HttpHeaders& headers, const QByteArray& body) override;
    void beginStream(int status, const HttpHeaders& headers) override;
    void writeChunk(const QByteArray& data) override;
    void endStream() override;
    bool isOpen() const override;

private:
    QHttpServerResponder m_responder;
    QTimer m_poll;
    bool m_gone = false;
};
#endif

// Server-sent events over a channel: "data: JSON\n\n" per event, "data: [DONE]" at the end.
class SseWriter {
public:
    explicit SseWriter(HttpChannel* channel) : m_channel(channel) {}
    void begin(const HttpHeaders& extraHeaders);
    bool begun() const { return m_begun; }
    void event(const QByteArray& json);
    // An event with a name ("event: response.created"), as the Responses API streams them.
    void namedEvent(const QByteArray& name, const QByteArray& json);
    // ": keep-alive": an SSE comment, which clients ignore; it keeps proxies and client
    // timeouts from closing a stream that waits for a long prompt.
    void keepAlive();
    void done();  // [DONE] and the end of the stream
    void end();   // the end of the stream without [DONE]
    // Milliseconds since the last write (begin, an event or a keep-alive).
    qint64 idleMs() const { return m_lastWrite.isValid() ? m_lastWrite.elapsed() : 0; }

private:
    HttpChannel* m_channel;
    bool m_begun = false;
    QElapsedTimer m_lastWrite;
};

}  // namespace neural::server
