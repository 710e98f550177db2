// The MCP client (toolhost/mcp/mcpprovider.h) over stdio against neural_mcp_test_server: the
// handshake and paged tool list, every result shape, progress, cancel, timeouts, a crashing or
// babbling server, oversized results. Runs on Linux and under Wine alike.
#include <gtest/gtest.h>

#include <QSignalSpy>

#include "mcp_test_support.h"
#include "mcpprovider.h"
#include "mcpstdiotransport.h"

namespace neural::toolhost {
namespace {

using test::runCall;
using test::spin;
using test::startAndWait;
using test::startCall;
using Status = ToolOutcome::Status;

McpServerConfig testServer(QStringList args = {}) {
    McpServerConfig c;
    c.name = QStringLiteral("test-server");
    c.command = QStringLiteral(NEURAL_MCP_TEST_SERVER);
    c.args = std::move(args);
    return c;
}

class McpProviderTest : public ::testing::Test {
protected:
    void SetUp() override {
        provider_ = std::make_unique<McpProvider>(testServer());
        ASSERT_TRUE(startAndWait(*provider_)) << provider_->problem().toStdString();
    }
    std::unique_ptr<McpProvider> provider_;
};

TEST_F(McpProviderTest, HandshakeAndAPagedToolListMakeTheNamespace) {
    McpProvider& p = *provider_;
    EXPECT_TRUE(p.problem().isEmpty());
    EXPECT_EQ(p.protocolVersion(), QStringLiteral("2025-06-18"));
    EXPECT_EQ(p.serverName(), QStringLiteral("neural-mcp-test-server"));
    EXPECT_EQ(p.name(), QStringLiteral("test_server"));
    EXPECT_FALSE(p.inSystemMessage());
    // Ten tools in pages of two: every page was fetched, in the server's order.
    EXPECT_EQ(p.toolNames(), (QStringList{"echo", "add", "fail", "slow", "crash", "garbage", "big",
                                          "image", "add_tool", "ping_client"}));
    const chat::ToolNamespace ns = p.toolNamespace();
    EXPECT_EQ(ns.name, "test_server");
    EXPECT_EQ(ns.description, std::optional<std::string>("A test server."));
    ASSERT_EQ(ns.tools.size(), 10u);
    EXPECT_EQ(ns.tools[1].name, "add");
    EXPECT_EQ(ns.tools[1].description, "Adds two numbers.");
    ASSERT_TRUE(ns.tools[1].parameters.has_value());
    // The schema keeps the server's key order ("b" before "a").
    EXPECT_EQ(
        ns.tools[1].parameters->dump(),
        R"({"type":"object","properties":{"b":{"type":"number"},"a":{"type":"number"}},"required":["b","a"]})");
    EXPECT_FALSE(ns.tools[2].parameters.has_value())
        << "a tool without properties takes no arguments";
}

TEST_F(McpProviderTest, CallsReturnTextAndToolErrors) {
    ToolOutcome echo =
        runCall(*provider_, QStringLiteral("echo"), QStringLiteral(R"({"text":"héllo"})"));
    EXPECT_EQ(echo.status, Status::ok);
    EXPECT_EQ(echo.text, QStringLiteral("héllo"));
    ToolOutcome add =
        runCall(*provider_, QStringLiteral("add"), QStringLiteral(R"({"a":2,"b":3.5})"));
    EXPECT_EQ(add.status, Status::ok);
    EXPECT_EQ(add.text, QStringLiteral("5.5"));
    ToolOutcome fail = runCall(*provider_, QStringLiteral("fail"), QString());
    EXPECT_EQ(fail.status, Status::toolError);
    EXPECT_EQ(fail.text, QStringLiteral("the tool failed on purpose"));
}

TEST_F(McpProviderTest, ArgumentsThatAreNotAnObjectFailWithoutACall) {
    for (const QString& bad :
         {QStringLiteral("[1,2]"), QStringLiteral("not json"), QStringLiteral("\"x\"")}) {
        ToolOutcome o = runCall(*provider_, QStringLiteral("echo"), bad);
        EXPECT_EQ(o.status, Status::failed) << bad.toStdString();
        EXPECT_TRUE(
            o.text.startsWith(QStringLiteral("The arguments are not a JSON object: ") + bad))
            << o.text.toStdString();
        EXPECT_TRUE(o.detail.startsWith(QStringLiteral("arguments are not a JSON object: ")));
    }
    ToolOutcome unknown = runCall(*provider_, QStringLiteral("nope"), QStringLiteral("{}"));
    EXPECT_EQ(unknown.status, Status::failed);
    EXPECT_TRUE(unknown.text.startsWith(
        QStringLiteral("Unknown tool \"nope\" of test_server; it has: echo, add")))
        << unknown.text.toStdString();
}

TEST_F(McpProviderTest, ProgressNotificationsReachTheCall) {
    auto r =
        startCall(*provider_, QStringLiteral("slow"), QStringLiteral(R"({"steps":3,"ms":50})"));
    ASSERT_TRUE(spin([&] { return r->outcome.has_value(); }));
    EXPECT_EQ(r->outcome->status, Status::ok);
    EXPECT_EQ(r->outcome->text, QStringLiteral("slept 3 steps"));
    ASSERT_EQ(r->progress.size(), 3);
    EXPECT_DOUBLE_EQ(r->progress[0].first, 1.0 / 3);
    EXPECT_EQ(r->progress[0].second, QStringLiteral("step 1"));
    EXPECT_DOUBLE_EQ(r->progress[2].first, 1.0);
}

TEST_F(McpProviderTest, CancelSendsCancelledAndFinishesOnce) {
    auto r =
        startCall(*provider_, QStringLiteral("slow"), QStringLiteral(R"({"steps":100,"ms":50})"));
    ASSERT_TRUE(spin([&] { return !r->progress.isEmpty(); }));
    r->call->cancel();
    ASSERT_TRUE(r->outcome.has_value()) << "cancel() finishes the call";
    EXPECT_EQ(r->outcome->status, Status::cancelled);
    EXPECT_EQ(r->outcome->text, QStringLiteral("The call was cancelled."));
    r->call->cancel();
    // The server heard it (its stderr) and still serves.
    EXPECT_TRUE(spin([&] {
        return provider_->diagnostics().contains(QStringLiteral("slow: cancelled request"));
    })) << provider_->diagnostics().toStdString();
    EXPECT_TRUE(provider_->diagnostics().contains(QStringLiteral("cancelled by the user")));
    EXPECT_EQ(runCall(*provider_, QStringLiteral("echo"), QStringLiteral(R"({"text":"x"})")).text,
              QStringLiteral("x"));
    EXPECT_EQ(r->finishedCount, 1);
}

TEST_F(McpProviderTest, ACallThatTakesTooLongTimesOut) {
    CallLimits limits;
    limits.timeoutMs = 300;
    ToolOutcome o = runCall(*provider_, QStringLiteral("slow"),
                            QStringLiteral(R"({"steps":100,"ms":50})"), limits);
    EXPECT_EQ(o.status, Status::timedOut);
    EXPECT_EQ(o.text, QStringLiteral("The call timed out after 0.3 s."));
    EXPECT_TRUE(
        spin([&] { return provider_->diagnostics().contains(QStringLiteral("(timed out)")); }));
    EXPECT_TRUE(provider_->ready());
}

TEST_F(McpProviderTest, AnOversizedResultIsCutWithANote) {
    CallLimits limits;
    limits.maxResultBytes = 1000;
    ToolOutcome o =
        runCall(*provider_, QStringLiteral("big"), QStringLiteral(R"({"bytes":5000})"), limits);
    EXPECT_EQ(o.status, Status::ok);
    EXPECT_TRUE(o.truncated);
    EXPECT_EQ(o.fullBytes, 5000);
    EXPECT_TRUE(o.text.startsWith(QString(1000, QLatin1Char('x')) + QLatin1Char('\n')));
    EXPECT_TRUE(o.text.contains(QStringLiteral("4000 of 5000 bytes left out")));
}

TEST_F(McpProviderTest, NonTextContentIsDescribed) {
    ToolOutcome o = runCall(*provider_, QStringLiteral("image"), QStringLiteral("{}"));
    EXPECT_EQ(o.status, Status::ok);
    EXPECT_EQ(o.text, QStringLiteral("an image follows\n[image: image/png, 8 bytes]\n"
                                     "[resource link: a.txt <file:///tmp/a.txt>]"));
}

TEST_F(McpProviderTest, ListChangedRereadsTheTools) {
    QSignalSpy changed(provider_.get(), &ToolProvider::changed);
    EXPECT_EQ(runCall(*provider_, QStringLiteral("add_tool"), QStringLiteral("{}")).text,
              QStringLiteral("added"));
    ASSERT_TRUE(spin([&] { return provider_->toolNames().contains(QStringLiteral("extra")); }));
    EXPECT_GE(changed.count(), 1);
    EXPECT_EQ(provider_->toolNamespace().tools.size(), 11u);
    EXPECT_EQ(runCall(*provider_, QStringLiteral("extra"), QString()).text,
              QStringLiteral("extra was called"));
}

TEST_F(McpProviderTest, TheServersPingIsAnsweredAndItsOtherRequestsRefused) {
    ToolOutcome o = runCall(*provider_, QStringLiteral("ping_client"), QStringLiteral("{}"));
    ASSERT_EQ(o.status, Status::ok) << o.text.toStdString();
    const Json answers = Json::parse(o.text.toStdString());
    EXPECT_EQ(answers["srv-ping"]["result"], Json::object());
    EXPECT_EQ(answers["srv-roots"]["error"]["code"], -32601);
}

TEST_F(McpProviderTest, GarbageIsSkippedAndAMalformedResultFailsTheCall) {
    ToolOutcome o = runCall(*provider_, QStringLiteral("garbage"), QStringLiteral("{}"));
    EXPECT_EQ(o.status, Status::failed);
    EXPECT_EQ(
        o.text,
        QStringLiteral("The server's answer was malformed: the result is string, not an object."));
    EXPECT_TRUE(o.detail.contains(QStringLiteral("\"nonsense\"")));
    const QString diag = provider_->diagnostics();
    EXPECT_TRUE(diag.contains(QStringLiteral("not JSON: this line is not JSON")))
        << diag.toStdString();
    EXPECT_TRUE(diag.contains(QStringLiteral("not a JSON-RPC 2.0 message"))) << diag.toStdString();
    EXPECT_TRUE(provider_->ready());
    EXPECT_EQ(
        runCall(*provider_, QStringLiteral("echo"), QStringLiteral(R"({"text":"ok"})")).status,
        Status::ok);
}

TEST_F(McpProviderTest, AServerThatExitsDuringACallFailsItAndCanBeRestarted) {
    QSignalSpy changed(provider_.get(), &ToolProvider::changed);
    auto pending =
        startCall(*provider_, QStringLiteral("slow"), QStringLiteral(R"({"steps":100,"ms":50})"));
    ToolOutcome o = runCall(*provider_, QStringLiteral("crash"), QStringLiteral("{}"));
    EXPECT_EQ(o.status, Status::failed);
    EXPECT_EQ(o.text,
              QStringLiteral("The call failed: the MCP server \"test-server\" stopped (the server "
                             "exited with code 3)."));
    EXPECT_TRUE(o.detail.contains(QStringLiteral("crash: exiting in the middle of a call")))
        << o.detail.toStdString();
    // Every running call ends, not only the one that crashed it.
    ASSERT_TRUE(spin([&] { return pending->outcome.has_value(); }));
    EXPECT_EQ(pending->outcome->status, Status::failed);
    EXPECT_FALSE(provider_->ready());
    EXPECT_EQ(
        provider_->problem(),
        QStringLiteral("the server exited with code 3: crash: exiting in the middle of a call"));
    EXPECT_GE(changed.count(), 1);
    EXPECT_TRUE(provider_->toolNamespace().tools.empty());
    // A call now fails at once with the reason.
    ToolOutcome later = runCall(*provider_, QStringLiteral("echo"), QStringLiteral("{}"));
    EXPECT_EQ(later.status, Status::failed);
    EXPECT_TRUE(
        later.text.contains(QStringLiteral("is not available: the server exited with code 3")));
    // start() again brings it back.
    ASSERT_TRUE(startAndWait(*provider_)) << provider_->problem().toStdString();
    EXPECT_EQ(
        runCall(*provider_, QStringLiteral("echo"), QStringLiteral(R"({"text":"back"})")).text,
        QStringLiteral("back"));
}

TEST_F(McpProviderTest, AKilledServerFailsTheRunningCall) {
    auto r =
        startCall(*provider_, QStringLiteral("slow"), QStringLiteral(R"({"steps":100,"ms":50})"));
    ASSERT_TRUE(spin([&] { return !r->progress.isEmpty(); }));
    auto* stdio = qobject_cast<McpStdioTransport*>(provider_->transport());
    ASSERT_NE(stdio, nullptr);
    stdio->process()->kill();
    ASSERT_TRUE(spin([&] { return r->outcome.has_value(); }));
    EXPECT_EQ(r->outcome->status, Status::failed);
    EXPECT_FALSE(provider_->ready());
    EXPECT_FALSE(provider_->problem().isEmpty());
}

TEST_F(McpProviderTest, StopCancelsRunningCalls) {
    auto r =
        startCall(*provider_, QStringLiteral("slow"), QStringLiteral(R"({"steps":100,"ms":50})"));
    ASSERT_TRUE(spin([&] { return !r->progress.isEmpty(); }));
    provider_->stop();
    ASSERT_TRUE(r->outcome.has_value());
    EXPECT_EQ(r->outcome->status, Status::cancelled);
    EXPECT_FALSE(provider_->ready());
    EXPECT_EQ(provider_->problem(), QStringLiteral("the server is stopped"));
}

TEST(McpProviderStart, ACallBeforeStartFailsFromTheEventLoop) {
    McpProvider p(testServer());
    ToolOutcome o = runCall(p, QStringLiteral("echo"), QStringLiteral("{}"));
    EXPECT_EQ(o.status, Status::failed);
    EXPECT_EQ(o.text,
              QStringLiteral(
                  "The MCP server \"test-server\" is not available: the server is not started."));
}

TEST(McpProviderStart, NegotiatesDownToTheServersRevision) {
    McpProvider p(testServer({QStringLiteral("--protocol"), QStringLiteral("2025-03-26")}));
    ASSERT_TRUE(startAndWait(p)) << p.problem().toStdString();
    EXPECT_EQ(p.protocolVersion(), QStringLiteral("2025-03-26"));
    EXPECT_EQ(runCall(p, QStringLiteral("echo"), QStringLiteral(R"({"text":"x"})")).status,
              Status::ok);
}

TEST(McpProviderStart, RefusesARevisionItDoesNotSpeak) {
    McpProvider p(testServer({QStringLiteral("--protocol"), QStringLiteral("2099-01-01")}));
    EXPECT_FALSE(startAndWait(p));
    EXPECT_TRUE(p.problem().startsWith(
        QStringLiteral("the server speaks MCP revision 2099-01-01; Neural speaks 2025-06-18")))
        << p.problem().toStdString();
}

TEST(McpProviderStart, AnEnormousToolListIsCapped) {
    McpProvider p(testServer({QStringLiteral("--many-tools"), QStringLiteral("300"),
                              QStringLiteral("--page-size"), QStringLiteral("50"),
                              QStringLiteral("--deep-schema")}));
    ASSERT_TRUE(startAndWait(p)) << p.problem().toStdString();
    EXPECT_EQ(p.toolNames().size(), McpProvider::kMaxTools);
    EXPECT_EQ(p.toolNamespace().tools.size(), std::size_t(McpProvider::kMaxTools));
    EXPECT_TRUE(p.diagnostics().contains(QStringLiteral("more than 128 tools")))
        << p.diagnostics().toStdString();
}

TEST(McpProviderStart, ASchemaTooDeepToShowIsLeftOut) {
    McpProvider p(testServer({QStringLiteral("--deep-schema")}));
    ASSERT_TRUE(startAndWait(p)) << p.problem().toStdString();
    const chat::ToolNamespace ns = p.toolNamespace();
    ASSERT_EQ(ns.tools.back().name, "deep");
    EXPECT_FALSE(ns.tools.back().parameters.has_value());
    EXPECT_NE(ns.tools.back().description.find("too large to show"), std::string::npos);
}

TEST(McpProviderStart, DeletingARunningCallCancelsIt) {
    McpProvider p(testServer());
    ASSERT_TRUE(startAndWait(p)) << p.problem().toStdString();
    auto r = startCall(p, QStringLiteral("slow"), QStringLiteral(R"({"steps":100,"ms":50})"));
    ASSERT_TRUE(spin([&] { return !r->progress.isEmpty(); }));
    delete r->call.data();
    EXPECT_TRUE(
        spin([&] { return p.diagnostics().contains(QStringLiteral("slow: cancelled request")); }));
    EXPECT_EQ(runCall(p, QStringLiteral("echo"), QStringLiteral(R"({"text":"x"})")).text,
              QStringLiteral("x"));
}

TEST(McpProviderStart, ACommandThatDoesNotExist) {
    McpServerConfig c;
    c.name = QStringLiteral("missing");
    c.command = QStringLiteral("neural-no-such-command-xyz");
    McpProvider p(c);
    EXPECT_FALSE(startAndWait(p));
    EXPECT_TRUE(
        p.problem().startsWith(QStringLiteral("could not start \"neural-no-such-command-xyz\"")))
        << p.problem().toStdString();
}

TEST(McpProviderStart, AServerThatExitsAtOnceNamesItsExitCodeAndStderr) {
    McpProvider p(testServer({QStringLiteral("--exit-at-start"), QStringLiteral("7")}));
    EXPECT_FALSE(startAndWait(p));
    EXPECT_EQ(
        p.problem(),
        QStringLiteral(
            "the server exited with code 7: fatal: the test server was told to exit at start"));
}

TEST(McpProviderStart, AServerThatOnlyPrintsGarbageTimesOutStarting) {
    McpProvider p(testServer({QStringLiteral("--garbage-at-start")}));
    p.setStartTimeoutMs(1500);
    EXPECT_FALSE(startAndWait(p));
    EXPECT_TRUE(
        p.problem().startsWith(QStringLiteral("the server did not finish starting within 1.5 s")))
        << p.problem().toStdString();
    EXPECT_TRUE(p.diagnostics().contains(QStringLiteral("not JSON: Starting server...")))
        << p.diagnostics().toStdString();
}

TEST(McpProviderStart, AnHttpServerThatIsNotThere) {
    McpServerConfig c;
    c.name = QStringLiteral("nowhere");
    c.transport = McpServerConfig::Transport::http;
    c.url = QUrl(QStringLiteral("http://127.0.0.1:1/mcp"));
    McpProvider p(c);
    EXPECT_FALSE(startAndWait(p));
    EXPECT_TRUE(p.problem().startsWith(
        QStringLiteral("initialize failed: could not reach http://127.0.0.1:1/mcp")))
        << p.problem().toStdString();
}

}  // namespace
}  // namespace neural::toolhost
