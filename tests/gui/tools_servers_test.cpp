// Tools in the desktop app against real servers (docs/DESKTOP.md "Tools"), the way a user meets
// them: Settings > Tools imports the MCP servers from the mcpServers JSON of Claude Desktop / LM
// Studio / Jan (a file and pasted text), the model calls a tool, the card asks, Run, the result
// shows under the card and the model answers. The servers are real: the pinned npm packages
// @modelcontextprotocol/server-filesystem (stdio) and server-everything (Streamable HTTP) of
// tests/toolhost/mcp/node, the built-in browser against a local HTTP server with the fixture
// pages of tests/toolhost/builtin, and the C++ test MCP server as the browser's search provider.
// The fixture's weights are random, so each turn's output is forced
// (EngineHost::queueForcedOutput); everything after the sampler is the real path.
#include <gtest/gtest.h>

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QCheckBox>
#include <QComboBox>
#include <QPlainTextEdit>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QTcpServer>
#include <QToolButton>

#include "app/mainwindow.h"
#include "common/paths.h"
#include "builtin_test_support.h"
#include "conversation/chatview.h"
#include "fixture_window.h"
#include "gui_test_support.h"
#include "mcpprovider.h"
#include "settings/toolsettingsdialog.h"
#include "tools/toolcard.h"
#include "tools/toolmanager.h"
#include "tools/toolsettings.h"

namespace neural::gui {
namespace {

using test::spinUntil;

const QString kNode = QStringLiteral(NEURAL_MCP_NODE);
const QString kModules = QStringLiteral(NEURAL_MCP_NODE_MODULES);

// The entry script of an installed npm server, or empty with the reason why the test skips.
QString npmServer(const QString& package, std::string* why) {
#ifdef Q_OS_WIN
    (void)package;
    *why = "no node under Wine: the npm servers run in the native stage";
    return {};
#else
    const QString script = kModules + QStringLiteral("/@modelcontextprotocol/") + package +
                           QStringLiteral("/dist/index.js");
    if (kNode.isEmpty()) {
        *why = "node was not found when CMake configured (scripts/setup.sh installs it)";
        return {};
    }
    if (!QFile::exists(script)) {
        *why = script.toStdString() +
               " is missing (scripts/setup.sh: npm install in tests/toolhost/mcp/node)";
        return {};
    }
    return script;
#endif
}

const QString kAnswer = QStringLiteral("<|channel|>final<|message|>Done.<|return|>");
// How long a turn of the fixture may take: generous, for a loaded CI machine.
constexpr int kTurnMs = 120000;

class ToolServersTest : public test::WindowTest {
protected:
    ToolServersTest() : WindowTest(64) {}

