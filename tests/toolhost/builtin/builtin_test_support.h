// Shared pieces of the built-in tool tests: a Qt event loop, running one call to its end, and a
// small HTTP/1.1 server on 127.0.0.1 that serves routes the test declares.
#pragma once

#include <QByteArray>
#include <QElapsedTimer>
#include <QHash>
#include <QString>
#include <QTcpServer>

#include <functional>
#include <memory>

#include "tool.h"

namespace neural::toolhost::test {

// Creates the QCoreApplication once per test program.
void ensureApp();

// Runs the event loop until `done` or `timeoutMs`; true when done.
bool spinUntil(const std::function<bool()>& done, int timeoutMs = 60'000);
void spinFor(int ms);

// Starts `tool` on `provider` and waits for its outcome; `during` (if set) runs right after the
// call started, with the call. `elapsedMs` (if set) gets the time to the outcome.
ToolOutcome runCall(ToolProvider& provider, const QString& tool, const QString& arguments,
                    const CallLimits& limits = {},
                    const std::function<void(ToolCall*)>& during = {}, qint64* elapsedMs = nullptr);

// True when this Windows program runs under Wine.
bool underWine();

// One answer of the test server.
struct HttpAnswer {
    int status = 200;
    QByteArray reason = "OK";
    QByteArray contentType = "text/html; charset=utf-8";
    QByteArray body;
    QByteArray location;  // a redirect's target
    int delayMs = 0;      // the answer comes this late
};

class HttpServer {
public:
    using Handler = std::function<HttpAnswer(const QByteArray& pathAndQuery)>;
    HttpServer();
    ~HttpServer();
    // `path` without the query; the handler gets the path with its query.
    void route(const QByteArray& path, Handler handler);
    quint16 port() const { return m_server.serverPort(); }
    QString url(const QString& path) const;
    int requests() const { return m_requests; }
    QByteArray lastRequest() const { return m_lastRequest; }

private:
    QTcpServer m_server;
    QHash<QByteArray, Handler> m_routes;
    int m_requests = 0;
    QByteArray m_lastRequest;
};

// A fixture page from pages/ (compiled-in resources).
QByteArray fixturePage(const QString& name);

}  // namespace neural::toolhost::test
