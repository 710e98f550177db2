// The JSON-RPC framing (toolhost/mcp/jsonrpc.h) on the messages of the MCP specification
// (revision 2025-06-18: lifecycle, tools, progress, cancellation, ping), malformed input, and
// the reading of tools/call results (mcpResultText).
#include <gtest/gtest.h>

#include <QList>

#include <string>

#include "jsonrpc.h"
#include "mcp_test_support.h"
#include "mcpprovider.h"

namespace neural::toolhost {
namespace {

// A connection whose output and events are recorded.
struct Wire {
    JsonRpcConnection rpc;
    QList<std::pair<Json, qint64>> sent;
    QList<std::pair<QString, Json>> notifications;
    QStringList errors;
    Wire() {
        QObject::connect(&rpc, &JsonRpcConnection::outgoing,
                         [this](const QByteArray& m, qint64 id) {
                             sent.append({Json::parse(m.toStdString()), id});
                         });
        QObject::connect(&rpc, &JsonRpcConnection::notificationReceived,
                         [this](const QString& method, const Json& params) {
                             notifications.append({method, params});
                         });
        QObject::connect(&rpc, &JsonRpcConnection::protocolError,
                         [this](const QString& e) { errors << e; });
    }
    void receive(const char* text) { rpc.receive(QByteArray(text)); }
};

TEST(JsonRpc, AnInitializeRequestIsFramedAsTheSpecShowsIt) {
    Wire w;
    const qint64 id =
        w.rpc.request(QStringLiteral("initialize"),
                      Json::parse(R"({"protocolVersion":"2025-06-18","capabilities":{},
                        "clientInfo":{"name":"ExampleClient","version":"1.0.0"}})"),
                      [](const JsonRpcReply&) {});
    ASSERT_EQ(w.sent.size(), 1);
    const Json& m = w.sent[0].first;
    EXPECT_EQ(w.sent[0].second, id);
    EXPECT_EQ(m["jsonrpc"], "2.0");
    EXPECT_EQ(m["id"], id);
    EXPECT_EQ(m["method"], "initialize");
    EXPECT_EQ(m["params"]["protocolVersion"], "2025-06-18");
    EXPECT_EQ(m["params"]["clientInfo"]["name"], "ExampleClient");
    // Ids are unique per connection.
    const qint64 second = w.rpc.request(QStringLiteral("tools/list"), nullptr, {});
    EXPECT_NE(second, id);
    EXPECT_FALSE(w.sent[1].first.contains("params"));
}

TEST(JsonRpc, TheInitializeResponseOfTheSpecAnswersItsRequest) {
    Wire w;
    std::optional<JsonRpcReply> reply;
    w.rpc.request(QStringLiteral("initialize"), Json::object(),
                  [&](const JsonRpcReply& r) { reply = r; });
    w.receive(R"({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18",
      "capabilities":{"logging":{},"prompts":{"listChanged":true},
      "resources":{"subscribe":true,"listChanged":true},"tools":{"listChanged":true}},
      "serverInfo":{"name":"ExampleServer","title":"Example Server Display Name","version":"1.0.0"},
      "instructions":"Optional instructions for the client"}})");
    ASSERT_TRUE(reply.has_value());
    EXPECT_TRUE(reply->ok());
    EXPECT_EQ(reply->result["protocolVersion"], "2025-06-18");
    EXPECT_EQ(reply->result["serverInfo"]["name"], "ExampleServer");
    EXPECT_TRUE(w.errors.isEmpty());
    EXPECT_EQ(w.rpc.waitingCount(), 0);
}

TEST(JsonRpc, AToolsListPageKeepsTheSchemaKeyOrderAndItsCursor) {
    Wire w;
    std::optional<JsonRpcReply> reply;
    w.rpc.request(QStringLiteral("tools/list"), Json::object(),
                  [&](const JsonRpcReply& r) { reply = r; });
    w.receive(R"({"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"get_weather",
      "title":"Weather Information Provider",
      "description":"Get current weather information for a location",
      "inputSchema":{"type":"object","properties":{"location":{"type":"string",
      "description":"City name or zip code"}},"required":["location"]}}],
      "nextCursor":"next-page-cursor"}})");
    ASSERT_TRUE(reply.has_value() && reply->ok());
    const Json& schema = reply->result["tools"][0]["inputSchema"];
    std::vector<std::string> keys;
    for (const auto& [k, v] : schema.items()) keys.push_back(k);
    EXPECT_EQ(keys, (std::vector<std::string>{"type", "properties", "required"}));
    EXPECT_EQ(reply->result["nextCursor"], "next-page-cursor");
}

