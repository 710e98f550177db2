// MCP over Streamable HTTP (protocol revisions 2025-03-26 and later): every message is POSTed to
// the server's one endpoint; a request is answered either by a JSON body or by an SSE stream that
// carries the answer (and progress notifications before it). The Mcp-Session-Id the server
// assigns in its answer to initialize is sent back with every later request, and an optional GET
// stream carries the server's own notifications (tools/list_changed).
#pragma once

#include <QHash>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QPointer>
#include <QStringList>

#include <memory>

#include "mcpserverconfig.h"
#include "mcptransport.h"

namespace neural::toolhost {

class McpHttpTransport : public McpTransport {
    Q_OBJECT
public:
    static constexpr qint64 kMaxMessageBytes = 64ll * 1024 * 1024;

    explicit McpHttpTransport(const McpServerConfig& config, QObject* parent = nullptr);
    ~McpHttpTransport() override;

    void open() override;
    void send(const QByteArray& message, qint64 requestId) override;
    void abandon(qint64 requestId) override;
    void close() override;
    void setProtocolVersion(const QString& version) override;
    QString diagnostics() const override;

    QString sessionId() const { return sessionId_; }

private:
    // One POST (or the GET stream) in flight.
    struct Exchange {
        qint64 requestId = -1;  // -1: a notification, an answer of ours, or the GET stream
        bool stream = false;    // the answer is text/event-stream
        bool listen = false;    // the GET stream
        QByteArray buffer;      // JSON body so far, or unparsed SSE text
        QByteArray eventData;   // the SSE event being assembled
        QString eventType;
    };

    QNetworkRequest makeRequest() const;
    void track(QNetworkReply* reply, qint64 requestId, bool listen);
    void onReadyRead(QNetworkReply* reply);
    void onFinished(QNetworkReply* reply);
    void parseSse(Exchange& ex, bool atEnd);
    void openListenStream();
    void note(const QString& line);
    void post(const QByteArray& message, qint64 requestId);
    void release(QNetworkReply* notification);

    McpServerConfig config_;
    QNetworkAccessManager* manager_ = nullptr;
    // Shared: parsing an SSE stream emits messages, whose receivers may send (inserting here) or
    // abandon (removing here) while the exchange is still being read.
    QHash<QNetworkReply*, std::shared_ptr<Exchange>> exchanges_;
    QString sessionId_;
    QString protocolVersion_;
    QStringList recent_;
    int listenRetries_ = 0;
    // Notifications (and our answers) are POSTed one at a time, and later messages wait until
    // the server accepted them: over parallel connections a request could otherwise overtake
    // the notifications/initialized sent before it.
    int notificationsInFlight_ = 0;
    bool listenWanted_ = false;
    QList<std::pair<QByteArray, qint64>> queued_;
    bool closed_ = false;
};

}  // namespace neural::toolhost