    MessageModel* messages() { return m_window->messages(); }
    int last() { return messages()->rowCount() - 1; }
    QJsonObject callAt(int row) {
        return messages()->at(row).stats.value(QStringLiteral("tool")).toObject();
    }
    QString statusAt(int row) { return callAt(row).value(QStringLiteral("status")).toString(); }
    ToolCard* cardAt(int row) {
        MessageWidget* w = m_window->chatView()->messageWidget(row);
        return w ? w->toolCard() : nullptr;
    }
    // Sends `text` with the reply forced to `call`; waits for its card to ask.
    bool sendForCall(const QString& text, const QString& call) {
        m_window->engine()->queueForcedOutput(call);
        m_window->input()->setPlainText(text);
        m_window->sendMessage();
        return spinUntil(
            [&] {
                return !m_window->engine()->busy() && !messages()->isStreaming() && last() >= 0 &&
                       messages()->at(last()).role == QLatin1String("tool") &&
                       statusAt(last()) == QLatin1String("pending");
            },
            kTurnMs);
    }
    // Presses `button` of the card on the last row with the answer after it queued; waits for
    // the answer.
    bool pressAndWaitAnswer(QPushButton* (ToolCard::*button)() const,
                            const QString& answer = kAnswer) {
        ToolCard* card = cardAt(last());
        if (!card) return false;
        m_window->engine()->queueForcedOutput(answer);
        (card->*button)()->click();
        return spinUntil(
            [&] {
                return !m_window->engine()->busy() && !messages()->isStreaming() &&
                       !m_window->toolRunning() && last() >= 0 &&
                       messages()->at(last()).role == QLatin1String("assistant");
            },
            kTurnMs);
    }
    // The tool message of the last request's history (the round the model read).
    const chat::Message* lastToolResult() {
        const auto& h = m_window->engine()->lastRequest().history;
        for (auto it = h.rbegin(); it != h.rend(); ++it)
            if (it->role == chat::Role::tool) return &*it;
        return nullptr;
    }
    // Settings > Tools: OK, then until the server `name` runs (its state line says so).
    ::testing::AssertionResult okAndWaitRunning(ToolSettingsDialog& d, const QString& name) {
        d.accept();
        int row = -1;
        for (int i = 0; i < d.servers().size(); ++i)
            if (d.servers()[i].name == name) row = i;
        if (row < 0) return ::testing::AssertionFailure() << "no server " << name.toStdString();
        if (!spinUntil([&] { return d.serverState(row).startsWith(QStringLiteral("running")); },
                       60000))
            return ::testing::AssertionFailure() << d.serverState(row).toStdString();
        return ::testing::AssertionSuccess();
    }
};

// The issue's "Done means": the filesystem server added from its JSON, a call approved, the
// result and the answer.
TEST_F(ToolServersTest, TheFilesystemServerImportedFromItsJsonReadsAndWritesOnRun) {
    std::string why;
    const QString script = npmServer(QStringLiteral("server-filesystem"), &why);
    if (script.isEmpty()) GTEST_SKIP() << why;
    QTemporaryDir notes;
    ASSERT_TRUE(notes.isValid());
    // The server resolves symbolic links (a /tmp that is one): give it the canonical path.
    const QString root = QDir(notes.path()).canonicalPath();
    {
        QFile f(root + QStringLiteral("/hello.txt"));
        ASSERT_TRUE(f.open(QIODevice::WriteOnly));
        f.write("Hello from Neural\n");
    }
    // Claude Desktop's claude_desktop_config.json (node and the installed script stand in for
    // `npx -y @modelcontextprotocol/server-filesystem`, which would fetch the package).
    const QJsonObject server{{"command", kNode}, {"args", QJsonArray{script, root}}};
    const QByteArray json = QJsonDocument(QJsonObject{
                                              {"globalShortcut", ""},
                                              {"mcpServers", QJsonObject{{"filesystem", server}}},
                                          })
                                .toJson();
    const QString file = m_dir.filePath(QStringLiteral("claude_desktop_config.json"));
    {
        QFile f(file);
        ASSERT_TRUE(f.open(QIODevice::WriteOnly));
        f.write(json);
    }
    toolhost::McpServerConfig fromFile;
    {
        ToolSettingsDialog d(m_window->tools(), m_window.get());
        ASSERT_TRUE(d.importServers(file)) << d.importError()->text().toStdString();
        ASSERT_EQ(d.servers().size(), 1);
        fromFile = d.servers()[0];
        EXPECT_EQ(fromFile.name, QStringLiteral("filesystem"));
        EXPECT_EQ(fromFile.command, kNode);
        EXPECT_EQ(fromFile.args, (QStringList{script, root}));
        EXPECT_EQ(d.serverState(0), QStringLiteral("starts when you press OK"));
    }
    // The same, pasted (as LM Studio's mcp.json shows it): the same server; OK starts it.
    ToolSettingsDialog d(m_window->tools(), m_window.get());
    ASSERT_TRUE(d.importServers(QString::fromUtf8(json))) << d.importError()->text().toStdString();
    ASSERT_EQ(d.servers().size(), 1);
    EXPECT_TRUE(d.servers()[0] == fromFile);
    ASSERT_TRUE(okAndWaitRunning(d, QStringLiteral("filesystem")));
    EXPECT_EQ(ToolSettings::load().servers.size(), 1);  // saved

    // The model asks to read the file: the server's namespace was offered, the card asks.
    const QString path = QString(root + QStringLiteral("/hello.txt"))
                             .replace(QLatin1Char('\\'), QLatin1String("\\\\"));
    ASSERT_TRUE(sendForCall(
        QStringLiteral("What does hello.txt say?"),
        QStringLiteral("<|channel|>commentary to=filesystem.read_text_file <|constrain|>json"
                       "<|message|>{\"path\":\"%1\"}<|call|>")
            .arg(path)));
    const auto& dev = m_window->engine()->lastRequest().developer.tools;
    ASSERT_EQ(dev.size(), 1u);
    EXPECT_EQ(dev[0].name, "filesystem");
    bool offered = false;
    for (const chat::ToolDescription& t : dev[0].tools) offered |= t.name == "read_text_file";
    EXPECT_TRUE(offered);
    ToolCard* card = cardAt(1);
    ASSERT_NE(card, nullptr);
    EXPECT_TRUE(card->isVisible());
    EXPECT_TRUE(card->titleLabel()->text().contains(QStringLiteral("filesystem")));
    EXPECT_TRUE(card->titleLabel()->text().contains(QStringLiteral("read_text_file")));
    EXPECT_TRUE(card->argumentsLabel()->text().contains(QStringLiteral("hello.txt")));
    EXPECT_TRUE(card->runButton()->isVisible());

    ASSERT_TRUE(pressAndWaitAnswer(&ToolCard::runButton,
                                   QStringLiteral("<|channel|>final<|message|>It says: Hello from "
                                                  "Neural.<|return|>")));
    EXPECT_EQ(statusAt(1), QStringLiteral("ok")) << messages()->at(1).content.toStdString();
    EXPECT_TRUE(messages()->at(1).content.contains(QStringLiteral("Hello from Neural")))
        << messages()->at(1).content.toStdString();
    // The result is collapsed under the card and opens; the answer follows.
    card = cardAt(1);
    EXPECT_TRUE(card->resultToggle()->isVisible());
    EXPECT_FALSE(card->resultView()->isVisible());
    card->resultToggle()->click();
    EXPECT_TRUE(card->resultView()->isVisible());
    EXPECT_TRUE(card->resultView()->toPlainText().contains(QStringLiteral("Hello from Neural")));
    EXPECT_FALSE(card->runButton()->isVisible());
    ASSERT_EQ(messages()->rowCount(), 3);
    EXPECT_EQ(messages()->at(2).content, QStringLiteral("It says: Hello from Neural."));
    const chat::Message* result = lastToolResult();
    ASSERT_NE(result, nullptr);
    EXPECT_EQ(result->name.value_or(""), "filesystem.read_text_file");
    EXPECT_NE(result->text().find("Hello from Neural"), std::string::npos);

    // A write, allowed for good: the file is there; a write outside the folder is refused by
    // the server, which the card and the model see as the tool's error.
    const QString written = QString(root + QStringLiteral("/answer.txt"))
                                .replace(QLatin1Char('\\'), QLatin1String("\\\\"));
    ASSERT_TRUE(sendForCall(
        QStringLiteral("Write the answer down"),
        QStringLiteral("<|channel|>commentary to=filesystem.write_file <|constrain|>json"
                       "<|message|>{\"path\":\"%1\",\"content\":\"42\"}<|call|>")
            .arg(written)));
    ASSERT_TRUE(pressAndWaitAnswer(&ToolCard::alwaysButton));
    EXPECT_EQ(statusAt(last() - 1), QStringLiteral("ok"))
        << messages()->at(last() - 1).content.toStdString();
    QFile f(root + QStringLiteral("/answer.txt"));
    ASSERT_TRUE(f.open(QIODevice::ReadOnly));
    EXPECT_EQ(f.readAll(), QByteArray("42"));
    EXPECT_TRUE(m_window->conversationTools().allowed(QStringLiteral("filesystem.write_file")));

    QTemporaryDir outside;
    const QString escape = QDir(outside.path()).canonicalPath() + QStringLiteral("/evil.txt");
    m_window->engine()->queueForcedOutput(
        QStringLiteral("<|channel|>commentary to=filesystem.write_file <|constrain|>json"
                       "<|message|>{\"path\":\"%1\",\"content\":\"x\"}<|call|>")
            .arg(QString(escape).replace(QLatin1Char('\\'), QLatin1String("\\\\"))));
    m_window->engine()->queueForcedOutput(kAnswer);
    m_window->input()->setPlainText(QStringLiteral("And outside"));
    m_window->sendMessage();  // always allowed: runs without asking
    ASSERT_TRUE(spinUntil(
        [&] {
            return !m_window->engine()->busy() && !messages()->isStreaming() &&
                   !m_window->toolRunning() &&
                   messages()->at(last()).role == QLatin1String("assistant") &&
                   messages()->at(last() - 1).role == QLatin1String("tool");
        },
        kTurnMs));
    EXPECT_EQ(statusAt(last() - 1), QStringLiteral("tool_error"))
        << messages()->at(last() - 1).content.toStdString();
    EXPECT_TRUE(
        messages()->at(last() - 1).content.contains(QStringLiteral("denied"), Qt::CaseInsensitive));
    EXPECT_TRUE(cardAt(last() - 1)->stateLabel()->text().contains(QStringLiteral("error")))
        << cardAt(last() - 1)->stateLabel()->text().toStdString();
    EXPECT_FALSE(QFile::exists(escape));
}

// A Streamable HTTP server (server-everything's HTTP mode), pasted with its URL and a header:
// a call with progress that shows in the card, then its result.
TEST_F(ToolServersTest, AStreamableHttpServerRunsACallWithProgress) {
    std::string why;
    const QString script = npmServer(QStringLiteral("server-everything"), &why);
    if (script.isEmpty()) GTEST_SKIP() << why;
    QTcpServer probe;  // server-everything listens on $PORT: a free one
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
    server.start(kNode, {script, QStringLiteral("streamableHttp")});
    struct Stop {
        QProcess& p;
        ~Stop() {
            p.kill();
            p.waitForFinished(5000);
        }
    } stop{server};
    ASSERT_TRUE(server.waitForStarted(10000));
    ASSERT_TRUE(spinUntil([&] { return log.contains("listening on port"); }, 30000))
        << log.toStdString();

    ToolSettingsDialog d(m_window->tools(), m_window.get());
    ASSERT_TRUE(d.importServers(QStringLiteral(R"({"mcpServers": {"everything": {
        "type": "http", "url": "http://127.0.0.1:%1/mcp",
        "headers": {"X-Neural-Test": "1"}}}})")
                                    .arg(port)))
        << d.importError()->text().toStdString();
    ASSERT_EQ(d.servers().size(), 1);
    EXPECT_EQ(d.servers()[0].transport, toolhost::McpServerConfig::Transport::http);
    ASSERT_TRUE(okAndWaitRunning(d, QStringLiteral("everything"))) << log.toStdString();

    // A long-running operation reports progress: the card shows it while it runs.
    ASSERT_TRUE(sendForCall(
        QStringLiteral("Take your time"),
        QStringLiteral("<|channel|>commentary to=everything.trigger-long-running-operation "
                       "<|constrain|>json<|message|>{\"duration\":2,\"steps\":4}<|call|>")));
    ToolCard* card = cardAt(1);
    ASSERT_NE(card, nullptr);
    m_window->engine()->queueForcedOutput(kAnswer);
    card->runButton()->click();
    ASSERT_TRUE(spinUntil([&] {
        return cardAt(1) && cardAt(1)->progressBar()->isVisible() &&
               cardAt(1)->progressBar()->value() > cardAt(1)->progressBar()->minimum();
    })) << cardAt(1)->stateLabel()->text().toStdString();
    EXPECT_TRUE(cardAt(1)->cancelButton()->isVisible());
    ASSERT_TRUE(spinUntil(
        [&] {
            return !m_window->toolRunning() && !m_window->engine()->busy() &&
                   messages()->at(last()).role == QLatin1String("assistant");
        },
        kTurnMs));
    EXPECT_EQ(statusAt(1), QStringLiteral("ok")) << messages()->at(1).content.toStdString();
    EXPECT_TRUE(
        messages()->at(1).content.contains(QStringLiteral("completed"), Qt::CaseInsensitive))
        << messages()->at(1).content.toStdString();

    // A plain call, and the tool's own error for bad arguments.
    ASSERT_TRUE(
        sendForCall(QStringLiteral("Add"),
                    QStringLiteral("<|channel|>commentary to=everything.get-sum "
                                   "<|constrain|>json<|message|>{\"a\":2,\"b\":3}<|call|>")));
    ASSERT_TRUE(pressAndWaitAnswer(&ToolCard::runButton));
    EXPECT_EQ(messages()->at(last() - 1).content, QStringLiteral("The sum of 2 and 3 is 5."));
    ASSERT_TRUE(sendForCall(QStringLiteral("Add words"),
                            QStringLiteral("<|channel|>commentary to=everything.get-sum "
                                           "<|constrain|>json<|message|>{\"a\":\"two\"}<|call|>")));
    ASSERT_TRUE(pressAndWaitAnswer(&ToolCard::runButton));
    EXPECT_EQ(statusAt(last() - 1), QStringLiteral("tool_error"));
    EXPECT_TRUE(messages()->at(last() - 1).content.contains(QStringLiteral("Invalid arguments")))
        << messages()->at(last() - 1).content.toStdString();
}