TEST(JsonRpc, AnErrorResponseCarriesItsCodeAndMessage) {
    Wire w;
    std::optional<JsonRpcReply> reply;
    w.rpc.request(QStringLiteral("tools/call"), Json::object(),
                  [&](const JsonRpcReply& r) { reply = r; });
    w.receive(
        R"({"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Unknown tool: invalid_tool_name"}})");
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->kind, JsonRpcReply::Kind::error);
    EXPECT_EQ(reply->errorCode, -32602);
    EXPECT_EQ(reply->errorMessage, QStringLiteral("Unknown tool: invalid_tool_name"));
    EXPECT_EQ(reply->describe(), QStringLiteral("error -32602: Unknown tool: invalid_tool_name"));
}

TEST(JsonRpc, ProgressAndCancelledNotificationsAreRouted) {
    Wire w;
    w.receive(
        R"({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"abc123",
      "progress":50,"total":100,"message":"Reticulating splines..."}})");
    w.receive(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"123",
      "reason":"User requested cancellation"}})");
    ASSERT_EQ(w.notifications.size(), 2);
    EXPECT_EQ(w.notifications[0].first, QStringLiteral("notifications/progress"));
    EXPECT_EQ(w.notifications[0].second["progress"], 50);
    EXPECT_EQ(w.notifications[1].first, QStringLiteral("notifications/cancelled"));
    EXPECT_EQ(w.notifications[1].second["reason"], "User requested cancellation");
    EXPECT_TRUE(w.sent.isEmpty()) << "notifications are never answered";
}

TEST(JsonRpc, APingFromTheServerIsAnsweredWithAnEmptyResult) {
    Wire w;
    w.receive(R"({"jsonrpc":"2.0","id":"123","method":"ping"})");
    ASSERT_EQ(w.sent.size(), 1);
    EXPECT_EQ(w.sent[0].first, Json::parse(R"({"jsonrpc":"2.0","id":"123","result":{}})"));
    EXPECT_EQ(w.sent[0].second, -1);
}

TEST(JsonRpc, UnknownServerRequestsGetMethodNotFound) {
    Wire w;
    w.receive(R"({"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{}})");
    w.receive(R"({"jsonrpc":"2.0","id":"r","method":"roots/list"})");
    ASSERT_EQ(w.sent.size(), 2);
    EXPECT_EQ(w.sent[0].first["id"], 7);
    EXPECT_EQ(w.sent[0].first["error"]["code"], -32601);
    EXPECT_EQ(w.sent[1].first["id"], "r");
    EXPECT_EQ(w.sent[1].first["error"]["code"], -32601);
}

TEST(JsonRpc, ABatchIsTakenApart) {
    Wire w;
    std::optional<JsonRpcReply> reply;
    w.rpc.request(QStringLiteral("tools/list"), Json::object(),
                  [&](const JsonRpcReply& r) { reply = r; });
    w.receive(R"([{"jsonrpc":"2.0","method":"notifications/tools/list_changed"},
                  {"jsonrpc":"2.0","id":1,"result":{"tools":[]}}])");
    EXPECT_TRUE(reply.has_value() && reply->ok());
    ASSERT_EQ(w.notifications.size(), 1);
}

TEST(JsonRpc, MalformedInputIsReportedAndSkipped) {
    Wire w;
    std::optional<JsonRpcReply> reply;
    w.rpc.request(QStringLiteral("tools/call"), Json::object(),
                  [&](const JsonRpcReply& r) { reply = r; });
    w.receive("this is not JSON");
    w.receive("[1, 2]");
    w.receive(R"({"id":1,"result":{}})");                   // no "jsonrpc"
    w.receive(R"({"jsonrpc":"2.0","id":99,"result":{}})");  // no such request
    w.receive(R"({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}})");
    w.receive(R"({"jsonrpc":"2.0"})");
    w.receive(R"({"jsonrpc":"2.0","method":42})");
    w.receive("[]");
    EXPECT_FALSE(reply.has_value()) << "the request still waits";
    EXPECT_EQ(w.errors.size(), 9);
    EXPECT_TRUE(w.errors[0].startsWith(QStringLiteral("not JSON: this is not JSON")))
        << w.errors[0].toStdString();
    EXPECT_TRUE(w.errors.join('\n').contains(QStringLiteral("Parse error")));
    // An answer with both result and error fails its request with a clear message.
    w.receive(R"({"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}})");
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->kind, JsonRpcReply::Kind::failure);
    EXPECT_TRUE(reply->errorMessage.startsWith(QStringLiteral("malformed JSON-RPC answer")));
}

TEST(JsonRpc, AnErrorWithoutAnIntegerCodeIsMalformed) {
    Wire w;
    std::optional<JsonRpcReply> reply;
    w.rpc.request(QStringLiteral("x"), nullptr, [&](const JsonRpcReply& r) { reply = r; });
    w.receive(R"({"jsonrpc":"2.0","id":1,"error":{"code":"bad","message":"x"}})");
    ASSERT_TRUE(reply.has_value());
    EXPECT_EQ(reply->kind, JsonRpcReply::Kind::failure);
}

TEST(JsonRpc, DeeplyNestedInputDoesNotCrash) {
    Wire w;
    const QByteArray deep = QByteArray(200000, '[') + QByteArray(200000, ']');
    w.rpc.receive(deep);
    const QByteArray open = QByteArray(200000, '[');  // unterminated
    w.rpc.receive(open);
    EXPECT_EQ(w.errors.size(), 2);
}

