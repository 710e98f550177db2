// Tools in the desktop app (docs/DESKTOP.md "Tools"), on the tiny fixture, offscreen: a reply that
// calls a tool becomes a card with Run / Deny / Always allow; its outcome goes into the history
// and the model answers by itself; cancel, failures, time-outs, cut results, the round limit and
// reopening the conversation. The fixture's weights are random, so each turn's output is forced
// (EngineHost::queueForcedOutput); everything after the sampler is the real path. The provider
// here is a small test one that drives every outcome deterministically; the real MCP server and
// python have their own tests below.
#include <gtest/gtest.h>

#include <QDir>
#include <QFile>
#include <QLineEdit>
#include <QCheckBox>
#include <QComboBox>
#include <QApplication>
#include <QJsonObject>
#include <QMenu>
#include <QMessageBox>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QTest>
#include <QTimer>
#include <QToolButton>

#include "app/mainwindow.h"
#include "common/paths.h"
#include "conversation/chatview.h"
#include "conversation/conversationstore.h"
#include "fixture_window.h"
#include "gui_test_support.h"
#include "tool.h"
#include "tools/toolcard.h"
#include "tools/toolmanager.h"
#include "tools/toolsettings.h"
#include "settings/toolsettingsdialog.h"
#include "builtin/pythontool.h"
#include "mcpserverconfig.h"

namespace neural::gui {
namespace {

using test::spinUntil;

// One call of the test provider: finishes after a moment with the outcome its mode gives, or
// (hang) only when cancelled.
class FakeCall : public toolhost::ToolCall {
public:
    FakeCall(toolhost::ToolOutcome outcome, bool hang, QObject* parent)
        : ToolCall(parent), m_outcome(std::move(outcome)) {
        if (!hang)
            QTimer::singleShot(20, this, [this] { finish(m_outcome); });
        else
            QTimer::singleShot(10, this,
                               [this] { emit progress(0.25, QStringLiteral("reading")); });
    }
    void cancel() override {
        toolhost::ToolOutcome o;
        o.status = toolhost::ToolOutcome::Status::cancelled;
        o.text = QStringLiteral("The call was cancelled by the user.");
        finish(o);
    }

private:
    void finish(const toolhost::ToolOutcome& o) {
        if (m_done) return;
        m_done = true;
        emit finished(o);
    }
    toolhost::ToolOutcome m_outcome;
    bool m_done = false;
};

// The namespace "files" with one tool, read(path).
class FakeProvider : public toolhost::ToolProvider {
public:
    enum class Mode { ok, hang, crash, timeout, huge, toolError };
    Mode mode = Mode::ok;
    QStringList calls;  // "tool args" of each call

    QString name() const override { return QStringLiteral("files"); }
    bool inSystemMessage() const override { return false; }
    chat::ToolNamespace toolNamespace() const override {
        chat::ToolNamespace ns;
        ns.name = "files";
        ns.tools.push_back({"read", "Reads a file.",
                            nlohmann::ordered_json::parse(
                                R"({"type":"object","properties":{"path":{"type":"string"}}})")});
        return ns;
    }
    bool ready() const override { return true; }
    QString problem() const override { return {}; }
    toolhost::ToolCall* call(const QString& tool, const QString& arguments,
                             const toolhost::CallLimits& limits) override {
        calls.push_back(tool + QLatin1Char(' ') + arguments);
        toolhost::ToolOutcome o;
        switch (mode) {
            case Mode::ok:
                toolhost::setResultText(o, QStringLiteral("hello from a.txt"),
                                        limits.maxResultBytes);
                break;
            case Mode::hang:
                break;
            case Mode::crash:
                o.status = toolhost::ToolOutcome::Status::failed;
                o.text = QStringLiteral("Error: the tool server stopped (exit code 3).");
                o.detail = QStringLiteral("the server exited with code 3: segmentation fault");
                break;
            case Mode::timeout:
                o.status = toolhost::ToolOutcome::Status::timedOut;
                o.text = QStringLiteral("Error: the call timed out after 1 s.");
                o.detail = QStringLiteral("no answer within 1 s");
                break;
            case Mode::huge:
                toolhost::setResultText(o, QString(100000, QLatin1Char('x')), 1000);
                break;
            case Mode::toolError:
                o.status = toolhost::ToolOutcome::Status::toolError;
                o.text = QStringLiteral("ENOENT: no such file a.txt");
                break;
        }
        return new FakeCall(o, mode == Mode::hang, this);
    }
};

const QString kCall = QStringLiteral(
    "<|channel|>commentary to=files.read <|constrain|>json<|message|>{\"path\":\"a.txt\"}<|call|>");
const QString kAnswer = QStringLiteral("<|channel|>final<|message|>The file says hello.<|return|>");

class ToolsTest : public test::WindowTest {
protected:
    ToolsTest() : WindowTest(64) {}
    void SetUp() override {
        WindowTest::SetUp();
        m_provider = new FakeProvider;
        m_window->tools()->addProvider(m_provider);
    }

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
    // Sends `text` with the reply forced to a call of files.read; waits for the card.
    bool sendForCall(const QString& text) {
        m_window->engine()->queueForcedOutput(kCall);
        m_window->input()->setPlainText(text);
        m_window->sendMessage();
        return spinUntil([&] {
            return !m_window->engine()->busy() && !messages()->isStreaming() && last() >= 0 &&
                   messages()->at(last()).role == QLatin1String("tool") &&
                   statusAt(last()) != QLatin1String("running");
        });
    }
    // Until the model answered (the last row is a reply) and nothing runs.
    bool waitAnswer() {
        return spinUntil([&] {
            return !m_window->engine()->busy() && !messages()->isStreaming() &&
                   !m_window->toolRunning() && last() >= 0 &&
                   messages()->at(last()).role == QLatin1String("assistant");
        });
    }
    // The tool message of the last request's history (the round the model read).
    const chat::Message* lastToolResult() {
        const auto& h = m_window->engine()->lastRequest().history;
        for (auto it = h.rbegin(); it != h.rend(); ++it)
            if (it->role == chat::Role::tool) return &*it;
        return nullptr;
    }