// The built-in browser, turned on in Settings > Tools and in the conversation: search (a fake
// SearXNG), open a result, find in it; every step a card the user runs.
class BrowserInAppTest : public ToolServersTest {
protected:
    void SetUp() override {
        ToolServersTest::SetUp();
        m_server = std::make_unique<toolhost::test::HttpServer>();
        ASSERT_NE(m_server->port(), 0);
        m_server->route("/moons/article.html", [](const QByteArray&) {
            toolhost::test::HttpAnswer answer;
            answer.body = toolhost::test::fixturePage(QStringLiteral("article.html"));
            return answer;
        });
        m_server->route("/searx/search", [this](const QByteArray& target) {
            m_searchTarget = target;
            QJsonArray results;
            results.append(
                QJsonObject{{"url", m_server->url(QStringLiteral("/moons/article.html"))},
                            {"title", "Moons of Jupiter"},
                            {"content", "Jupiter has 95 known moons."}});
            toolhost::test::HttpAnswer answer;
            answer.contentType = "application/json";
            answer.body =
                QJsonDocument(QJsonObject{{"results", results}}).toJson(QJsonDocument::Compact);
            return answer;
        });
    }
    // Turns the browser on for this conversation (the Tools menu does this).
    void enableBrowserInConversation() {
        ConversationTools t;
        t.setEnabled(QStringLiteral("browser"), true);
        m_window->setConversationTools(t);
    }
    // search, then open link 0 of the results: each card run by the user.
    void searchAndOpen() {
        ASSERT_TRUE(sendForCall(QStringLiteral("How many moons has Jupiter?"),
                                QStringLiteral("<|channel|>analysis to=browser.search code"
                                               "<|message|>{\"query\":\"moons of jupiter\"}"
                                               "<|call|>")));
        // browser is declared in the system message, not the developer message.
        const auto& sys = m_window->engine()->lastRequest().system.tools;
        ASSERT_EQ(sys.size(), 1u);
        EXPECT_EQ(sys[0].name, "browser");
        for (const chat::ToolNamespace& ns : m_window->engine()->lastRequest().developer.tools)
            EXPECT_NE(ns.name, "browser");
        EXPECT_EQ(callAt(1).value(QStringLiteral("recipient")).toString(),
                  QStringLiteral("browser.search"));
        EXPECT_TRUE(cardAt(1)->argumentsLabel()->text().contains(QStringLiteral("moons")));
        // The answer to the search is another call; its card asks in turn.
        m_window->engine()->queueForcedOutput(
            QStringLiteral("<|channel|>analysis to=browser.open code<|message|>{\"id\":0}"
                           "<|call|>"));
        cardAt(1)->runButton()->click();
        ASSERT_TRUE(spinUntil(
            [&] { return messages()->rowCount() == 3 && statusAt(2) == QLatin1String("pending"); },
            kTurnMs));
        EXPECT_EQ(statusAt(1), QStringLiteral("ok")) << messages()->at(1).content.toStdString();
        EXPECT_TRUE(messages()->at(1).content.contains(QStringLiteral("# Search Results")));
        EXPECT_TRUE(messages()->at(1).content.contains(QStringLiteral("Moons of Jupiter")));
        ASSERT_TRUE(pressAndWaitAnswer(
            &ToolCard::runButton,
            QStringLiteral("<|channel|>final<|message|>Jupiter has 95 known moons.<|return|>")));
        EXPECT_EQ(statusAt(2), QStringLiteral("ok")) << messages()->at(2).content.toStdString();
        EXPECT_TRUE(messages()->at(2).content.contains(QStringLiteral("# Moons of Jupiter")))
            << messages()->at(2).content.toStdString();
        EXPECT_EQ(messages()->at(3).content, QStringLiteral("Jupiter has 95 known moons."));
        // The model read the page as the browser's answer on the analysis channel.
        const chat::Message* result = lastToolResult();
        ASSERT_NE(result, nullptr);
        EXPECT_EQ(result->name.value_or(""), "browser.open");
        EXPECT_EQ(result->channel.value_or(""), "analysis");
    }