TEST(JsonRpc, FailForgetAndFailAllEndWaitingRequests) {
    Wire w;
    QStringList got;
    const qint64 a = w.rpc.request(QStringLiteral("a"), nullptr, [&](const JsonRpcReply& r) {
        got << QStringLiteral("a:") + r.errorMessage;
    });
    const qint64 b = w.rpc.request(QStringLiteral("b"), nullptr, [&](const JsonRpcReply& r) {
        got << QStringLiteral("b:") + r.errorMessage;
    });
    w.rpc.request(QStringLiteral("c"), nullptr,
                  [&](const JsonRpcReply& r) { got << QStringLiteral("c:") + r.errorMessage; });
    w.rpc.fail(a, QStringLiteral("HTTP 500"));
    w.rpc.fail(a, QStringLiteral("again"));  // already answered: nothing
    EXPECT_TRUE(w.rpc.forget(b));
    EXPECT_FALSE(w.rpc.waiting(b));
    w.rpc.failAll(QStringLiteral("gone"));
    EXPECT_EQ(got, (QStringList{QStringLiteral("a:HTTP 500"), QStringLiteral("c:gone")}));
    // A late answer to the forgotten request is only noted.
    w.receive(R"({"jsonrpc":"2.0","id":2,"result":{}})");
    EXPECT_EQ(w.errors.size(), 1);
}

TEST(JsonRpc, NotificationsHaveNoId) {
    Wire w;
    w.rpc.notify(QStringLiteral("notifications/initialized"), nullptr);
    w.rpc.notify(QStringLiteral("notifications/cancelled"),
                 Json{{"requestId", 3}, {"reason", "User requested cancellation"}});
    ASSERT_EQ(w.sent.size(), 2);
    EXPECT_EQ(w.sent[0].first,
              Json::parse(R"({"jsonrpc":"2.0","method":"notifications/initialized"})"));
    EXPECT_EQ(w.sent[1].first["params"]["requestId"], 3);
    EXPECT_EQ(w.sent[1].second, -1);
}

// ---- tools/call results --------------------------------------------------------------------

TEST(McpResult, TheSpecsErrorResultIsAToolError) {
    QString text, error;
    bool isError = false;
    ASSERT_TRUE(mcpResultText(Json::parse(R"({"content":[{"type":"text",
        "text":"Failed to fetch weather data: API rate limit exceeded"}],"isError":true})"),
                              &text, &isError, &error));
    EXPECT_TRUE(isError);
    EXPECT_EQ(text, QStringLiteral("Failed to fetch weather data: API rate limit exceeded"));
}

TEST(McpResult, TextIsJoinedAndOtherContentIsDescribed) {
    QString text, error;
    bool isError = true;
    ASSERT_TRUE(mcpResultText(Json::parse(R"({"content":[
        {"type":"text","text":"first"},
        {"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"},
        {"type":"audio","data":"AAAA","mimeType":"audio/wav"},
        {"type":"resource","resource":{"uri":"file:///a.txt","mimeType":"text/plain","text":"inside"}},
        {"type":"resource","resource":{"uri":"file:///b.bin","blob":"AAAA"}},
        {"type":"resource_link","uri":"file:///c.txt","name":"c.txt"},
        {"type":"hologram"}]})"),
                              &text, &isError, &error));
    EXPECT_FALSE(isError);
    EXPECT_EQ(text, QStringLiteral(
                        "first\n[image: image/png, 8 bytes]\n[audio: audio/wav, 3 bytes]\n"
                        "[resource: file:///a.txt, text/plain]\ninside\n"
                        "[resource: file:///b.bin, 3 bytes]\n"
                        "[resource link: c.txt <file:///c.txt>]\n[hologram content, not shown]"));
}

TEST(McpResult, StructuredContentStandsInForMissingContent) {
    QString text, error;
    bool isError = false;
    ASSERT_TRUE(mcpResultText(Json::parse(R"({"structuredContent":{"temperature":22.5}})"), &text,
                              &isError, &error));
    EXPECT_EQ(text, QStringLiteral(R"({"temperature":22.5})"));
}

TEST(McpResult, MalformedResultsAreRefusedWithAReason) {
    const char* bad[] = {R"("nonsense")",
                         R"({"content":"text"})",
                         R"({})",
                         R"({"content":[{"type":"text"}]})",
                         R"({"content":[{"text":"x"}]})",
                         R"({"content":[],"isError":"yes"})",
                         R"({"content":[{"type":"resource"}]})"};
    for (const char* b : bad) {
        QString text, error;
        bool isError = false;
        EXPECT_FALSE(mcpResultText(Json::parse(b), &text, &isError, &error)) << b;
        EXPECT_FALSE(error.isEmpty()) << b;
    }
}

}  // namespace
}  // namespace neural::toolhost
