// The main window end to end, offscreen, on the tiny fixture: a message typed and sent with
// Enter streams a reply that is shown and committed to the conversations file; regenerate and
// edit-and-resend; the API toggle starts the shared-engine server (/health answers) and stops
// it; the event loop never stalls for 100 ms while the model loads and generates.
#include <gtest/gtest.h>

#include <QAction>
#include <QComboBox>
#include <QScrollArea>
#include <QSpinBox>
#include <QTextBrowser>
#include <QVBoxLayout>
#include <QWheelEvent>
#include <QApplication>
#include <QElapsedTimer>
#include <QDir>
#include <QFile>
#include <QMenuBar>
#include <QMessageBox>
#include <QFileInfo>
#include <QLabel>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QPushButton>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

#include <spdlog/spdlog.h>

#include "app/applog.h"
#include "app/guideviewer.h"
#include "app/mainwindow.h"
#include "common/paths.h"
#include "common/wheelguard.h"
#include "conversation/chatinput.h"
#include "conversation/chatview.h"
#include "conversation/markdown.h"
#include "fixture_window.h"
#include "gui_test_support.h"
#include "settings/profile.h"
#include "support/fixtures.h"
#include "monitor/telemetrydock.h"
#include "tray/servercontrol.h"

namespace neural::gui {
namespace {

using test::spinUntil;

const QString kForced = QStringLiteral(
    "<|channel|>analysis<|message|>Short thought.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Here is code:\n\n```\nint x = 1;\n```\n");

// Longest gap between ticks of a 5 ms timer: how long the GUI thread was unavailable.
class StallMeter {
public:
    StallMeter() {
        m_timer.setInterval(5);
        QObject::connect(&m_timer, &QTimer::timeout, [this] {
            if (!m_clock.isValid()) {
                m_clock.start();
                m_since.start();
                return;
            }
            const qint64 gap = m_clock.restart();
            if (gap > m_worst) {
                m_worst = gap;
                m_worstAt = m_since.elapsed();
            }
        });
        m_timer.start();
    }
    qint64 worstMs() const { return m_worst; }
    qint64 worstAtMs() const { return m_worstAt; }  // when it ended, from the start

private:
    QTimer m_timer;
    QElapsedTimer m_clock, m_since;
    qint64 m_worst = 0, m_worstAt = 0;
};

class MainWindowTest : public ::testing::Test {
protected:
    void SetUp() override {
        const MainWindow::Options o = test::fixtureWindowOptions(m_dir);
        // One CPU thread for the model (the profile's threads knob reaches LoadOptions::threads):
        // the fixture is tiny and the machine may be shared, where OpenMP barriers stall.
        ProfileStore profiles;
        profiles.active().values.insert(QStringLiteral("threads"), 1);
        ASSERT_TRUE(profiles.save(o.profilesPath));
        appSettings()->setValue(QStringLiteral("chat/maxTokens"), 40);  // random weights ramble
        m_window = std::make_unique<MainWindow>(o);
        m_window->engine()->setForcedOutput(kForced);
        m_window->show();
    }

    bool waitReady() {
        return spinUntil([&] { return m_window->engine()->state() == EngineHost::State::ready; });
    }

    // Types `text` and presses Enter; waits for the reply to be committed.
    bool sendAndWait(const QString& text) {
        const int before = m_window->messages()->rowCount();
        m_window->input()->setFocus();
        QTest::keyClicks(m_window->input(), text);
        QTest::keyClick(m_window->input(), Qt::Key_Return);
        return spinUntil([&] {
            return !m_window->engine()->busy() && m_window->messages()->rowCount() == before + 2 &&
                   !m_window->messages()->isStreaming();
        });
    }