    std::unique_ptr<toolhost::test::HttpServer> m_server;
    QByteArray m_searchTarget;
};

TEST_F(BrowserInAppTest, SearchesTheConfiguredSearxngThenOpensAResult) {
    ToolSettingsDialog d(m_window->tools(), m_window.get());
    EXPECT_FALSE(d.browserBox()->isChecked());  // off by default
    d.browserBox()->setChecked(true);
    // A URL that is not http(s) is refused with a message; the page stays open.
    d.searxngEdit()->setText(QStringLiteral("ftp://127.0.0.1/"));
    d.accept();
    EXPECT_FALSE(ToolSettings::load().browserEnabled);
    d.searxngEdit()->setText(m_server->url(QStringLiteral("/searx")));
    d.accept();
    ASSERT_TRUE(ToolSettings::load().browserEnabled);
    enableBrowserInConversation();
    searchAndOpen();
    EXPECT_TRUE(m_searchTarget.contains("format=json")) << m_searchTarget.toStdString();

    // find on the open page, then a page that is not there: the tool's error, in the card.
    ASSERT_TRUE(sendForCall(QStringLiteral("Which ones are large?"),
                            QStringLiteral("<|channel|>analysis to=browser.find code"
                                           "<|message|>{\"pattern\":\"Ganymede\"}<|call|>")));
    ASSERT_TRUE(pressAndWaitAnswer(&ToolCard::runButton));
    EXPECT_EQ(statusAt(last() - 1), QStringLiteral("ok"));
    EXPECT_TRUE(messages()->at(last() - 1).content.contains(QStringLiteral("Ganymede")));
    ASSERT_TRUE(sendForCall(
        QStringLiteral("And this?"),
        QStringLiteral("<|channel|>analysis to=browser.open code<|message|>{\"id\":\"%1\"}<|call|>")
            .arg(m_server->url(QStringLiteral("/missing.html")))));
    ASSERT_TRUE(pressAndWaitAnswer(&ToolCard::runButton));
    EXPECT_EQ(statusAt(last() - 1), QStringLiteral("tool_error"));
    EXPECT_TRUE(messages()->at(last() - 1).content.contains(QStringLiteral("404")))
        << messages()->at(last() - 1).content.toStdString();
}

