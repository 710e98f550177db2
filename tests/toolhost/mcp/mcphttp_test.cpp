// The Streamable HTTP transport (toolhost/mcp/mcphttptransport.h) against a scripted server on
// loopback: JSON and SSE answers (split across writes, CRLF lines, comments, multi-line data),
// the session and protocol headers, HTTP errors with their body, a stream that ends without an
// answer, and an expired session. server-everything's HTTP mode is the real-server check
// (npm_servers_test.cpp); this one also runs under Wine.
#include <gtest/gtest.h>

#include <QMap>
#include <QTcpServer>
#include <QTcpSocket>
#include <QTimer>

#include <functional>

#include "mcp_test_support.h"
#include "mcpprovider.h"

namespace neural::toolhost {
namespace {

using test::runCall;
using test::spin;
using test::startAndWait;
using test::startCall;
using Status = ToolOutcome::Status;

struct Request {
    QByteArray verb;
    QMap<QByteArray, QByteArray> headers;  // lower-case names
    Json body;
};

// One response: written in `parts` (a pause between them), then the connection closes.
struct Response {
    QList<QByteArray> parts;
};

Response http(int status, const QByteArray& reason, const QByteArray& type, const QByteArray& body,
              const QByteArray& extra = {}) {
    QByteArray head = "HTTP/1.1 " + QByteArray::number(status) + ' ' + reason + "\r\n";
    if (!type.isEmpty()) head += "Content-Type: " + type + "\r\n";
    head += extra;
    head += "Content-Length: " + QByteArray::number(body.size()) + "\r\nConnection: close\r\n\r\n";
    return {{head + body}};
}

Response sse(QList<QByteArray> parts) {
    parts.prepend(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        "Connection: close\r\n\r\n");
    return {parts};
}

QByteArray answer(const Json& id, Json result) {
    return QByteArray::fromStdString(
        Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", result}}.dump());
}

class ScriptedServer : public QObject {
public:
    std::function<Response(const Request&)> respond;
    QList<Request> seen;

    ScriptedServer() {
        server_.listen(QHostAddress::LocalHost, 0);
        connect(&server_, &QTcpServer::newConnection, this, [this] {
            while (QTcpSocket* s = server_.nextPendingConnection()) {
                connect(s, &QTcpSocket::readyRead, this, [this, s] { read(s); });
                connect(s, &QTcpSocket::disconnected, s, &QObject::deleteLater);
            }
        });
    }
    QUrl url() const {
        return QUrl(QStringLiteral("http://127.0.0.1:%1/mcp").arg(server_.serverPort()));
    }

private:
    void read(QTcpSocket* s) {
        QByteArray& buf = buffers_[s];
        buf += s->readAll();
        const qsizetype end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        Request r;
        const QList<QByteArray> lines = buf.left(end).split('\n');
        r.verb = lines[0].split(' ')[0];
        for (qsizetype i = 1; i < lines.size(); ++i) {
            const qsizetype colon = lines[i].indexOf(':');
            if (colon > 0)
                r.headers[lines[i].left(colon).trimmed().toLower()] =
                    lines[i].mid(colon + 1).trimmed();
        }
        const qsizetype length = r.headers.value("content-length", "0").toLongLong();
        if (buf.size() < end + 4 + length) return;
        const QByteArray body = buf.mid(end + 4, length);
        buffers_.remove(s);
        r.body = Json::parse(body.toStdString(), nullptr, false);
        seen << r;
        const Response response = respond(r);
        writeParts(s, response.parts, 0);
    }
    void writeParts(QTcpSocket* s, QList<QByteArray> parts, int i) {
        if (i >= parts.size()) {
            s->disconnectFromHost();
            return;
        }
        s->write(parts[i]);
        s->flush();
        QPointer<QTcpSocket> guard(s);
        QTimer::singleShot(30, this, [this, guard, parts, i] {
            if (guard) writeParts(guard, parts, i + 1);
        });
    }

    QTcpServer server_;
    QHash<QTcpSocket*, QByteArray> buffers_;
};

// The MCP side of the script: answers by method and tool name.
Response mcp(const Request& r) {
    if (r.verb == "GET") return http(405, "Method Not Allowed", {}, {});
    if (r.verb == "DELETE") return http(200, "OK", {}, {});
    const std::string method = r.body.value("method", "");
    const Json id = r.body.contains("id") ? r.body["id"] : Json();
    if (method == "initialize") {
        return http(200, "OK", "application/json",
                    answer(id, {{"protocolVersion", "2025-03-26"},
                                {"capabilities", {{"tools", Json::object()}}},
                                {"serverInfo", {{"name", "scripted"}, {"version", "1"}}}}),
                    "Mcp-Session-Id: sess-1\r\n");
    }
    if (!r.body.contains("id")) return http(202, "Accepted", {}, {});
    if (method == "tools/list") {
        const QByteArray tools =
            R"({"jsonrpc":"2.0","id":)" + QByteArray::number(id.get<qint64>()) +
            R"(,"result":{"tools":[{"name":"ok","inputSchema":{"type":"object"}},{"name":"json"},)"
            R"({"name":"boom"},{"name":"silent"},{"name":"expire"}]}})";
        // A comment, then the answer split across two data lines (joined by a newline, which
        // JSON takes as white space) and two writes.
        const qsizetype cut = tools.indexOf(",\"result\"");
        return sse({": keep-alive\r\n\r\nevent: message\r\ndata: " + tools.left(cut),
                    "\r\ndata: " + tools.mid(cut) + "\r\n\r\n"});
    }
    const std::string tool = r.body["params"].value("name", "");
    const Json token = r.body["params"]["_meta"]["progressToken"];
    if (tool == "ok") {
        const QByteArray progress = QByteArray::fromStdString(
            Json{{"jsonrpc", "2.0"},
                 {"method", "notifications/progress"},
                 {"params", {{"progressToken", token}, {"progress", 1}, {"total", 2}}}}
                .dump());
        return sse(
            {"data: " + progress + "\n\n",
             "data: " + answer(id, {{"content", {{{"type", "text"}, {"text", "streamed"}}}}}) +
                 "\n\n"});
    }
    if (tool == "json")
        return http(200, "OK", "application/json; charset=utf-8",
                    answer(id, {{"content", {{{"type", "text"}, {"text", "plain json"}}}}}));
    if (tool == "boom") return http(500, "Internal Server Error", "text/plain", "something broke");
    if (tool == "silent") return sse({": nothing to say\n\n"});
    return http(404, "Not Found", "text/plain", "no such session");
}

TEST(McpHttp, JsonAndSseAnswersWithTheSessionHeaders) {
    ScriptedServer server;
    server.respond = mcp;
    McpServerConfig c;
    c.name = QStringLiteral("scripted");
    c.transport = McpServerConfig::Transport::http;
    c.url = server.url();
    c.headers.insert(QStringLiteral("X-Api-Key"), QStringLiteral("k"));
    McpProvider p(c);
    ASSERT_TRUE(startAndWait(p)) << p.problem().toStdString();
    EXPECT_EQ(p.protocolVersion(), QStringLiteral("2025-03-26"));
    EXPECT_EQ(p.toolNames(), (QStringList{"ok", "json", "boom", "silent", "expire"}));

    auto ok = startCall(p, QStringLiteral("ok"), QStringLiteral("{}"));
    ASSERT_TRUE(spin([&] { return ok->outcome.has_value(); }));
    EXPECT_EQ(ok->outcome->status, Status::ok);
    EXPECT_EQ(ok->outcome->text, QStringLiteral("streamed"));
    ASSERT_EQ(ok->progress.size(), 1);
    EXPECT_DOUBLE_EQ(ok->progress[0].first, 0.5);

    EXPECT_EQ(runCall(p, QStringLiteral("json"), QString()).text, QStringLiteral("plain json"));

    ToolOutcome boom = runCall(p, QStringLiteral("boom"), QString());
    EXPECT_EQ(boom.status, Status::failed);
    EXPECT_EQ(boom.text,
              QStringLiteral("The call failed: HTTP 500 Internal Server Error: something broke."));

    ToolOutcome silent = runCall(p, QStringLiteral("silent"), QString());
    EXPECT_EQ(silent.status, Status::failed);
    EXPECT_EQ(
        silent.text,
        QStringLiteral("The call failed: the server closed the event stream without an answer."));
    EXPECT_TRUE(p.ready());

    // The headers: the session and revision after initialize, the configured ones always.
    ASSERT_GE(server.seen.size(), 5);
    const Request& init = server.seen[0];
    EXPECT_EQ(init.body.value("method", ""), "initialize");
    EXPECT_FALSE(init.headers.contains("mcp-session-id"));
    EXPECT_EQ(init.headers.value("accept"), QByteArray("application/json, text/event-stream"));
    EXPECT_EQ(init.headers.value("content-type"), QByteArray("application/json"));
    for (const Request& r : server.seen) {
        EXPECT_EQ(r.headers.value("x-api-key"), QByteArray("k"));
        if (&r == &init) continue;
        EXPECT_EQ(r.headers.value("mcp-session-id"), QByteArray("sess-1")) << r.verb.toStdString();
        EXPECT_EQ(r.headers.value("mcp-protocol-version"), QByteArray("2025-03-26"));
    }
    // notifications/initialized went out first, the GET stream and tools/list after it.
    EXPECT_EQ(server.seen[1].body.value("method", ""), "notifications/initialized");

    // 404 with a session: the session is gone; the provider says so and can start again.
    ToolOutcome expired = runCall(p, QStringLiteral("expire"), QString());
    EXPECT_EQ(expired.status, Status::failed);
    EXPECT_FALSE(p.ready());
    EXPECT_TRUE(
        p.problem().startsWith(QStringLiteral("the server ended the MCP session (HTTP 404)")))
        << p.problem().toStdString();
    ASSERT_TRUE(startAndWait(p)) << p.problem().toStdString();
    EXPECT_EQ(runCall(p, QStringLiteral("json"), QString()).text, QStringLiteral("plain json"));
}

}  // namespace
}  // namespace neural::toolhost
