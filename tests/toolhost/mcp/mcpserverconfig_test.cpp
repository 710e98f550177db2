// The mcpServers file format of Claude Desktop, LM Studio and Jan (toolhost/mcp/mcpserverconfig.h):
// reading, clear errors, writing back, and the namespace a server's name becomes.
#include <gtest/gtest.h>

#include <QJsonDocument>

#include <algorithm>

#include "mcpserverconfig.h"

namespace neural::toolhost {
namespace {

using Transport = McpServerConfig::Transport;

QList<McpServerConfig> parse(const char* json, QString* error = nullptr) {
    QString e;
    auto servers = parseMcpServersJson(QByteArray(json), &e);
    if (error) *error = e;
    return servers;
}

TEST(McpServerConfig, ReadsClaudeDesktopsFile) {
    QString error;
    const auto servers = parse(R"({
      "mcpServers": {
        "filesystem": {
          "command": "npx",
          "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
          "env": {"DEBUG": "1"},
          "cwd": "/tmp"
        },
        "everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"]},
        "remote": {"type": "http", "url": "https://example.com/mcp",
                   "headers": {"Authorization": "Bearer x"}, "disabled": true}
      }
    })",
                               &error);
    ASSERT_EQ(servers.size(), 3) << error.toStdString();
    EXPECT_EQ(servers[0].name, QStringLiteral("filesystem"));  // file order
    EXPECT_EQ(servers[0].transport, Transport::stdio);
    EXPECT_EQ(servers[0].command, QStringLiteral("npx"));
    EXPECT_EQ(servers[0].args.size(), 3);
    EXPECT_EQ(servers[0].args[2], QStringLiteral("/Users/me/Desktop"));
    EXPECT_EQ(servers[0].env.value(QStringLiteral("DEBUG")), QStringLiteral("1"));
    EXPECT_EQ(servers[0].workingDirectory, QStringLiteral("/tmp"));
    EXPECT_TRUE(servers[0].enabled);
    EXPECT_EQ(servers[1].name, QStringLiteral("everything"));
    EXPECT_EQ(servers[2].transport, Transport::http);
    EXPECT_EQ(servers[2].url, QUrl(QStringLiteral("https://example.com/mcp")));
    EXPECT_EQ(servers[2].headers.value(QStringLiteral("Authorization")),
              QStringLiteral("Bearer x"));
    EXPECT_FALSE(servers[2].enabled);
}

TEST(McpServerConfig, AcceptsTheBareInnerObjectAndStreamableHttp) {
    QString error;
    const auto servers = parse(R"({"a": {"url": "http://127.0.0.1:3001/mcp"},
                                   "b": {"type": "streamable-http", "url": "http://localhost/mcp"}})",
                               &error);
    ASSERT_EQ(servers.size(), 2) << error.toStdString();
    EXPECT_EQ(servers[0].transport, Transport::http);
    EXPECT_EQ(servers[1].transport, Transport::http);
}

TEST(McpServerConfig, ErrorsNameTheServerAndTheField) {
    const struct {
        const char* json;
        const char* message;
    } cases[] = {
        {R"({"mcpServers": {"x": {"command": "npx",)", "not valid JSON: parse error at line 1"},
        {R"([1])", "expected a JSON object"},
        {R"({"mcpServers": []})", "\"mcpServers\" must be an object"},
        {R"({"mcpServers": {"fs": "npx"}})", "server \"fs\": must be an object, not string"},
        {R"({"mcpServers": {"fs": {}}})",
         "server \"fs\": needs a \"command\" (stdio) or a \"url\""},
        {R"({"mcpServers": {"fs": {"command": 5}}})",
         "server \"fs\": \"command\" must be a string, not number"},
        {R"({"mcpServers": {"fs": {"command": "npx", "args": "-y"}}})",
         "server \"fs\": \"args\" must be an array of strings, not string"},
        {R"({"mcpServers": {"fs": {"command": "npx", "args": ["-y", 3]}}})",
         "server \"fs\": \"args\"[1] must be a string, not number"},
        {R"({"mcpServers": {"fs": {"command": "npx", "env": {"A": 1}}}})",
         "server \"fs\": \"env\".\"A\" must be a string, not number"},
        {R"({"mcpServers": {"web": {"url": "ftp://x/y"}}})",
         "server \"web\": \"url\" is not an http(s) URL"},
        {R"({"mcpServers": {"web": {"type": "http"}}})",
         "server \"web\": an HTTP server needs a \"url\""},
        {R"({"mcpServers": {"web": {"type": "sse", "url": "http://x/sse"}}})",
         "server \"web\": the \"sse\" transport"},
        {R"({"mcpServers": {"web": {"url": "http://x/", "headers": []}}})",
         "server \"web\": \"headers\" must be an object of strings"},
        {R"({"mcpServers": {"both": {"url": "http://x/", "command": "npx"}}})",
         "server \"both\": has both \"command\" and \"url\""},
        {R"({"mcpServers": {"": {"command": "npx"}}})", "a server has an empty name"},
    };
    for (const auto& c : cases) {
        QString error;
        EXPECT_TRUE(parse(c.json, &error).isEmpty()) << c.json;
        EXPECT_TRUE(error.startsWith(QString::fromUtf8(c.message)))
            << c.json << "\n  got: " << error.toStdString();
    }
}