// Search through an MCP server's tool: the C++ test MCP server (runs under Wine too), chosen in
// Settings > Tools with its search tool.
TEST_F(BrowserInAppTest, SearchesWithAnMcpServersToolThenOpensAResult) {
    ToolSettingsDialog d(m_window->tools(), m_window.get());
    const QJsonObject server{
        {"command", QStringLiteral(NEURAL_MCP_TEST_SERVER)},
        {"args", QJsonArray{QStringLiteral("--search-tools"), m_server->url(QString())}}};
    ASSERT_TRUE(d.importServers(QString::fromUtf8(
        QJsonDocument(QJsonObject{{"mcpServers", QJsonObject{{"web", server}}}}).toJson())))
        << d.importError()->text().toStdString();
    d.browserBox()->setChecked(true);
    d.searchWithBox()->setCurrentIndex(1);
    EXPECT_TRUE(d.searchServerBox()->isVisibleTo(&d));
    EXPECT_FALSE(d.searxngEdit()->isVisibleTo(&d));
    // The server and its tool must be named.
    d.searchServerBox()->setCurrentIndex(d.searchServerBox()->findText(QStringLiteral("web")));
    d.accept();
    EXPECT_FALSE(d.errorLabel()->isHidden());
    EXPECT_TRUE(d.errorLabel()->text().contains(QStringLiteral("search tool")));
    d.searchToolEdit()->setText(QStringLiteral("web_search"));
    ASSERT_TRUE(okAndWaitRunning(d, QStringLiteral("web")));
    EXPECT_TRUE(d.errorLabel()->isHidden());
    const ToolSettings saved = ToolSettings::load();
    EXPECT_EQ(saved.searchServer, QStringLiteral("web"));
    EXPECT_EQ(saved.searchTool, QStringLiteral("web_search"));
    // Once it runs, the page lists its tools to choose from.
    ToolSettingsDialog again(m_window->tools(), m_window.get());
    EXPECT_EQ(again.searchWithBox()->currentIndex(), 1);
    EXPECT_EQ(again.searchServerBox()->currentText(), QStringLiteral("web"));
    EXPECT_EQ(again.searchToolEdit()->text(), QStringLiteral("web_search"));
    EXPECT_TRUE(again.searchToolsLabel()->text().contains(QStringLiteral("json_search")))
        << again.searchToolsLabel()->text().toStdString();

    enableBrowserInConversation();
    searchAndOpen();
    EXPECT_TRUE(m_searchTarget.isEmpty());  // SearXNG was not asked
    EXPECT_TRUE(messages()->at(1).content.contains(QStringLiteral("About moons of jupiter")))
        << messages()->at(1).content.toStdString();
}

TEST_F(BrowserInAppTest, WithoutASearchProviderTheCardSaysWhereToSetOne) {
    ToolSettings s;
    s.browserEnabled = true;
    s.save();
    m_window->tools()->applySettings(ToolSettings::load());
    enableBrowserInConversation();
    ASSERT_TRUE(sendForCall(QStringLiteral("Search"),
                            QStringLiteral("<|channel|>analysis to=browser.search code"
                                           "<|message|>{\"query\":\"x\"}<|call|>")));
    ASSERT_TRUE(pressAndWaitAnswer(&ToolCard::runButton));
    EXPECT_TRUE(messages()->at(1).content.contains(QStringLiteral("Settings > Tools")))
        << messages()->at(1).content.toStdString();
    EXPECT_FALSE(cardAt(1)->stateLabel()->text().isEmpty());
}

}  // namespace
}  // namespace neural::gui