    FakeProvider* m_provider = nullptr;
};

TEST_F(ToolsTest, ACallShowsACardAndRunAnswersItThenTheModelReplies) {
    ASSERT_TRUE(sendForCall(QStringLiteral("What is in a.txt?")));
    // The turn offered the server's namespace in the developer message.
    const auto& dev = m_window->engine()->lastRequest().developer.tools;
    ASSERT_EQ(dev.size(), 1u);
    EXPECT_EQ(dev[0].name, "files");
    EXPECT_TRUE(m_window->engine()->lastRequest().system.tools.empty());

    ASSERT_EQ(messages()->rowCount(), 2);
    EXPECT_EQ(statusAt(1), QStringLiteral("pending"));
    EXPECT_EQ(callAt(1).value(QStringLiteral("recipient")).toString(),
              QStringLiteral("files.read"));
    EXPECT_EQ(callAt(1).value(QStringLiteral("arguments")).toString(),
              QStringLiteral("{\"path\":\"a.txt\"}"));
    ToolCard* card = cardAt(1);
    ASSERT_NE(card, nullptr);
    EXPECT_TRUE(card->isVisible());
    EXPECT_TRUE(card->titleLabel()->text().contains(QStringLiteral("files")));
    EXPECT_TRUE(card->titleLabel()->text().contains(QStringLiteral("read")));
    // Pretty-printed arguments.
    EXPECT_TRUE(card->argumentsLabel()->text().contains(QStringLiteral("\"path\": \"a.txt\"")))
        << card->argumentsLabel()->text().toStdString();
    EXPECT_TRUE(card->runButton()->isVisible());
    EXPECT_TRUE(card->denyButton()->isVisible());
    EXPECT_TRUE(card->alwaysButton()->isVisible());
    EXPECT_FALSE(card->cancelButton()->isVisible());
    EXPECT_TRUE(m_provider->calls.isEmpty());  // nothing runs before the user says so

    m_window->engine()->queueForcedOutput(kAnswer);
    card->runButton()->click();
    ASSERT_TRUE(waitAnswer());
    ASSERT_EQ(m_provider->calls, QStringList{QStringLiteral("read {\"path\":\"a.txt\"}")});
    ASSERT_EQ(messages()->rowCount(), 3);
    EXPECT_EQ(statusAt(1), QStringLiteral("ok"));
    EXPECT_EQ(messages()->at(1).content, QStringLiteral("hello from a.txt"));
    EXPECT_EQ(messages()->at(2).content, QStringLiteral("The file says hello."));
    // The result is collapsed under the card, and opens.
    card = cardAt(1);
    EXPECT_TRUE(card->resultToggle()->isVisible());
    EXPECT_FALSE(card->resultView()->isVisible());
    card->resultToggle()->click();
    EXPECT_TRUE(card->resultView()->isVisible());
    EXPECT_EQ(card->resultView()->toPlainText(), QStringLiteral("hello from a.txt"));
    EXPECT_FALSE(card->runButton()->isVisible());
    // The model read the call and its result, as harmony writes them.
    const auto& h = m_window->engine()->lastRequest().history;
    ASSERT_GE(h.size(), 3u);
    const chat::Message& call = h[h.size() - 2];
    EXPECT_EQ(call.role, chat::Role::assistant);
    EXPECT_EQ(call.recipient.value_or(""), "files.read");
    EXPECT_EQ(call.channel.value_or(""), "commentary");
    EXPECT_EQ(call.content_type.value_or(""), "<|constrain|>json");
    EXPECT_EQ(call.text(), "{\"path\":\"a.txt\"}");
    const chat::Message& result = h.back();
    EXPECT_EQ(result.role, chat::Role::tool);
    EXPECT_EQ(result.name.value_or(""), "files.read");
    EXPECT_EQ(result.text(), "hello from a.txt");

    // The conversation goes on normally.
    ASSERT_TRUE(test::sendAndWait(*m_window, QStringLiteral("Thanks")));
    EXPECT_EQ(messages()->rowCount(), 5);
    EXPECT_EQ(messages()->at(4).role, QStringLiteral("assistant"));
}

TEST_F(ToolsTest, ANoteBeforeTheCallShowsOnTheCardAndStaysInTheHistory) {
    m_window->engine()->queueForcedOutput(
        QStringLiteral("<|channel|>commentary<|message|>Let me look.<|end|><|start|>assistant") +
        kCall);
    m_window->input()->setPlainText(QStringLiteral("Read a.txt"));
    m_window->sendMessage();
    ASSERT_TRUE(spinUntil([&] {
        return !m_window->engine()->busy() && !messages()->isStreaming() &&
               messages()->rowCount() == 2;
    }));
    ASSERT_EQ(statusAt(1), QStringLiteral("pending"));
    EXPECT_EQ(cardAt(1)->preambleLabel()->text(), QStringLiteral("Let me look."));
    EXPECT_TRUE(cardAt(1)->preambleLabel()->isVisible());
    m_window->engine()->queueForcedOutput(kAnswer);
    cardAt(1)->runButton()->click();
    ASSERT_TRUE(waitAnswer());
    const auto& h = m_window->engine()->lastRequest().history;
    ASSERT_GE(h.size(), 4u);
    EXPECT_EQ(h[h.size() - 3].channel.value_or(""), "commentary");
    EXPECT_EQ(h[h.size() - 3].text(), "Let me look.");
    EXPECT_EQ(h[h.size() - 2].recipient.value_or(""), "files.read");
}

// Answers the next message box with `button` once it is open.
void answerNextBox(QMessageBox::StandardButton button, bool* seen) {
    auto* poll = new QTimer;
    poll->setInterval(20);
    QObject::connect(poll, &QTimer::timeout, poll, [poll, button, seen] {
        if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
            *seen = true;
            box->button(button)->click();
            poll->deleteLater();
        }
    });
    poll->start();
}

TEST_F(ToolsTest, TheToolsMenuTurnsNamespacesOnAndOffPerConversation) {
    QMenu* menu = m_window->toolsButton()->menu();
    ASSERT_NE(menu, nullptr);
    auto action = [&](const QString& ns) -> QAction* {
        m_window->fillToolsMenu();
        for (QAction* a : menu->actions())
            if (a->data().toString() == ns) return a;
        return nullptr;
    };
    ASSERT_NE(action(QStringLiteral("files")), nullptr);
    EXPECT_TRUE(action(QStringLiteral("files"))->isChecked());  // servers: on by default
    EXPECT_TRUE(action(QStringLiteral("files"))->text().contains(QStringLiteral("1 tool")));
    ASSERT_NE(action(QStringLiteral("python")), nullptr);
    EXPECT_FALSE(action(QStringLiteral("python"))->isChecked());  // built-ins: off
    EXPECT_FALSE(action(QStringLiteral("browser"))->isChecked());

    action(QStringLiteral("files"))->trigger();
    EXPECT_FALSE(m_window->conversationTools().enabled(QStringLiteral("files")));
    // python asks first; No keeps it off, Yes turns it on.
    bool asked = false;
    answerNextBox(QMessageBox::No, &asked);
    action(QStringLiteral("python"))->trigger();
    EXPECT_TRUE(asked);
    EXPECT_FALSE(m_window->conversationTools().enabled(QStringLiteral("python")));
    asked = false;
    answerNextBox(QMessageBox::Yes, &asked);
    action(QStringLiteral("python"))->trigger();
    EXPECT_TRUE(asked);
    EXPECT_TRUE(m_window->conversationTools().enabled(QStringLiteral("python")));

    // Stored with the conversation once it exists; a New conversation starts with the defaults.
    ASSERT_TRUE(test::sendAndWait(*m_window, QStringLiteral("Hello")));
    const qint64 id = m_window->currentConversation();
    m_window->newConversation();
    EXPECT_TRUE(m_window->conversationTools().enabled(QStringLiteral("files")));
    EXPECT_FALSE(m_window->conversationTools().enabled(QStringLiteral("python")));
    m_window->selectConversation(id);
    EXPECT_FALSE(m_window->conversationTools().enabled(QStringLiteral("files")));
    EXPECT_TRUE(m_window->conversationTools().enabled(QStringLiteral("python")));
    // A branch takes them along.
    ASSERT_NE(m_window->branchFrom(0), 0);
    EXPECT_FALSE(m_window->conversationTools().enabled(QStringLiteral("files")));
    EXPECT_TRUE(m_window->conversationTools().enabled(QStringLiteral("python")));
}

TEST_F(ToolsTest, DenySendsADenialTheModelReads) {
    ASSERT_TRUE(sendForCall(QStringLiteral("Read a.txt")));
    m_window->engine()->queueForcedOutput(kAnswer);
    cardAt(1)->denyButton()->click();
    ASSERT_TRUE(waitAnswer());
    EXPECT_TRUE(m_provider->calls.isEmpty());
    EXPECT_EQ(statusAt(1), QStringLiteral("denied"));
    EXPECT_TRUE(cardAt(1)->stateLabel()->text().contains(QStringLiteral("Denied")));
    const chat::Message* result = lastToolResult();
    ASSERT_NE(result, nullptr);
    EXPECT_NE(result->text().find("denied"), std::string::npos) << result->text();
}

TEST_F(ToolsTest, AlwaysAllowSkipsTheQuestionNextTime) {
    ASSERT_TRUE(sendForCall(QStringLiteral("Read a.txt")));
    m_window->engine()->queueForcedOutput(kAnswer);
    cardAt(1)->alwaysButton()->click();
    ASSERT_TRUE(waitAnswer());
    EXPECT_EQ(m_provider->calls.size(), 1);
    EXPECT_TRUE(m_window->conversationTools().allowed(QStringLiteral("files.read")));
    // Stored with the conversation.
    const auto info = m_window->store().conversation(m_window->currentConversation());
    ASSERT_TRUE(info);
    EXPECT_TRUE(ConversationTools::fromJson(info->tools).allowed(QStringLiteral("files.read")));

    // The next call of the tool runs without a question.
    m_window->engine()->queueForcedOutput(kCall);
    m_window->engine()->queueForcedOutput(kAnswer);
    m_window->input()->setPlainText(QStringLiteral("Again"));
    m_window->sendMessage();
    ASSERT_TRUE(spinUntil([&] { return messages()->rowCount() == 6; }));
    ASSERT_TRUE(waitAnswer());
    EXPECT_EQ(m_provider->calls.size(), 2);
    EXPECT_EQ(statusAt(4), QStringLiteral("ok"));
    EXPECT_TRUE(callAt(4).value(QStringLiteral("auto")).toBool());
    EXPECT_TRUE(cardAt(4)->stateLabel()->text().contains(QStringLiteral("Always allowed")));
}

TEST_F(ToolsTest, ARunningCallCanBeCancelled) {
    m_provider->mode = FakeProvider::Mode::hang;
    ASSERT_TRUE(sendForCall(QStringLiteral("Read a.txt")));
    cardAt(1)->runButton()->click();
    ASSERT_TRUE(m_window->toolRunning());
    EXPECT_EQ(statusAt(1), QStringLiteral("running"));
    ToolCard* card = cardAt(1);
    EXPECT_TRUE(card->cancelButton()->isVisible());
    EXPECT_TRUE(card->progressBar()->isVisible());
    EXPECT_FALSE(card->runButton()->isVisible());
    // Progress shows in the card.
    ASSERT_TRUE(
        spinUntil([&] { return card->stateLabel()->text().contains(QStringLiteral("reading")); }));
    // Sending is refused while it runs.
    m_window->input()->setPlainText(QStringLiteral("hurry"));
    m_window->sendMessage();
    EXPECT_EQ(messages()->rowCount(), 2);
    m_window->input()->clear();

    // Another conversation opened meanwhile, then this one again: the card still runs.
    const qint64 id = m_window->currentConversation();
    m_window->newConversation();
    m_window->selectConversation(id);
    ASSERT_EQ(messages()->rowCount(), 2);
    EXPECT_EQ(statusAt(1), QStringLiteral("running"));
    ASSERT_TRUE(spinUntil([&] { return cardAt(1) && cardAt(1)->cancelButton()->isVisible(); }));
    card = cardAt(1);

    m_window->engine()->queueForcedOutput(kAnswer);
    card->cancelButton()->click();
    ASSERT_TRUE(waitAnswer());
    EXPECT_FALSE(m_window->toolRunning());
    EXPECT_EQ(statusAt(1), QStringLiteral("cancelled"));
    EXPECT_TRUE(cardAt(1)->stateLabel()->text().contains(QStringLiteral("Cancelled")));
    const chat::Message* result = lastToolResult();
    ASSERT_NE(result, nullptr);
    EXPECT_NE(result->text().find("cancelled"), std::string::npos);

    // Stop (Esc) cancels a running call too, and no turn follows.
    ASSERT_TRUE(sendForCall(QStringLiteral("Read it again")));
    cardAt(last())->runButton()->click();
    ASSERT_TRUE(m_window->toolRunning());
    const int row = last();
    m_window->stopGeneration();
    ASSERT_TRUE(spinUntil([&] { return !m_window->toolRunning(); }));
    test::spinFor(300);
    EXPECT_FALSE(m_window->engine()->busy());
    EXPECT_EQ(last(), row);
    EXPECT_EQ(statusAt(row), QStringLiteral("cancelled"));
    // Regenerate lets the model answer it.
    m_window->engine()->queueForcedOutput(kAnswer);
    m_window->regenerateLast();
    ASSERT_TRUE(waitAnswer());
    EXPECT_EQ(last(), row + 1);
}

TEST_F(ToolsTest, FailuresShowInTheCardAndTheConversationContinues) {
    struct Case {
        FakeProvider::Mode mode;
        const char* status;
        const char* shown;
    };
    const Case cases[] = {
        {FakeProvider::Mode::crash, "failed", "exited with code 3"},
        {FakeProvider::Mode::timeout, "timed_out", "timed out"},
        {FakeProvider::Mode::toolError, "tool_error", "reported an error"},
        {FakeProvider::Mode::huge, "ok", "cut to the size limit"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.status);
        m_provider->mode = c.mode;
        ASSERT_TRUE(sendForCall(QStringLiteral("Read a.txt")));
        const int row = last();
        m_window->engine()->queueForcedOutput(kAnswer);
        cardAt(row)->runButton()->click();
        ASSERT_TRUE(waitAnswer());
        EXPECT_EQ(statusAt(row), QString::fromLatin1(c.status));
        EXPECT_TRUE(cardAt(row)->stateLabel()->text().contains(QString::fromLatin1(c.shown)))
            << cardAt(row)->stateLabel()->text().toStdString();
        EXPECT_EQ(messages()->at(last()).content, QStringLiteral("The file says hello."));
    }
    // The cut result: what the model read is within the limit, with the note.
    const QString cut = messages()->at(last() - 1).content;
    EXPECT_LT(cut.toUtf8().size(), 1200);
    EXPECT_TRUE(cut.contains(QStringLiteral("left out")));
    EXPECT_TRUE(callAt(last() - 1).value(QStringLiteral("truncated")).toBool());
}

TEST_F(ToolsTest, AnUnknownOrSwitchedOffNamespaceIsAnsweredWithoutAsking) {
    ConversationTools t;
    t.setEnabled(QStringLiteral("files"), false);
    m_window->setConversationTools(t);
    m_window->engine()->queueForcedOutput(kCall);
    m_window->engine()->queueForcedOutput(kAnswer);
    m_window->input()->setPlainText(QStringLiteral("Read a.txt"));
    m_window->sendMessage();
    ASSERT_TRUE(spinUntil([&] { return messages()->rowCount() == 3; }));
    ASSERT_TRUE(waitAnswer());
    // Not offered, not run; the model was told why.
    EXPECT_TRUE(m_window->engine()->lastRequest().developer.tools.empty());
    EXPECT_TRUE(m_provider->calls.isEmpty());
    EXPECT_EQ(statusAt(1), QStringLiteral("unavailable"));
    EXPECT_TRUE(cardAt(1)->stateLabel()->text().contains(QStringLiteral("turned off")));
    // Stored with the new conversation.
    const auto info = m_window->store().conversation(m_window->currentConversation());
    ASSERT_TRUE(info);
    EXPECT_FALSE(ConversationTools::fromJson(info->tools).enabled(QStringLiteral("files")));
}

TEST_F(ToolsTest, ToolRoundsAreBoundedPerMessage) {
    ConversationTools t;
    t.alwaysAllow.push_back(QStringLiteral("files.read"));
    m_window->setConversationTools(t);
    m_window->engine()->setForcedOutput(kCall);  // every turn calls the tool again
    m_window->input()->setPlainText(QStringLiteral("Read a.txt forever"));
    m_window->sendMessage();
    const int rounds = ToolManager::kMaxToolRounds;
    ASSERT_TRUE(spinUntil(
        [&] {
            return messages()->rowCount() == rounds + 2 && !m_window->engine()->busy() &&
                   !m_window->toolRunning() && !messages()->isStreaming();
        },
        60000))
        << messages()->rowCount();
    test::spinFor(200);
    EXPECT_EQ(messages()->rowCount(), rounds + 2);  // no further turn
    EXPECT_EQ(m_provider->calls.size(), rounds);
    EXPECT_EQ(statusAt(last()), QStringLiteral("limit"));
    EXPECT_TRUE(cardAt(last())->stateLabel()->text().contains(QStringLiteral("in a row")));
}

TEST_F(ToolsTest, ToolCallsSurviveReopeningAndBranching) {
    ASSERT_TRUE(sendForCall(QStringLiteral("Read a.txt")));
    m_window->engine()->queueForcedOutput(kAnswer);
    cardAt(1)->runButton()->click();
    ASSERT_TRUE(waitAnswer());
    const qint64 id = m_window->currentConversation();

    // A second window on the same file: the card, its outcome and result come back.
    m_window->newConversation();
    m_window.reset();
    open();
    m_provider = new FakeProvider;
    m_window->tools()->addProvider(m_provider);
    m_window->selectConversation(id);
    ASSERT_EQ(messages()->rowCount(), 3);
    EXPECT_EQ(messages()->at(1).role, QStringLiteral("tool"));
    EXPECT_EQ(statusAt(1), QStringLiteral("ok"));
    ASSERT_TRUE(spinUntil([&] { return cardAt(1) && cardAt(1)->isVisible(); }));
    EXPECT_EQ(cardAt(1)->resultView()->toPlainText(), QStringLiteral("hello from a.txt"));
    EXPECT_FALSE(cardAt(1)->runButton()->isVisible());

    // Regenerate the answer: the model reads the stored round again.
    m_window->engine()->queueForcedOutput(
        QStringLiteral("<|channel|>final<|message|>Hello, says the file.<|return|>"));
    m_window->regenerate(2);
    ASSERT_TRUE(waitAnswer());
    EXPECT_EQ(messages()->at(2).content, QStringLiteral("Hello, says the file."));
    EXPECT_EQ(messages()->at(2).versions.size(), 2);
    ASSERT_NE(lastToolResult(), nullptr);
    EXPECT_EQ(lastToolResult()->text(), "hello from a.txt");

    // A branch keeps the round.
    const qint64 branch = m_window->branchFrom(2);
    ASSERT_NE(branch, 0);
    ASSERT_EQ(messages()->rowCount(), 3);
    EXPECT_EQ(messages()->at(1).role, QStringLiteral("tool"));
    EXPECT_EQ(statusAt(1), QStringLiteral("ok"));

    // Editing the message of yours replaces the round with a new answer.
    m_window->engine()->queueForcedOutput(kAnswer);
    m_window->editMessage(0, QStringLiteral("Never mind"));
    ASSERT_TRUE(waitAnswer());
    EXPECT_EQ(messages()->rowCount(), 2);

    // Markdown export names the call.
    m_window->selectConversation(id);
    EXPECT_TRUE(m_window->store().exportMarkdown(id).contains(
        QStringLiteral("Tool call: files.read (ok)")));
}

TEST_F(ToolsTest, APendingCardIsSettledWhenTheUserWritesOn) {
    ASSERT_TRUE(sendForCall(QStringLiteral("Read a.txt")));
    ASSERT_TRUE(test::sendAndWait(*m_window, QStringLiteral("No, do not.")));
    EXPECT_EQ(statusAt(1), QStringLiteral("denied"));
    EXPECT_TRUE(m_provider->calls.isEmpty());
    EXPECT_EQ(messages()->at(2).role, QStringLiteral("user"));
}

// The real providers: an MCP server (the C++ test server, over stdio) and python.
class RealToolsTest : public ToolsTest {
protected:
    // docs/images: with NEURAL_DOC_SCREENSHOTS set to a folder, the window as the user sees it
    // at this step of a real tool call: docs/images/tools-*.png come from here.
    void docShot(const char* name) {
        const QString dir = qEnvironmentVariable("NEURAL_DOC_SCREENSHOTS");
        if (dir.isEmpty()) return;
        m_window->resize(1180, 760);
        QApplication::processEvents();
        QTest::qWait(200);
        ASSERT_TRUE(m_window->grab().save(dir + QLatin1Char('/') + QLatin1String(name)));
    }
    void SetUp() override { WindowTest::SetUp(); }  // the real providers, no fake one
    // Sends `text` with the reply forced to `call`; waits for its card.
    bool sendForced(const QString& text, const QString& call) {
        m_window->engine()->queueForcedOutput(call);
        m_window->input()->setPlainText(text);
        m_window->sendMessage();
        return spinUntil([&] {
            return !m_window->engine()->busy() && !messages()->isStreaming() && last() >= 0 &&
                   messages()->at(last()).role == QLatin1String("tool");
        });
    }
};

TEST_F(RealToolsTest, AnMcpServerToolRunsFromItsCard) {
    ToolSettings settings;
    toolhost::McpServerConfig server;
    server.name = QStringLiteral("test");
    server.command = QStringLiteral(NEURAL_MCP_TEST_SERVER);
    settings.servers.push_back(server);
    settings.save();
    m_window->tools()->applySettings(ToolSettings::load());
    toolhost::ToolProvider* p = m_window->tools()->provider(QStringLiteral("test"), 0);
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(spinUntil([&] { return p->ready(); })) << p->problem().toStdString();

    ASSERT_TRUE(sendForced(QStringLiteral("Echo hi"),
                           QStringLiteral("<|channel|>commentary to=test.echo <|constrain|>json"
                                          "<|message|>{\"text\":\"hi there\"}<|call|>")));
    // The server's tools were in the developer message.
    const auto& dev = m_window->engine()->lastRequest().developer.tools;
    ASSERT_EQ(dev.size(), 1u);
    EXPECT_EQ(dev[0].name, "test");
    EXPECT_GE(dev[0].tools.size(), 2u);
    EXPECT_EQ(statusAt(1), QStringLiteral("pending"));
    docShot("tools-card.png");
    m_window->engine()->queueForcedOutput(kAnswer);
    cardAt(1)->runButton()->click();
    ASSERT_TRUE(waitAnswer());
    EXPECT_EQ(statusAt(1), QStringLiteral("ok"));
    docShot("tools-result.png");
    EXPECT_TRUE(messages()->at(1).content.contains(QStringLiteral("hi there")))
        << messages()->at(1).content.toStdString();
    ASSERT_NE(lastToolResult(), nullptr);
    EXPECT_EQ(lastToolResult()->name.value_or(""), "test.echo");

    // The server crashes mid-call: the card says so and the conversation goes on.
    ASSERT_TRUE(sendForced(QStringLiteral("Crash"),
                           QStringLiteral("<|channel|>commentary to=test.crash <|constrain|>json"
                                          "<|message|>{}<|call|>")));
    m_window->engine()->queueForcedOutput(kAnswer);
    cardAt(last())->runButton()->click();
    ASSERT_TRUE(waitAnswer());
    EXPECT_EQ(statusAt(last() - 1), QStringLiteral("failed"));
    EXPECT_FALSE(cardAt(last() - 1)->stateLabel()->text().isEmpty());
    EXPECT_TRUE(cardAt(last() - 1)->stateLabel()->text().contains(QStringLiteral("failed")))
        << cardAt(last() - 1)->stateLabel()->text().toStdString();
    // The crashed server is down until the settings are applied again (OK in Settings > Tools).
    EXPECT_FALSE(p->ready());
    m_window->tools()->applySettings(ToolSettings::load());
    EXPECT_EQ(m_window->tools()->provider(QStringLiteral("test"), 0), p);  // the same provider
    ASSERT_TRUE(spinUntil([&] { return p->ready(); })) << p->problem().toStdString();
}

TEST_F(RealToolsTest, PythonRunsACalculationInTheConversationsScratchFolder) {
#ifdef Q_OS_WIN
    GTEST_SKIP() << "no Python in the Wine test environment";
#endif
    QString why;
    if (toolhost::PythonProvider::findInterpreter({}, &why).isEmpty())
        GTEST_SKIP() << "no Python on PATH: " << why.toStdString();
    ToolSettings settings;
    settings.pythonEnabled = true;
    settings.save();
    m_window->tools()->applySettings(ToolSettings::load());
    ConversationTools t;
    t.setEnabled(QStringLiteral("python"), true);
    m_window->setConversationTools(t);

    ASSERT_TRUE(sendForced(QStringLiteral("What is 6*7?"),
                           QStringLiteral("<|channel|>analysis to=python code<|message|>"
                                          "import os\nprint(6*7, os.getcwd())<|call|>")));
    // python is declared in the system message.
    const auto& sys = m_window->engine()->lastRequest().system.tools;
    ASSERT_EQ(sys.size(), 1u);
    EXPECT_EQ(sys[0].name, "python");
    EXPECT_EQ(callAt(1).value(QStringLiteral("recipient")).toString(), QStringLiteral("python"));
    // The code is the call, not reasoning.
    EXPECT_FALSE(messages()->at(1).reasoning.contains(QStringLiteral("print")));
    m_window->engine()->queueForcedOutput(
        QStringLiteral("<|channel|>final<|message|>6 \u00d7 7 = 42.<|return|>"));
    cardAt(1)->runButton()->click();
    ASSERT_TRUE(waitAnswer());
    EXPECT_EQ(statusAt(1), QStringLiteral("ok")) << messages()->at(1).content.toStdString();
    cardAt(1)->resultToggle()->click();  // the result, expanded
    docShot("tools-python.png");
    const QString out = messages()->at(1).content;
    EXPECT_TRUE(out.contains(QStringLiteral("42"))) << out.toStdString();
    const QString scratch = ToolManager::scratchFolder(m_window->currentConversation());
    EXPECT_TRUE(out.contains(QDir(scratch).dirName())) << out.toStdString();
    // The model read it as python's answer on the analysis channel.
    ASSERT_NE(lastToolResult(), nullptr);
    EXPECT_EQ(lastToolResult()->name.value_or(""), "python");
    EXPECT_EQ(lastToolResult()->channel.value_or(""), "analysis");
}

// Settings > Tools: import from JSON (good, bad, a file that is not there), a server's state,
// python's interpreter line, persisted settings.
TEST_F(RealToolsTest, SettingsImportServersAndSayWhatIsWrong) {
    ToolSettingsDialog d(m_window->tools(), m_window.get());
    // A file that is not there.
    EXPECT_FALSE(d.importServers(m_dir.filePath(QStringLiteral("missing.json"))));
    EXPECT_TRUE(d.importError()->text().contains(QStringLiteral("Cannot read")))
        << d.importError()->text().toStdString();
    // A file that is not JSON.
    const QString bad = m_dir.filePath(QStringLiteral("bad.json"));
    {
        QFile f(bad);
        ASSERT_TRUE(f.open(QIODevice::WriteOnly));
        f.write("{\"mcpServers\": {\"files\": {\"command\": 42}}}");
    }
    EXPECT_FALSE(d.importServers(bad));
    EXPECT_FALSE(d.importError()->isHidden());
    EXPECT_TRUE(d.importError()->text().contains(QStringLiteral("files")))
        << d.importError()->text().toStdString();
    EXPECT_TRUE(d.servers().isEmpty());
    EXPECT_FALSE(d.importServers(QStringLiteral("{\"mcpServers\": ")));
    EXPECT_TRUE(d.servers().isEmpty());

    // Claude Desktop's format, pasted.
    const QString json =
        QStringLiteral(
            "{\"mcpServers\": {\"test\": {\"command\": \"%1\", \"args\": []},"
            " \"web\": {\"url\": \"http://127.0.0.1:1/mcp\", \"disabled\": true}}}")
            .arg(QStringLiteral(NEURAL_MCP_TEST_SERVER));
    ASSERT_TRUE(d.importServers(json)) << d.importError()->text().toStdString();
    EXPECT_TRUE(d.importError()->isHidden());
    ASSERT_EQ(d.servers().size(), 2);
    EXPECT_EQ(d.serverState(1), QStringLiteral("off"));
    d.save();
    // Started, and its state says so; the settings were written.
    ASSERT_TRUE(spinUntil([&] { return d.serverState(0).startsWith(QStringLiteral("running")); }))
        << d.serverState(0).toStdString();
    EXPECT_EQ(ToolSettings::load().servers.size(), 2);
    EXPECT_NE(m_window->tools()->provider(QStringLiteral("test"), 0), nullptr);
    EXPECT_EQ(m_window->tools()->provider(QStringLiteral("web"), 0), nullptr);  // disabled

    // Removing it stops it.
    d.removeServer(0);
    d.save();
    EXPECT_EQ(m_window->tools()->provider(QStringLiteral("test"), 0), nullptr);

    // Python: off by default, and the page says which interpreter it would use (or how to get
    // one).
    EXPECT_FALSE(d.pythonBox()->isChecked());
    d.interpreterEdit()->setText(m_dir.filePath(QStringLiteral("no-python-here")));
    d.pythonBox()->setChecked(true);
    EXPECT_TRUE(d.pythonFound()->text().startsWith(QStringLiteral("No Python found")))
        << d.pythonFound()->text().toStdString();
}

TEST_F(RealToolsTest, TheServerDialogChecksItsFields) {
    McpServerDialog d(toolhost::McpServerConfig{}, {QStringLiteral("taken")});
    QString error;
    d.config(&error);
    EXPECT_FALSE(error.isEmpty());  // no name
    d.nameEdit()->setText(QStringLiteral("taken"));
    d.config(&error);
    EXPECT_TRUE(error.contains(QStringLiteral("already")));
    d.nameEdit()->setText(QStringLiteral("files"));
    d.config(&error);
    EXPECT_TRUE(error.contains(QStringLiteral("command")));
    d.commandEdit()->setText(QStringLiteral("npx"));
    d.argsEdit()->setText(
        QStringLiteral("-y @modelcontextprotocol/server-filesystem \"C:\\My Notes\""));
    d.envEdit()->setPlainText(QStringLiteral("A=1\nnot a pair"));
    d.config(&error);
    EXPECT_TRUE(error.contains(QStringLiteral("line 2")));
    d.envEdit()->setPlainText(QStringLiteral("A=1"));
    toolhost::McpServerConfig c = d.config(&error);
    EXPECT_TRUE(error.isEmpty()) << error.toStdString();
    EXPECT_EQ(c.args, (QStringList{QStringLiteral("-y"),
                                   QStringLiteral("@modelcontextprotocol/server-filesystem"),
                                   QStringLiteral("C:\\My Notes")}));
    EXPECT_EQ(c.env.value(QStringLiteral("A")), QStringLiteral("1"));
    d.transportBox()->setCurrentIndex(1);
    d.urlEdit()->setText(QStringLiteral("ftp://example.com"));
    d.config(&error);
    EXPECT_TRUE(error.contains(QStringLiteral("http")));
    d.urlEdit()->setText(QStringLiteral("https://example.com/mcp"));
    d.headersEdit()->setPlainText(QStringLiteral("Authorization: Bearer x"));
    c = d.config(&error);
    EXPECT_TRUE(error.isEmpty());
    EXPECT_EQ(c.transport, toolhost::McpServerConfig::Transport::http);
    EXPECT_EQ(c.headers.value(QStringLiteral("Authorization")), QStringLiteral("Bearer x"));
}

}  // namespace
}  // namespace neural::gui
