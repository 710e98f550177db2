// Limits enforced on raw connections before any request reaches a handler. Qt HttpServer
// buffers a whole request in memory with no size limit, and Qt 6.4 reacts to a parse error by
// disconnecting every signal of the socket (leaking it) instead of answering. So each accepted
// socket gets a ConnectionGuard whose readyRead slot runs before Qt's: it follows the request
// framing (head, then Content-Length bytes of body), answers oversized, malformed, chunked or
// too slow requests itself with an OpenAI-style error and closes the connection, and closes
// connections that stay silent or idle too long.
//
// Qt < 6.8: Qt's parser cannot take several requests from one read (it answers one, mixing
// their fields), so the guard parses requests itself, cuts Qt's parser off the socket and hands
// each complete request to the server's handler, one at a time per connection: a request sent
// while the previous response is still being written (pipelining) waits, unread, until that
// response is complete, and then is answered in order.
// Qt >= 6.8: only the limits are checked here; Qt's own parser reads the requests.
//
// GuardedTcpServer caps the open connections: at the cap, the connection idle the longest
// (no request in progress) is closed to make room; when none is idle, the new connection gets
// 503 with Retry-After. Every answer the guard gives itself and every connection it closes is
// reported (signals), so that the server counts and logs them.
#pragma once

#include <QByteArray>
#include <QElapsedTimer>
#include <QList>
#include <QPair>
#include <QPointer>
#include <QString>
#include <QTcpServer>
#include <QTimer>

#include <algorithm>
#include <deque>
#include <functional>

class QTcpSocket;

namespace neural::server {

struct ConnectionLimits {
    qint64 maxHeaderBytes = 32 * 1024;      // request line + headers
    qint64 maxBodyBytes = 8 * 1024 * 1024;  // Content-Length
    int maxConnections = 256;               // open connections at once
    // A request must arrive whole within this, from its first byte; the first request of a
    // connection from the moment it was accepted.
    int readTimeoutMs = 30'000;
    int idleTimeoutMs = 120'000;  // an idle keep-alive connection is closed after
    // Past its first kRateGraceBytes, a request must keep arriving at this many bytes per second
    // on average (measured from the moment it passed them); a slower one gets 408. 0: no
    // minimum (the read timeout alone bounds the request).
    qint64 minBytesPerSecond = 4096;
    // Open connections from one address at once (loopback included): beyond it, the address's
    // longest idle connection is closed, else the newcomer gets 503. Keeps one client (or a
    // handful of slow ones) from taking every place of maxConnections. 0: a quarter of
    // maxConnections, at least 4 (64 at the default 256: room for a client pool of 32
    // concurrent requests and its idle keep-alive connections).
    int maxPerAddress = 0;
    int perAddressLimit() const {
        return maxPerAddress > 0 ? maxPerAddress : std::max(4, maxConnections / 4);
    }
};

// The first bytes of a request (any ordinary head and small body) arrive at any pace within the
// read timeout; the minimum data rate applies to the rest.
inline constexpr qint64 kRateGraceBytes = 4096;

// A request as the guard framed it (Qt < 6.8, where the guard parses requests itself).
struct GuardedRequest {
    QByteArray method;
    QByteArray target;  // as sent: origin form ("/v1/models?x") or absolute form
    QList<QPair<QByteArray, QByteArray>> headers;  // names in lower case, values trimmed
    QByteArray body;
    // HTTP/1.1: unless "Connection: close"; HTTP/1.0: only with "Connection: keep-alive".
    bool keepAlive = true;

    // The first header of that (lower-case) name; empty when absent.
    QByteArray value(const QByteArray& name) const;
};

using GuardedRequestHandler = std::function<void(QTcpSocket*, GuardedRequest)>;

class GuardedTcpServer;

class ConnectionGuard : public QObject {
    Q_OBJECT
public:
    // Becomes a child of `socket`; connect it before anything else reads the socket.
    ConnectionGuard(QTcpSocket* socket, const ConnectionLimits& limits, GuardedTcpServer* server);

    // Writes an error response (JSON error object; type server_error for 5xx, else
    // invalid_request_error) and closes the connection; nothing else reads from the socket
    // afterwards. A 503 carries "Retry-After: 1".
    static void reject(QTcpSocket* socket, int status, const QByteArray& message,
                       const QByteArray& code);

