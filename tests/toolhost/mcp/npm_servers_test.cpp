// The MCP client against real servers from the npm registry, pinned in node/package.json and
// installed by scripts/setup.sh: @modelcontextprotocol/server-filesystem over stdio, and
// @modelcontextprotocol/server-everything over stdio and over Streamable HTTP.
#include <gtest/gtest.h>

#include <QDir>
#include <QFile>
#include <QProcess>
#include <QTcpServer>
#include <QTemporaryDir>

#include "mcp_test_support.h"
#include "mcphttptransport.h"
#include "mcpprovider.h"

namespace neural::toolhost {
namespace {

using test::runCall;
using test::spin;
using test::startAndWait;
using test::startCall;
using Status = ToolOutcome::Status;

#ifdef Q_OS_WIN
#define NEURAL_SKIP_WITHOUT_NODE() \
    GTEST_SKIP() << "no node under Wine: the npm servers run in the native stage"
#else
#define NEURAL_SKIP_WITHOUT_NODE() (void)0
#endif

const QString kNode = QStringLiteral(NEURAL_MCP_NODE);
const QString kModules = QStringLiteral(NEURAL_MCP_NODE_MODULES);

// The entry script of an installed server; fails the test (never skips) when it is missing.
QString serverScript(const QString& package) {
    const QString script = kModules + QStringLiteral("/@modelcontextprotocol/") + package +
                           QStringLiteral("/dist/index.js");
    EXPECT_FALSE(kNode.isEmpty())
        << "node was not found when CMake configured: run scripts/setup.sh "
           "(it installs Node.js into tools/node), then configure again";
    EXPECT_TRUE(QFile::exists(script))
        << script.toStdString()
        << " is missing: run scripts/setup.sh (npm install in tests/toolhost/mcp/node)";
    return script;
}

McpServerConfig nodeServer(const QString& name, const QString& package, QStringList args) {
    McpServerConfig c;
    c.name = name;
    c.command = kNode;
    c.args = QStringList{serverScript(package)} + args;
    return c;
}

QString toolsOf(const McpProvider& p) { return p.toolNames().join(QStringLiteral(", ")); }

TEST(McpFilesystemServer, ListsReadsAndWritesInsideTheAllowedFolderOnly) {
    NEURAL_SKIP_WITHOUT_NODE();
    QTemporaryDir allowed, outside;
    ASSERT_TRUE(allowed.isValid() && outside.isValid());
    // The server resolves symbolic links (a /tmp that is one): give it the canonical path.
    const QString root = QDir(allowed.path()).canonicalPath();
    {
        QFile f(root + QStringLiteral("/hello.txt"));
        ASSERT_TRUE(f.open(QIODevice::WriteOnly));
        f.write("Hello from Neural\n");
    }
    McpProvider p(
        nodeServer(QStringLiteral("filesystem"), QStringLiteral("server-filesystem"), {root}));
    ASSERT_TRUE(startAndWait(p)) << p.problem().toStdString() << "\n"
                                 << p.diagnostics().toStdString();
    for (const char* tool : {"list_directory", "read_text_file", "write_file"})
        EXPECT_TRUE(p.toolNames().contains(QLatin1String(tool))) << toolsOf(p).toStdString();
    const chat::ToolNamespace ns = p.toolNamespace();
    EXPECT_EQ(ns.name, "filesystem");

    const auto json = [](const QString& path, const char* extra = "") {
        return QStringLiteral(R"({"path": "%1"%2})")
            .arg(QString(path).replace(QLatin1Char('\\'), QLatin1String("\\\\")),
                 QLatin1String(extra));
    };
    ToolOutcome list = runCall(p, QStringLiteral("list_directory"), json(root));
    EXPECT_EQ(list.status, Status::ok) << list.text.toStdString();
    EXPECT_TRUE(list.text.contains(QStringLiteral("hello.txt"))) << list.text.toStdString();

    ToolOutcome read =
        runCall(p, QStringLiteral("read_text_file"), json(root + QStringLiteral("/hello.txt")));
    EXPECT_EQ(read.status, Status::ok);
    EXPECT_TRUE(read.text.contains(QStringLiteral("Hello from Neural"))) << read.text.toStdString();

    const QString written = root + QStringLiteral("/new.txt");
    ToolOutcome write = runCall(p, QStringLiteral("write_file"),
                                json(written, R"(, "content": "written by a tool")"));
    EXPECT_EQ(write.status, Status::ok) << write.text.toStdString();
    QFile f(written);
    ASSERT_TRUE(f.open(QIODevice::ReadOnly));
    EXPECT_EQ(f.readAll(), QByteArray("written by a tool"));

    const QString escape = QDir(outside.path()).canonicalPath() + QStringLiteral("/evil.txt");
    ToolOutcome denied =
        runCall(p, QStringLiteral("write_file"), json(escape, R"(, "content": "x")"));
    EXPECT_EQ(denied.status, Status::toolError) << denied.text.toStdString();
    EXPECT_TRUE(denied.text.contains(QStringLiteral("denied"), Qt::CaseInsensitive))
        << denied.text.toStdString();
    EXPECT_FALSE(QFile::exists(escape));
}

// server-everything's tools, over either transport.
void exerciseEverything(McpProvider& p) {
    for (const char* tool : {"echo", "get-sum", "trigger-long-running-operation", "get-tiny-image"})
        EXPECT_TRUE(p.toolNames().contains(QLatin1String(tool))) << toolsOf(p).toStdString();
    // Tool names with hyphens are offered as they are.
    bool found = false;
    for (const chat::ToolDescription& t : p.toolNamespace().tools) {
        if (t.name != "get-sum") continue;
        found = true;
        ASSERT_TRUE(t.parameters.has_value());
        EXPECT_TRUE(t.parameters->contains("properties"));
    }
    EXPECT_TRUE(found);

    ToolOutcome echo =
        runCall(p, QStringLiteral("echo"), QStringLiteral(R"({"message":"hi there"})"));
    EXPECT_EQ(echo.status, Status::ok);
    EXPECT_EQ(echo.text, QStringLiteral("Echo: hi there"));

    ToolOutcome sum = runCall(p, QStringLiteral("get-sum"), QStringLiteral(R"({"a":2,"b":3})"));
    EXPECT_EQ(sum.status, Status::ok);
    EXPECT_EQ(sum.text, QStringLiteral("The sum of 2 and 3 is 5."));

    // Invalid arguments: the server reports a tool error the model can read.
    ToolOutcome bad = runCall(p, QStringLiteral("get-sum"), QStringLiteral(R"({"a":"two"})"));
    EXPECT_EQ(bad.status, Status::toolError) << bad.text.toStdString();
    EXPECT_TRUE(bad.text.contains(QStringLiteral("Invalid arguments"))) << bad.text.toStdString();

    ToolOutcome image = runCall(p, QStringLiteral("get-tiny-image"), QStringLiteral("{}"));
    EXPECT_EQ(image.status, Status::ok);
    EXPECT_TRUE(image.text.startsWith(
        QStringLiteral("Here's the image you requested:\n[image: image/png, ")))
        << image.text.toStdString();
    EXPECT_TRUE(image.text.endsWith(QStringLiteral("]\nThe image above is the MCP logo.")));

    auto r = startCall(p, QStringLiteral("trigger-long-running-operation"),
                       QStringLiteral(R"({"duration":0.4,"steps":4})"));
    ASSERT_TRUE(spin([&] { return r->outcome.has_value(); }));
    EXPECT_EQ(r->outcome->status, Status::ok);
    EXPECT_TRUE(r->outcome->text.startsWith(QStringLiteral("Long running operation completed.")));
    ASSERT_EQ(r->progress.size(), 4);
    EXPECT_DOUBLE_EQ(r->progress[1].first, 0.5);
    EXPECT_DOUBLE_EQ(r->progress[3].first, 1.0);

    auto c = startCall(p, QStringLiteral("trigger-long-running-operation"),
                       QStringLiteral(R"({"duration":30,"steps":60})"));
    ASSERT_TRUE(spin([&] { return !c->progress.isEmpty(); }));
    c->call->cancel();
    ASSERT_TRUE(c->outcome.has_value());
    EXPECT_EQ(c->outcome->status, Status::cancelled);
    // The server goes on serving.
    EXPECT_EQ(runCall(p, QStringLiteral("echo"), QStringLiteral(R"({"message":"after"})")).text,
              QStringLiteral("Echo: after"));

    CallLimits quick;
    quick.timeoutMs = 500;
    ToolOutcome slow = runCall(p, QStringLiteral("trigger-long-running-operation"),
                               QStringLiteral(R"({"duration":30,"steps":3})"), quick);
    EXPECT_EQ(slow.status, Status::timedOut);
    EXPECT_TRUE(p.ready());
}

TEST(McpEverythingServer, EveryToolShapeOverStdio) {
    NEURAL_SKIP_WITHOUT_NODE();
    McpServerConfig c = nodeServer(QStringLiteral("everything"),
                                   QStringLiteral("server-everything"), {QStringLiteral("stdio")});
    c.env.insert(QStringLiteral("NEURAL_MCP_TEST_VALUE"), QStringLiteral("from-the-config"));
    McpProvider p(c);
    ASSERT_TRUE(startAndWait(p)) << p.problem().toStdString() << "\n"
                                 << p.diagnostics().toStdString();
    EXPECT_EQ(p.protocolVersion(), QStringLiteral("2025-06-18"));
    EXPECT_EQ(p.serverName(), QStringLiteral("mcp-servers/everything"));
    exerciseEverything(p);
    // The configured environment reaches the server, on top of the system's.
    ToolOutcome env = runCall(p, QStringLiteral("get-env"), QStringLiteral("{}"));
    EXPECT_TRUE(
        env.text.contains(QStringLiteral("\"NEURAL_MCP_TEST_VALUE\": \"from-the-config\"")));
    EXPECT_TRUE(env.text.contains(QStringLiteral("\"PATH\"")));
}

TEST(McpEverythingServer, EveryToolShapeOverStreamableHttp) {
    NEURAL_SKIP_WITHOUT_NODE();
    // server-everything's Streamable HTTP mode listens on $PORT; pick a free one.
    QTcpServer probe;
    ASSERT_TRUE(probe.listen(QHostAddress::LocalHost, 0));
    const quint16 port = probe.serverPort();
    probe.close();
    QProcess server;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert(QStringLiteral("PORT"), QString::number(port));
    server.setProcessEnvironment(env);
    QByteArray log;
    QObject::connect(&server, &QProcess::readyReadStandardError,
                     [&] { log += server.readAllStandardError(); });
    QObject::connect(&server, &QProcess::readyReadStandardOutput,
                     [&] { log += server.readAllStandardOutput(); });
    server.start(kNode, {serverScript(QStringLiteral("server-everything")),
                         QStringLiteral("streamableHttp")});
    struct Stop {
        QProcess& p;
        ~Stop() {
            p.kill();
            p.waitForFinished(5000);
        }
    } stop{server};
    ASSERT_TRUE(server.waitForStarted(10000));
    ASSERT_TRUE(spin([&] { return log.contains("listening on port"); }, 30000))
        << log.toStdString();

    McpServerConfig c;
    c.name = QStringLiteral("everything-http");
    c.transport = McpServerConfig::Transport::http;
    c.url = QUrl(QStringLiteral("http://127.0.0.1:%1/mcp").arg(port));
    c.headers.insert(QStringLiteral("X-Neural-Test"), QStringLiteral("1"));
    {
        McpProvider p(c);
        ASSERT_TRUE(startAndWait(p)) << p.problem().toStdString() << "\n" << log.toStdString();
        EXPECT_EQ(p.name(), QStringLiteral("everything_http"));
        auto* http = qobject_cast<McpHttpTransport*>(p.transport());
        ASSERT_NE(http, nullptr);
        EXPECT_FALSE(http->sessionId().isEmpty()) << "the session id of initialize is kept";
        exerciseEverything(p);
        p.stop();
    }
    // A wrong path is an HTTP error with its status.
    McpServerConfig wrong = c;
    wrong.url = QUrl(QStringLiteral("http://127.0.0.1:%1/nope").arg(port));
    McpProvider p(wrong);
    EXPECT_FALSE(startAndWait(p));
    EXPECT_TRUE(p.problem().startsWith(QStringLiteral("initialize failed: HTTP 404")))
        << p.problem().toStdString();
}

}  // namespace
}  // namespace neural::toolhost