    QTemporaryDir m_dir;
    std::unique_ptr<MainWindow> m_window;
};

// The tray's Quit with the window hidden in the tray (the API running): the event loop ends.
// close() alone did nothing then, so the process and the port stayed up.
TEST_F(MainWindowTest, QuitEndsTheAppWhenTheWindowIsHidden) {
    ASSERT_TRUE(waitReady()) << m_window->engine()->lastError().toStdString();
    m_window->hide();
    QAction* quit = nullptr;
    for (QAction* a : m_window->findChildren<QAction*>()) {
        if (a->text() == QStringLiteral("&Quit")) quit = a;
    }
    ASSERT_NE(quit, nullptr);
    EXPECT_EQ(quit->shortcut(), QKeySequence(Qt::CTRL | Qt::Key_Q));  // Windows too
    bool timedOut = false;
    QTimer guard;  // ends the loop if Quit does not (destroyed with the test, never fires late)
    guard.setSingleShot(true);
    QObject::connect(&guard, &QTimer::timeout, [&] {
        timedOut = true;
        QCoreApplication::exit(7);
    });
    guard.start(10000);
    QTimer::singleShot(0, quit, &QAction::trigger);
    const int rc = QCoreApplication::exec();
    EXPECT_FALSE(timedOut);
    EXPECT_EQ(rc, 0);
}

TEST_F(MainWindowTest, SendsAMessageAndPersistsTheStreamedReply) {
    // A reply long enough that re-laying out all of it per batch would stall (it did: 480 ms at
    // 2,048 tokens before the view appended instead).
    appSettings()->setValue(QStringLiteral("chat/maxTokens"), 300);
    StallMeter meter;
    ASSERT_TRUE(waitReady()) << m_window->engine()->lastError().toStdString();
    EXPECT_FALSE(m_window->banner()->isVisible());  // the fixture is not a demo model
    ASSERT_TRUE(sendAndWait(QStringLiteral("Hello there")));
    const qint64 worst = meter.worstMs();

    const MessageModel* msgs = m_window->messages();
    EXPECT_EQ(msgs->at(0).role, QStringLiteral("user"));
    EXPECT_EQ(msgs->at(0).content, QStringLiteral("Hello there"));
    EXPECT_TRUE(m_window->input()->toPlainText().isEmpty());
    const ChatMessage reply = msgs->at(1);
    EXPECT_EQ(reply.role, QStringLiteral("assistant"));
    EXPECT_TRUE(reply.content.startsWith(QStringLiteral("Here is code:")))
        << reply.content.toStdString();
    EXPECT_EQ(reply.reasoning, QStringLiteral("Short thought."));
    EXPECT_GT(reply.stats.value(QStringLiteral("tokens")).toInt(), 0);
    EXPECT_GT(reply.id, 0);

    // Shown: the code block in a fixed-pitch font, the stats line, "Thought for".
    MessageWidget* w = m_window->chatView()->messageWidget(1);
    ASSERT_NE(w, nullptr);
    EXPECT_NE(w->body()->toHtml().indexOf(QStringLiteral("int x = 1;")), -1);
    EXPECT_NE(w->body()->toHtml().indexOf(QStringLiteral("monospace")), -1);
    EXPECT_GT(w->body()->height(), 2 * w->body()->fontMetrics().height());  // sized to its text

    // Committed to the file (a second connection sees it).
    ConversationStore other;
    ASSERT_TRUE(other.open(m_dir.filePath(QStringLiteral("conversations.sqlite"))));
    const auto convs = other.conversations();
    ASSERT_EQ(convs.size(), 1);
    EXPECT_EQ(convs[0].title, QStringLiteral("Hello there"));
    const auto stored = other.messages(convs[0].id);
    ASSERT_EQ(stored.size(), 2);
    EXPECT_EQ(stored[1].content, reply.content);
    EXPECT_EQ(stored[1].reasoning, reply.reasoning);
    EXPECT_GT(stored[1].stats.value(QStringLiteral("tokens_per_second")).toDouble(), 0.0);

    // Reported, not asserted: a wall-clock bound fails on a loaded machine whatever the code
    // does (docs/DESKTOP.md has the figures measured on an idle one).
    std::printf("[ measure  ] worst GUI stall during load + generation: %lld ms (at %lld ms)\n",
                static_cast<long long>(worst), static_cast<long long>(meter.worstAtMs()));
}

TEST_F(MainWindowTest, ClosingTheAppWhileAReplyStreamsEndsCleanly) {
    // Quitting mid-reply (or a test that gives up waiting) destroys the window, the engine host
    // and its engine thread while the turn runs: the turn is cancelled, nothing is delivered to
    // the destroyed widgets, and the reply streamed so far is kept.
    appSettings()->setValue(QStringLiteral("chat/maxTokens"), 2000);
    ASSERT_TRUE(waitReady()) << m_window->engine()->lastError().toStdString();
    m_window->input()->setFocus();
    QTest::keyClicks(m_window->input(), QStringLiteral("Hello there"));
    QTest::keyClick(m_window->input(), Qt::Key_Return);
    ASSERT_TRUE(spinUntil([&] { return m_window->engine()->busy(); }));
    test::spinFor(300);  // some deltas delivered, the turn still running
    m_window.reset();
    test::spinFor(200);  // queued deliveries of the dead window's turn must find nobody
    ConversationStore other;
    ASSERT_TRUE(other.open(m_dir.filePath(QStringLiteral("conversations.sqlite"))));
    const auto convs = other.conversations();
    ASSERT_EQ(convs.size(), 1);
    EXPECT_GE(other.messages(convs[0].id).size(), 1u);  // the user's message at least
}

TEST_F(MainWindowTest, RegenerateAndEditReplaceTheTail) {
    ASSERT_TRUE(waitReady());
    ASSERT_TRUE(sendAndWait(QStringLiteral("first question")));
    ASSERT_TRUE(sendAndWait(QStringLiteral("second question")));
    ASSERT_EQ(m_window->messages()->rowCount(), 4);
    const qint64 conv = m_window->currentConversation();
    const qint64 oldReplyId = m_window->messages()->at(3).id;

    m_window->regenerate(3);
    ASSERT_TRUE(spinUntil([&] {
        return !m_window->engine()->busy() && m_window->messages()->rowCount() == 4 &&
               !m_window->messages()->isStreaming();
    }));
    // The same message with a second version.
    EXPECT_EQ(m_window->messages()->at(3).id, oldReplyId);
    EXPECT_EQ(m_window->messages()->at(3).versions.size(), 2);
    EXPECT_EQ(m_window->store().messages(conv).size(), 4);

    m_window->editMessage(0, QStringLiteral("edited question"));
    ASSERT_TRUE(spinUntil([&] {
        return !m_window->engine()->busy() && m_window->messages()->rowCount() == 2 &&
               !m_window->messages()->isStreaming();
    }));
    const auto stored = m_window->store().messages(conv);
    ASSERT_EQ(stored.size(), 2);
    EXPECT_EQ(stored[0].content, QStringLiteral("edited question"));
    EXPECT_EQ(stored[1].role, QStringLiteral("assistant"));

    QTemporaryDir out;
    EXPECT_TRUE(m_window->exportConversation(out.filePath(QStringLiteral("c.md")), false));
    EXPECT_TRUE(m_window->exportConversation(out.filePath(QStringLiteral("c.json")), true));
    EXPECT_GT(QFileInfo(out.filePath(QStringLiteral("c.json"))).size(), 10);
}

TEST_F(MainWindowTest, TheWindowToggleStartsAndStopsTheApiServer) {
    ASSERT_TRUE(waitReady());
    appSettings()->setValue(QStringLiteral("server/port"), 0);  // any free port
    QPushButton* toggle = m_window->serverButton();
    ASSERT_TRUE(toggle->isVisible());  // no tray in this test: the controls are in the window
    QTest::mouseClick(toggle, Qt::LeftButton);
    ASSERT_TRUE(m_window->server()->isRunning()) << m_window->server()->lastError().toStdString();
    const QString url = m_window->server()->url();
    EXPECT_TRUE(url.startsWith(QStringLiteral("http://127.0.0.1:")));

    QNetworkAccessManager nam;
    auto get = [&](const QString& path) {
        QNetworkReply* reply = nam.get(QNetworkRequest(QUrl(url.chopped(3) + path)));
        spinUntil([&] { return reply->isFinished(); }, 10000);
        const int status = reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
        const auto error = reply->error();
        reply->deleteLater();
        return std::pair{status, error};
    };
    EXPECT_EQ(get(QStringLiteral("/health")).first, 200);
    EXPECT_EQ(get(QStringLiteral("/v1/models")).first, 200);

    QTest::mouseClick(toggle, Qt::LeftButton);
    EXPECT_FALSE(m_window->server()->isRunning());
    EXPECT_EQ(get(QStringLiteral("/health")).second, QNetworkReply::ConnectionRefusedError);
}

TEST_F(MainWindowTest, TelemetryDockReadsTheEngineRingsAndExportsCsv) {
    ASSERT_TRUE(waitReady());
    ASSERT_TRUE(sendAndWait(QStringLiteral("count the tokens")));
    TelemetryDock* dock = m_window->telemetry();
    dock->poll();
    const int tokens = m_window->messages()->at(1).stats.value(QStringLiteral("tokens")).toInt();
    ASSERT_GT(tokens, 1);
    // One record per decode step: the first token comes from the prompt pass (its time is the
    // TTFT), so a reply of N tokens has N - 1 token records.
    EXPECT_EQ(static_cast<int>(dock->tokens().size()), tokens - 1);
    EXPECT_NE(dock->lastRequestSummary().indexOf(QStringLiteral("%1 tokens at").arg(tokens)), -1)
        << dock->lastRequestSummary().toStdString();
    dock->poll();  // nothing new: nothing read twice
    EXPECT_EQ(static_cast<int>(dock->tokens().size()), tokens - 1);

    QTemporaryDir out;
    const QString csv = out.filePath(QStringLiteral("t.csv"));
    ASSERT_TRUE(dock->exportCsv(csv));
    QFile f(csv);
    ASSERT_TRUE(f.open(QIODevice::ReadOnly));
    const QList<QByteArray> lines = f.readAll().trimmed().split('\n');
    ASSERT_EQ(lines.size(), tokens);  // header + N - 1 records
    EXPECT_TRUE(lines[0].startsWith("request,index,wall_ns"));
    EXPECT_FALSE(dock->exportCsv(out.filePath(QStringLiteral("no/such/dir/t.csv"))));
}

TEST(DemoModel, IsCreatedOnFirstUseAndTheBannerSaysItsWeightsAreRandom) {
    // The demo model is made from the fixture's tokenizer here (setup.sh installs the real one).
    qputenv(
        "NEURAL_DEMO_TOKENIZER",
        QByteArray::fromStdString((neural::test::tiny_model_dir() / "tokenizer.json").string()));
    QTemporaryDir dir;
    MainWindow w(test::windowOptions(dir));  // no model set up: the demo model, without asking
    w.show();
    ASSERT_TRUE(
        spinUntil([&] { return w.engine()->state() != EngineHost::State::loading; }, 120000));
    ASSERT_EQ(w.engine()->state(), EngineHost::State::ready)
        << w.engine()->lastError().toStdString();
    EXPECT_TRUE(w.engine()->isDemo());
    EXPECT_EQ(w.engine()->modelDir(), demoModelDir());
    EXPECT_TRUE(w.banner()->isVisible());
    EXPECT_NE(w.banner()->text().indexOf(QStringLiteral("random")), -1);
    // It runs as a set-up model does, with its expert store (made with it): without one it
    // decoded at a tenth of the store's speed.
    EXPECT_TRUE(QFileInfo::exists(
        QString::fromStdString(demoStorePath(demoModelDir().toStdString()).string())));
    ASSERT_NE(w.engine()->model(), nullptr);
    EXPECT_NE(w.engine()->model()->store(), nullptr);
    EXPECT_NE(w.engine()->modelSummary().indexOf(QStringLiteral("experts from a store")), -1);
}

TEST(BadModel, TheWindowSaysWhyAndOffersTheWizardWithoutBlocking) {
    QTemporaryDir dir;
    const MainWindow::Options o =
        test::windowOptions(dir, dir.filePath(QStringLiteral("not-a-model")));
    QDir().mkpath(o.modelDir);
    MainWindow w(o);
    w.show();
    QMessageBox* box = nullptr;
    ASSERT_TRUE(spinUntil([&] { return (box = w.findChild<QMessageBox*>()) != nullptr; }, 20000));
    EXPECT_EQ(w.engine()->state(), EngineHost::State::failed);
    EXPECT_NE(box->informativeText().indexOf(QStringLiteral("config.json")), -1)
        << box->informativeText().toStdString();
    // The event loop runs on (this spin would hang behind an exec()'d dialog), and sending is
    // refused without a model.
    w.input()->setPlainText(QStringLiteral("hello?"));
    w.sendMessage();
    EXPECT_EQ(w.messages()->rowCount(), 0);
    box->close();
}

TEST(Logging, SpdlogLinesReachThePanelAndTheRotatingFile) {
    QTemporaryDir dir;
    const QString file = dir.filePath(QStringLiteral("neural-desktop.log"));
    ASSERT_EQ(installLogging(file), file);
    QStringList lines;
    auto c =
        QObject::connect(&LogHub::instance(), &LogHub::line, [&](const QString& l) { lines << l; });
    spdlog::info("hello from the gui log test");
    qWarning("a Qt warning");
    EXPECT_TRUE(spinUntil([&] { return lines.size() >= 2; }, 5000));
    QObject::disconnect(c);
    EXPECT_NE(lines.join(QLatin1Char('\n')).indexOf(QStringLiteral("hello from the gui log test")),
              -1);
    EXPECT_NE(lines.join(QLatin1Char('\n')).indexOf(QStringLiteral("a Qt warning")), -1);
    // In the file at once, without a flush or the app's exit (a crash must not lose it).
    QFile f(file);
    ASSERT_TRUE(f.open(QIODevice::ReadOnly));
    EXPECT_TRUE(f.readAll().contains("hello from the gui log test"));
    qInstallMessageHandler(nullptr);
}

// The wheel over a spin box or combo box changed its value while the page scrolled (the fit
// page's CPU threads went 1 -> 0): unfocused, they leave the wheel to the page.
TEST(WheelGuard, UnfocusedSpinAndComboBoxesKeepTheirValues) {
    installWheelGuard();
    QScrollArea area;
    auto* page = new QWidget;
    auto* v = new QVBoxLayout(page);
    auto* spin = new QSpinBox;
    spin->setRange(0, 64);
    spin->setValue(1);
    auto* combo = new QComboBox;
    combo->addItems({QStringLiteral("a"), QStringLiteral("b"), QStringLiteral("c")});
    combo->setCurrentIndex(1);
    auto* other = new QSpinBox;
    v->addWidget(spin);
    v->addWidget(combo);
    v->addWidget(other);
    area.setWidget(page);
    area.show();
    area.activateWindow();
    other->setFocus();
    spinUntil([&] { return other->hasFocus(); }, 2000);
    EXPECT_EQ(spin->focusPolicy(), Qt::StrongFocus);  // a wheel turn gives no focus either
    EXPECT_EQ(combo->focusPolicy(), Qt::StrongFocus);
    const auto turn = [](QWidget* w, int dy) {
        const QPointF at(w->width() / 2.0, w->height() / 2.0);
        QWheelEvent e(at, w->mapToGlobal(at), QPoint(), QPoint(0, dy), Qt::NoButton, Qt::NoModifier,
                      Qt::NoScrollPhase, false);
        QApplication::sendEvent(w, &e);
    };
    turn(spin, -120);
    turn(combo, 120);
    EXPECT_EQ(spin->value(), 1);
    EXPECT_EQ(combo->currentIndex(), 1);
    // Focused, the wheel is theirs.
    spin->setFocus();
    ASSERT_TRUE(spinUntil([&] { return spin->hasFocus(); }, 2000));
    turn(spin, -120);
    EXPECT_EQ(spin->value(), 0);
}

// F1 did nothing ("Unable to detect a launcher for ...DESKTOP.md"): the guide opens in the app's
// own viewer from resources compiled in, with its images, and its links between pages work.
TEST_F(MainWindowTest, F1OpensTheUserGuideInTheApp) {
    QAction* guide = nullptr;
    for (QAction* menu : m_window->menuBar()->actions())
        if (menu->menu())
            for (QAction* a : menu->menu()->actions())
                if (a->shortcuts().contains(QKeySequence(QKeySequence::HelpContents))) guide = a;
    ASSERT_NE(guide, nullptr);
    guide->trigger();
    GuideViewer* viewer = m_window->guide();
    ASSERT_NE(viewer, nullptr);
    EXPECT_TRUE(viewer->isVisible());
    EXPECT_TRUE(viewer->browser()->toPlainText().startsWith(QStringLiteral("neural-desktop")))
        << viewer->browser()->toPlainText().left(80).toStdString();
    EXPECT_TRUE(QFileInfo::exists(QStringLiteral(":/guide/images/main.png")));
    const QVariant image = viewer->browser()->loadResource(QTextDocument::ImageResource,
                                                           QUrl(QStringLiteral("images/main.png")));
    EXPECT_FALSE(image.isNull());
    emit viewer->browser()->anchorClicked(QUrl(QStringLiteral("USER_GUIDE.md")));
    EXPECT_TRUE(viewer->browser()->toPlainText().startsWith(QStringLiteral("User guide")));
    EXPECT_FALSE(viewer->showPage(QStringLiteral("NO_SUCH_PAGE.md")));
    guide->trigger();  // one viewer at a time
    EXPECT_EQ(m_window->findChildren<GuideViewer*>().size(), 1);
}

TEST(ChatInput, EnterSendsShiftEnterAddsALineEscStops) {
    ChatInput input;
    input.show();
    QSignalSpy send(&input, &ChatInput::sendRequested);
    QSignalSpy stop(&input, &ChatInput::stopRequested);
    QTest::keyClicks(&input, QStringLiteral("line one"));
    QTest::keyClick(&input, Qt::Key_Return, Qt::ShiftModifier);
    QTest::keyClicks(&input, QStringLiteral("line two"));
    EXPECT_EQ(send.count(), 0);
    EXPECT_EQ(input.toPlainText(), QStringLiteral("line one\nline two"));
    QTest::keyClick(&input, Qt::Key_Return);
    EXPECT_EQ(send.count(), 1);
    QTest::keyClick(&input, Qt::Key_Enter);  // keypad Enter too
    EXPECT_EQ(send.count(), 2);
    QTest::keyClick(&input, Qt::Key_Escape);
    EXPECT_EQ(stop.count(), 1);
    EXPECT_EQ(input.toPlainText(),
              QStringLiteral("line one\nline two"));  // sending clears elsewhere
}

TEST(Markdown, CodeIsMonospacedAndCodeBlocksCanBeCopied) {
    const QString md =
        QStringLiteral("Use `ls`:\n\n```sh\nls -l\necho hi\n```\n\nand\n\n~~~\nx = 1\n~~~\n");
    const QString html = markdownToHtml(md, QApplication::palette());
    EXPECT_NE(html.indexOf(QStringLiteral("monospace")), -1);
    EXPECT_NE(html.indexOf(QStringLiteral("ls -l")), -1);
    const QStringList blocks = codeBlocks(md);
    ASSERT_EQ(blocks.size(), 2);
    EXPECT_EQ(blocks[0], QStringLiteral("ls -l\necho hi"));
    EXPECT_EQ(blocks[1], QStringLiteral("x = 1"));
    EXPECT_TRUE(codeBlocks(QStringLiteral("no code here")).isEmpty());
}

}  // namespace
}  // namespace neural::gui