    // No request in progress: nothing of a request received, none waiting, no response being
    // written. Such a connection may be closed to make room for a new one.
    bool isIdle() const;
    // Closes an idle connection (GuardedTcpServer, at the connection cap).
    void drop();
    // The response to the request handed out last is complete (SocketHttpChannel): the next
    // request of the connection, if any, is read and handed out.
    void responseFinished();
    QString remote() const;
    qint64 bytesToWrite() const;

private:
    void onReadyRead();
    void onTimeout();
    // Once a second while a request arrives: refuses it (408) below the minimum data rate.
    void checkRate();
    // Reads and frames what the socket holds, unless a request is waiting for its turn.
    void readAvailable();
    // Hands the next complete request to the handler when none is in progress.
    void pump();
    // Follows the framing over new bytes; returns false after rejecting the connection.
    bool consume(const QByteArray& data);
    // 0 when the head (so far) is well-formed, else the status to refuse it with.
    int checkHead(bool complete);
    bool finishHead();
    // A request is complete: queued for its turn (Qt < 6.8), the timer re-armed.
    void completeRequest();
    void restartTimer();
    // Adds `n` bytes to the request being read (the minimum data rate's count).
    void countBytes(qint64 n);
    bool midRequest() const { return m_inBody || !m_head.isEmpty(); }
    bool responding() const;
    // Refuses the request being read: at once, or after the responses still owed on this
    // connection (then reading stops).
    void fail(int status, const QByteArray& message, const QByteArray& code);
    void rejectNow(int status, const QByteArray& message, const QByteArray& code);

    struct Pending {
        GuardedRequest request;
        int status = 0;  // not 0: answer this error instead, then close
        QByteArray message;
        QByteArray code;
    };

    QTcpSocket* m_socket;
    ConnectionLimits m_limits;
    QPointer<GuardedTcpServer> m_server;
    QString m_remote;  // the peer address (gone once the socket is closed)
    QTimer m_timer;
    bool m_readTimer = false;  // m_timer runs the read timeout (else the idle one)
    QTimer m_rateTimer;
    qint64 m_requestBytes = 0;   // bytes of the request being read, so far
    QElapsedTimer m_sinceGrace;  // runs from the moment the request passed kRateGraceBytes
    QByteArray m_head;
    qsizetype m_checked = 0;  // bytes of m_head whose complete lines were validated
    qint64 m_bodyLeft = 0;
    bool m_inBody = false;
    bool m_rejected = false;
    bool m_served = false;        // at least one request was complete on this connection
    GuardedRequest m_current;     // the request being read (Qt < 6.8)
    std::deque<Pending> m_ready;  // complete requests waiting for their turn (Qt < 6.8)
    bool m_inFlight = false;      // a handed-out request has no complete response yet
    bool m_stopReading = false;   // no further request is read (close after the owed ones)
    bool m_detached = false;      // Qt's parser was cut off the socket
};

// A QTcpServer that puts a ConnectionGuard on every connection and enforces the connection cap.
class GuardedTcpServer : public QTcpServer {
    Q_OBJECT
public:
    explicit GuardedTcpServer(const ConnectionLimits& limits, QObject* parent = nullptr);
    int openConnections() const { return static_cast<int>(m_guards.size()); }
    // Bytes the open connections still have to send (graceful shutdown waits for them).
    qint64 bytesToWrite() const;
    const ConnectionLimits& limits() const { return m_limits; }

    // Qt < 6.8: the requests the guards parse go to `handler`; `qtServer` is the
    // QAbstractHttpServer bound to this server, whose parser the guards cut off the sockets.
    void setRequestHandler(QObject* qtServer, GuardedRequestHandler handler);
    QObject* qtServer() const { return m_qtServer; }
    const GuardedRequestHandler& handler() const { return m_handler; }

signals:
    // The guard answered a request itself with an error status (400, 405, 408, 411, 413, 431,
    // or 503 at the connection cap or the per-address limit) and closed the connection.
    void connectionRejected(const QString& remote, int status, const QByteArray& message);
    // A connection without a request in progress was closed: reason "evicted" (to make room at
    // the cap or the per-address limit), "idle_timeout" (keep-alive idle too long) or
    // "no_request" (nothing sent within the read timeout of being accepted).
    void connectionDropped(const QString& remote, const QByteArray& reason,
                           const QByteArray& detail);

protected:
    void incomingConnection(qintptr socketDescriptor) override;

private:
    ConnectionLimits m_limits;
    QList<ConnectionGuard*> m_guards;  // open connections, oldest first
    QObject* m_qtServer = nullptr;
    GuardedRequestHandler m_handler;
};

}  // namespace neural::server