TEST(McpServerConfig, WritesTheSameFormatBack) {
    McpServerConfig a;
    a.name = QStringLiteral("filesystem");
    a.command = QStringLiteral("npx");
    a.args = {QStringLiteral("-y"), QStringLiteral("pkg"), QStringLiteral("C:\\Users\\me")};
    a.env = {{QStringLiteral("K"), QStringLiteral("v")}};
    a.workingDirectory = QStringLiteral("/w");
    McpServerConfig b;
    b.name = QStringLiteral("remote");
    b.transport = Transport::http;
    b.url = QUrl(QStringLiteral("https://example.com/mcp?x=1"));
    b.headers = {{QStringLiteral("Authorization"), QStringLiteral("Bearer t")}};
    b.enabled = false;
    const QByteArray text = QJsonDocument(mcpServersJson({a, b})).toJson();
    QString error;
    const auto back = parseMcpServersJson(text, &error);
    ASSERT_EQ(back.size(), 2) << error.toStdString();
    EXPECT_TRUE(back[0] == a);
    EXPECT_TRUE(back[1] == b);
}

TEST(McpServerConfig, NamespaceNamesAreSafeForTheChatFormat) {
    EXPECT_EQ(mcpNamespaceName(QStringLiteral("filesystem")), QStringLiteral("filesystem"));
    EXPECT_EQ(mcpNamespaceName(QStringLiteral("server-everything")),
              QStringLiteral("server_everything"));
    EXPECT_EQ(mcpNamespaceName(QStringLiteral("My Notes (work)")), QStringLiteral("My_Notes_work"));
    EXPECT_EQ(mcpNamespaceName(QStringLiteral("@scope/pkg.name")),
              QStringLiteral("scope_pkg_name"));
    EXPECT_EQ(mcpNamespaceName(QStringLiteral("7zip")), QStringLiteral("mcp_7zip"));
    EXPECT_EQ(mcpNamespaceName(QStringLiteral("")), QStringLiteral("mcp"));
    EXPECT_EQ(mcpNamespaceName(QStringLiteral("日本語")), QStringLiteral("mcp"));
    EXPECT_EQ(mcpNamespaceName(QStringLiteral("functions")), QStringLiteral("functions_mcp"));
    EXPECT_EQ(mcpNamespaceName(QStringLiteral("python")), QStringLiteral("python_mcp"));
    EXPECT_EQ(mcpNamespaceName(QStringLiteral("Browser")), QStringLiteral("Browser_mcp"));
    EXPECT_LE(mcpNamespaceName(QString(300, QLatin1Char('a'))).size(), 64);
    for (const QString& n :
         {QStringLiteral("a.b"), QStringLiteral(" x "), QStringLiteral("a--b")}) {
        const QString ns = mcpNamespaceName(n);
        EXPECT_FALSE(ns.isEmpty());
        EXPECT_TRUE(std::all_of(ns.begin(), ns.end(), [](QChar c) {
            return c == QLatin1Char('_') || (c.unicode() < 128 && c.isLetterOrNumber());
        })) << ns.toStdString();
    }
}

}  // namespace
}  // namespace neural::toolhost
