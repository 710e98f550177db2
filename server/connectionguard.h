// Limits enforced on raw connections before Qt HttpServer parses anything. Qt buffers a whole
// request in memory with no size limit, and Qt 6.4 reacts to a parse error by disconnecting
// every signal of the socket (leaking it) instead of answering. So each accepted socket gets a
// ConnectionGuard whose readyRead slot runs before Qt's: it follows the request framing (head,
// then Content-Length bytes of body), answers oversized, malformed, chunked, pipelined or too
// slow requests itself with an OpenAI-style error and closes the connection, and closes idle
// keep-alive connections. Only requests that pass reach Qt's parser.
#pragma once

#include <QByteArray>
#include <QTcpServer>
#include <QTimer>

class QTcpSocket;

namespace neural::server {

struct ConnectionLimits {
    qint64 maxHeaderBytes = 32 * 1024;        // request line + headers
    qint64 maxBodyBytes = 8 * 1024 * 1024;    // Content-Length
    int maxConnections = 256;                 // open connections at once
    int readTimeoutMs = 30'000;               // a started request must arrive within this
    int idleTimeoutMs = 120'000;              // an idle keep-alive connection is closed after
};

class ConnectionGuard : public QObject {
    Q_OBJECT
public:
    // Becomes a child of `socket`; connect it before anything else reads the socket.
    ConnectionGuard(QTcpSocket *socket, const ConnectionLimits &limits);

    // Writes an error response (JSON error object) and closes the connection; nothing else
    // reads from the socket afterwards.
    static void reject(QTcpSocket *socket, int status, const QByteArray &message,
                       const QByteArray &code);

private:
    void onReadyRead();
    void onTimeout();
    // Follows the framing over new bytes; returns false after rejecting the connection.
    bool consume(const QByteArray &data);
    // 0 when the head (so far) is well-formed, else the status to refuse it with.
    int checkHead(bool complete);
    bool finishHead();
    void restartTimer();

    QTcpSocket *m_socket;
    ConnectionLimits m_limits;
    QTimer m_timer;
    QByteArray m_head;
    qsizetype m_checked = 0;      // bytes of m_head whose complete lines were validated
    qint64 m_bodyLeft = 0;
    bool m_inBody = false;
    bool m_rejected = false;
};

// A QTcpServer that puts a ConnectionGuard on every connection and refuses connections beyond
// the limit with 503.
class GuardedTcpServer : public QTcpServer {
    Q_OBJECT
public:
    explicit GuardedTcpServer(const ConnectionLimits &limits, QObject *parent = nullptr);
    int openConnections() const { return m_open; }

protected:
    void incomingConnection(qintptr socketDescriptor) override;

private:
    ConnectionLimits m_limits;
    int m_open = 0;
};

}  // namespace neural::server
