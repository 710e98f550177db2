// The window around the chat, offscreen on the tiny fixture: the layout, the open conversation,
// its scroll position and the API state survive a restart of the window; the conversation list
// (no rows for untouched New conversations, plain-text titles that follow an edit, elided titles
// with dates, the Delete key with a confirmation, rows that stay put while a send re-sorts,
// switching conversations while a reply streams); the persistent CPU team's failure in the
// status bar; each API request once in the Logs dock; the telemetry dock's width and tabs.
#include <gtest/gtest.h>

#include <QApplication>
#include <QCheckBox>
#include <QLineEdit>
#include <QSpinBox>
#include <QComboBox>
#include <QDockWidget>
#include <QDirIterator>
#include <QStandardItemModel>
#include <QFileInfo>
#include <QMessageBox>
#include <QLabel>
#include <QChart>
#include <QLineSeries>
#include <QValueAxis>
#include <QListView>
#include <QMenuBar>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QScrollBar>
#include <QSplitter>
#include <QTabBar>
#include <QTabWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QTimer>

#include <atomic>
#include <chrono>
#include <thread>

#include "app/applog.h"
#include "app/discovery.h"
#include "generationqueue.h"
#include "app/mainwindow.h"
#include "common/paths.h"
#include "conversation/chatinput.h"
#include "conversation/chatview.h"
#include "conversation/conversationmodel.h"
#include "conversation/settingspanel.h"
#include "fixture_window.h"
#include "doc_shot.h"
#include "gui_test_support.h"
#include "monitor/telemetrydock.h"
#include "settings/appsettingsdialog.h"
#include "neural/version.h"
#include "support/fixtures.h"
#include "tray/servercontrol.h"
#include "wizard/checkpointcheck.h"

namespace neural::gui {
namespace {

using test::fixtureDir;
using test::fixtureWindowOptions;
using test::sendAndWait;
using test::showUntilReady;
using test::spinUntil;
using test::windowOptions;

// Answers the next message box with `button` once it is open (QMessageBox::question runs its own
// event loop).
void answerNextBox(QMessageBox::StandardButton button, bool* seen = nullptr) {
    auto* poll = new QTimer;
    poll->setInterval(20);
    QObject::connect(poll, &QTimer::timeout, poll, [poll, button, seen] {
        if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
            if (seen) *seen = true;
            box->button(button)->click();
            poll->deleteLater();
        }
    });
    poll->start();
}

class DesktopTest : public test::WindowTest {
protected:
    DesktopTest() : WindowTest(12) {}
    void restart() {
        m_window.reset();  // as when the app quits: the window's state is saved
        open();
    }
    QStringList titles() {
        QStringList t;
        for (const ConversationInfo& c : m_window->store().conversations()) t << c.title;
        return t;
    }
};

TEST_F(DesktopTest, LayoutOpenConversationScrollAndApiSurviveARestart) {
    ASSERT_TRUE(send(QStringLiteral("first conversation")));
    const qint64 first = m_window->currentConversation();
    m_window->newConversation();
    QString longText;
    for (int i = 0; i < 80; ++i) longText += QStringLiteral("line %1 of a long message\n\n").arg(i);
    ASSERT_TRUE(send(longText));
    const qint64 second = m_window->currentConversation();
    ASSERT_NE(first, second);

    m_window->resize(910, 560);
    m_window->telemetry()->show();
    QTest::qWait(50);
    // What the platform made of it (a wider minimum with another font, say) must come back.
    const QSize size = m_window->size();
    m_window->splitter()->setSizes({333, 500});
    const QList<int> sizes = m_window->splitter()->sizes();
    appSettings()->setValue(QStringLiteral("server/port"), 0);
    m_window->toggleServer();
    ASSERT_TRUE(m_window->server()->isRunning());
    QScrollBar* bar = m_window->chatView()->verticalScrollBar();
    ASSERT_TRUE(spinUntil([&] { return bar->maximum() > 200; }, 10000)) << bar->maximum();
    bar->setValue(bar->maximum() / 2);
    const int scroll = bar->value();
    QTest::qWait(50);

    restart();
    EXPECT_EQ(m_window->size(), size);
    EXPECT_TRUE(m_window->telemetry()->isVisible());
    EXPECT_EQ(m_window->splitter()->sizes().value(0), sizes.value(0));
    EXPECT_EQ(m_window->currentConversation(), second);  // not the list's first row by default
    EXPECT_TRUE(spinUntil(
        [&] { return m_window->chatView()->verticalScrollBar()->value() == scroll; }, 10000))
        << m_window->chatView()->verticalScrollBar()->value() << " != " << scroll;
    EXPECT_TRUE(spinUntil([&] { return m_window->server()->isRunning(); }, 10000));

    // Stopped before quitting: it stays off at the next start.
    m_window->toggleServer();
    restart();
    QTest::qWait(100);
    EXPECT_FALSE(m_window->server()->isRunning());
}

TEST_F(DesktopTest, AnUntouchedNewConversationStoresNoRow) {
    m_window->newConversation();
    m_window->newConversation();
    EXPECT_TRUE(m_window->store().conversations().isEmpty());
    EXPECT_EQ(m_window->conversations()->rowCount(), 0);
    ASSERT_TRUE(send(QStringLiteral("now it counts")));
    EXPECT_EQ(m_window->store().conversations().size(), 1);
    m_window->newConversation();
    restart();
    EXPECT_EQ(m_window->store().conversations().size(), 1);
}

// The list shows what the user wrote: "6*7" is not emphasis (it was listed as "67").
TEST_F(DesktopTest, ATitleKeepsTheUsersAsterisks) {
    ASSERT_TRUE(send(QStringLiteral("What is 6*7?")));
    EXPECT_EQ(titles(), QStringList{QStringLiteral("What is 6*7?")});
    EXPECT_EQ(m_window->conversations()
                  ->data(m_window->conversations()->index(0), Qt::DisplayRole)
                  .toString(),
              QStringLiteral("What is 6*7?"));
}

TEST_F(DesktopTest, TitlesArePlainTextAndFollowAnEditOfTheFirstMessage) {
    ASSERT_TRUE(
        send(QStringLiteral("## Make a *plan* for [Rust](https://rust-lang.org) and `cargo`")));
    EXPECT_EQ(titles(), QStringList{QStringLiteral("Make a plan for Rust and cargo")});
    m_window->editMessage(0, QStringLiteral("**Second** try"));
    ASSERT_TRUE(idle());
    EXPECT_EQ(titles(), QStringList{QStringLiteral("Second try")});
    EXPECT_EQ(m_window->conversations()
                  ->data(m_window->conversations()->index(0), Qt::DisplayRole)
                  .toString(),
              QStringLiteral("Second try"));
    // A title the user chose stays.
    ASSERT_TRUE(m_window->store().renameConversation(m_window->currentConversation(),
                                                     QStringLiteral("Mine")));
    m_window->editMessage(0, QStringLiteral("third try"));
    ASSERT_TRUE(idle());
    EXPECT_EQ(titles(), QStringList{QStringLiteral("Mine")});
}

TEST(ConversationTitle, FromMarkdownToOneLineOfWords) {
    EXPECT_EQ(ConversationModel::titleFromMessage(QStringLiteral("> quoted **bold** _it_\n- item")),
              QStringLiteral("quoted bold it item"));
    EXPECT_EQ(ConversationModel::titleFromMessage(QStringLiteral("```python\nprint(1)\n```")),
              QStringLiteral("print(1)"));
    EXPECT_EQ(ConversationModel::titleFromMessage(QStringLiteral("![logo](a.png) | a | b |")),
              QStringLiteral("logo a b"));
    EXPECT_EQ(ConversationModel::titleFromMessage(QStringLiteral("***\n\n")), QString());
    EXPECT_EQ(ConversationModel::titleFromMessage(QStringLiteral("rename __init__ in my_module")),
              QStringLiteral("rename init in my_module"));
    const QString t = ConversationModel::titleFromMessage(
        QString(40, QLatin1Char('w')) + QStringLiteral(" word") + QString(100, QLatin1Char('x')));
    EXPECT_LE(t.size(), 61);
    EXPECT_TRUE(t.endsWith(QChar(0x2026)));
}

// Only marks that pair up around text are Markdown; a lone or in-word `*` is the user's text.
TEST(ConversationTitle, KeepsAsterisksThatAreNotEmphasis) {
    auto title = [](const char* text) {
        return ConversationModel::titleFromMessage(QString::fromUtf8(text));
    };
    EXPECT_EQ(title("What is 6*7?"), QStringLiteral("What is 6*7?"));
    EXPECT_EQ(title("What is 6*7? And 8*9?"), QStringLiteral("What is 6*7? And 8*9?"));
    EXPECT_EQ(title("2*3*4"), QStringLiteral("2*3*4"));
    EXPECT_EQ(title("a * b * c"), QStringLiteral("a * b * c"));
    EXPECT_EQ(title("glob *.txt and *.md"), QStringLiteral("glob *.txt and *.md"));
    EXPECT_EQ(title("**6*7** please"), QStringLiteral("6*7 please"));
    EXPECT_EQ(title("*Really*: what is 6*7?"), QStringLiteral("Really: what is 6*7?"));
    EXPECT_EQ(title("***both*** and ~~gone~~ and `x*y`"), QStringLiteral("both and gone and x*y"));
    EXPECT_EQ(title("**_nested_** emphasis"), QStringLiteral("nested emphasis"));
    EXPECT_EQ(title("keep snake_case_name and __dunder__"),
              QStringLiteral("keep snake_case_name and dunder"));
}

TEST(ConversationDate, ShortAndRelativeToNow) {
    const QDateTime now(QDate(2026, 12, 1), QTime(15, 0));
    EXPECT_EQ(ConversationModel::shortDate(now.addDays(-1), now), QStringLiteral("Yesterday"));
    EXPECT_EQ(ConversationModel::shortDate(QDateTime(QDate(2024, 3, 5), QTime(9, 0)), now),
              QStringLiteral("2024-03-05"));
    EXPECT_FALSE(ConversationModel::shortDate(now.addSecs(-60), now).isEmpty());
    EXPECT_NE(ConversationModel::shortDate(now.addDays(-30), now), QStringLiteral("2026-11-01"));
}

TEST_F(DesktopTest, LongTitlesElideAndEveryRowShowsItsDate) {
    ASSERT_TRUE(send(QString(300, QLatin1Char('a')) + QStringLiteral(" long title")));
    QListView* list = m_window->conversationList();
    list->resize(200, 300);
    QTest::qWait(50);
    EXPECT_EQ(list->horizontalScrollBar()->maximum(), 0);  // no sideways scrolling
    const QModelIndex row = m_window->conversations()->index(0);
    EXPECT_LE(list->visualRect(row).width(), list->viewport()->width());
    EXPECT_FALSE(row.data(ConversationModel::DateRole).toString().isEmpty());
    EXPECT_NE(row.data(Qt::AccessibleTextRole)
                  .toString()
                  .indexOf(row.data(ConversationModel::DateRole).toString()),
              -1);
}

TEST_F(DesktopTest, TheDeleteKeyAsksAndDeletes) {
    ASSERT_TRUE(send(QStringLiteral("keep me")));
    m_window->activateWindow();
    ASSERT_TRUE(QTest::qWaitForWindowActive(m_window.get()));
    QListView* list = m_window->conversationList();
    list->setFocus();
    list->setCurrentIndex(m_window->conversations()->index(0));
    bool asked = false;
    answerNextBox(QMessageBox::No, &asked);
    QTest::keyClick(list, Qt::Key_Delete);
    EXPECT_TRUE(asked);
    EXPECT_EQ(m_window->store().conversations().size(), 1);

    // Back to the window once the box is gone (the offscreen platform does not re-activate it).
    m_window->activateWindow();
    ASSERT_TRUE(QTest::qWaitForWindowActive(m_window.get()));
    list->setFocus();
    asked = false;
    answerNextBox(QMessageBox::Yes, &asked);
    QTest::keyClick(list, Qt::Key_Delete);
    EXPECT_TRUE(asked);
    EXPECT_TRUE(m_window->store().conversations().isEmpty());
    EXPECT_EQ(m_window->conversations()->rowCount(), 0);
    EXPECT_EQ(m_window->currentConversation(), 0);
}

TEST_F(DesktopTest, RowsStayUnderTheMouseWhileASendResortsThem) {
    ASSERT_TRUE(send(QStringLiteral("older")));
    const qint64 older = m_window->currentConversation();
    m_window->newConversation();
    ASSERT_TRUE(send(QStringLiteral("newer")));
    ASSERT_EQ(m_window->conversations()->rowOf(older), 1);
    m_window->selectConversation(older);
    ASSERT_TRUE(send(QStringLiteral("the older one gets a new message")));
    // Now the most recent in the file, but its row did not jump to the top.
    EXPECT_EQ(m_window->store().conversations().first().id, older);
    EXPECT_EQ(m_window->conversations()->rowOf(older), 1);
    EXPECT_EQ(m_window->conversationList()->currentIndex().row(), 1);
}

TEST_F(DesktopTest, AnotherConversationOpensWhileAReplyStreams) {
    ASSERT_TRUE(send(QStringLiteral("other")));
    // A reply that goes on after its forced start (no end token): 200 tokens.
    appSettings()->setValue(QStringLiteral("chat/maxTokens"), 200);
    m_window->engine()->setForcedOutput(QStringLiteral("<|channel|>final<|message|>Long: "));
    const qint64 other = m_window->currentConversation();
    m_window->newConversation();
    m_window->input()->setPlainText(QStringLiteral("a long reply please"));
    m_window->sendMessage();
    const qint64 streaming = m_window->currentConversation();
    ASSERT_TRUE(m_window->engine()->busy());
    m_window->selectConversation(other);  // no event processed yet: still streaming
    EXPECT_EQ(m_window->currentConversation(), other);
    ASSERT_EQ(m_window->messages()->rowCount(), 2);
    EXPECT_FALSE(m_window->messages()->isStreaming());
    EXPECT_EQ(m_window->messages()->at(0).content, QStringLiteral("other"));

    m_window->selectConversation(streaming);  // back: what streamed so far, then the rest
    EXPECT_EQ(m_window->currentConversation(), streaming);
    EXPECT_TRUE(m_window->messages()->isStreaming() || !m_window->engine()->busy());
    m_window->selectConversation(other);
    ASSERT_TRUE(spinUntil([&] { return !m_window->engine()->busy(); }));
    // The reply went to its own conversation, not into the open one.
    EXPECT_EQ(m_window->store().messages(streaming).size(), 2);
    EXPECT_EQ(m_window->store().messages(other).size(), 2);
    EXPECT_EQ(m_window->messages()->rowCount(), 2);
    m_window->selectConversation(streaming);
    ASSERT_EQ(m_window->messages()->rowCount(), 2);
    EXPECT_FALSE(m_window->messages()->at(1).content.isEmpty());
}

TEST_F(DesktopTest, TelemetryDockKeepsItsWidthAndShowsEveryTab) {
    TelemetryDock* dock = m_window->telemetry();
    dock->show();
    QTest::qWait(100);
    const int width = dock->width();
    ASSERT_TRUE(send(QStringLiteral("fill the summary")));
    dock->poll();
    QTest::qWait(100);
    EXPECT_NE(dock->lastRequestSummary().indexOf(QStringLiteral("tokens at")), -1);
    EXPECT_EQ(dock->width(), width);  // the summary wraps; the chat keeps its room
    QTabBar* bar = dock->tabs()->tabBar();
    for (int i = 0; i < bar->count(); ++i)
        EXPECT_GE(bar->tabRect(i).width(), bar->fontMetrics().horizontalAdvance(bar->tabText(i)))
            << bar->tabText(i).toStdString();
    EXPECT_LE(bar->sizeHint().width(), dock->tabs()->width());
    // The CPU backend uses no VRAM: no empty VRAM line.
    EXPECT_FALSE(dock->showsVram());
}

// The docked telemetry said "No request yet." after replies and kept its axes at old peaks (1025
// tok/s while the data sat near 100): the summary follows the timer's polls and the value axis
// the points in view.
TEST_F(DesktopTest, TelemetryFollowsTheRepliesAndTheVisibleWindow) {
    TelemetryDock* dock = m_window->telemetry();
    dock->show();
    ASSERT_TRUE(send(QStringLiteral("one")));
    ASSERT_TRUE(send(QStringLiteral("two")));
    EXPECT_TRUE(spinUntil(
        [&] { return dock->summaryLabel()->text().startsWith(QStringLiteral("Last request")); },
        3000))
        << dock->summaryLabel()->text().toStdString();
    EXPECT_LE(dock->speedAxis()->labelFormat().size(), 4);  // "%.0f", "%.1f": short labels

    QLineSeries line;
    QValueAxis x, y;
    QChart chart;
    chart.addAxis(&x, Qt::AlignBottom);
    chart.addAxis(&y, Qt::AlignLeft);
    chart.addSeries(&line);
    line.attachAxis(&x);
    line.attachAxis(&y);
    TelemetryDock::addPoint(&line, &x, &y, 0, 1025, 300);
    EXPECT_GE(y.max(), 1025);
    for (int i = 1; i <= 300; ++i) TelemetryDock::addPoint(&line, &x, &y, i, 96 + i % 7, 300);
    EXPECT_GE(y.max(), 102);
    EXPECT_LE(y.max(), 150) << "the old peak scrolled out; the axis stays at " << y.max();
    EXPECT_EQ(x.min(), 1);
    chart.removeSeries(&line);
    chart.removeAxis(&x);
    chart.removeAxis(&y);
    EXPECT_EQ(niceAxisMax(96), 150);
    EXPECT_EQ(niceAxisMax(0.044), 0.05);
    EXPECT_EQ(niceAxisMax(0), 1);
}

// A chat reply queued behind an API request said only "waiting for the first token ..." for
// 42 s: it says it waits for the API server and how many requests are ahead.
TEST_F(DesktopTest, AReplyQueuedBehindApiRequestsSaysHowManyAreAhead) {
    std::atomic<bool> release{false};
    auto job = std::make_shared<host::GenerationJob>();
    job->kind = host::GenerationJob::Kind::task;
    job->task = [&release](const std::atomic<bool>& cancel) {
        while (!release && !cancel) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    };
    job->receiver = m_window.get();
    ASSERT_TRUE(m_window->engine()->queue()->enqueue(job));
    m_window->input()->setPlainText(QStringLiteral("behind the API"));
    m_window->sendMessage();
    ASSERT_TRUE(m_window->messages()->isStreaming());
    const auto stats = [&] {
        MessageWidget* w = m_window->chatView()->messageWidget(1);
        return w ? w->statsLabel()->text() : QString();
    };
    EXPECT_TRUE(
        spinUntil([&] { return stats().contains(QStringLiteral("1 request ahead")); }, 3000))
        << stats().toStdString();
    EXPECT_TRUE(stats().contains(QStringLiteral("API server"))) << stats().toStdString();
    release = true;
    ASSERT_TRUE(idle());
    EXPECT_EQ(m_window->messages()->rowCount(), 2);
    EXPECT_FALSE(stats().contains(QStringLiteral("waiting"))) << stats().toStdString();
}

TEST_F(DesktopTest, EachApiRequestIsLoggedOnce) {
    installLogging(QString());
    QStringList lines;
    auto c =
        QObject::connect(&LogHub::instance(), &LogHub::line, [&](const QString& l) { lines << l; });
    appSettings()->setValue(QStringLiteral("server/port"), 0);
    m_window->toggleServer();
    ASSERT_TRUE(m_window->server()->isRunning());
    QNetworkAccessManager nam;
    QNetworkReply* reply = nam.get(
        QNetworkRequest(QUrl(m_window->server()->url().chopped(3) + QStringLiteral("/health"))));
    ASSERT_TRUE(spinUntil([&] { return reply->isFinished(); }, 10000));
    reply->deleteLater();
    spinUntil([&] { return lines.filter(QStringLiteral("/health")).size() >= 2; }, 500);
    QObject::disconnect(c);
    qInstallMessageHandler(nullptr);
    EXPECT_EQ(lines.filter(QStringLiteral("/health")).size(), 1)
        << lines.join(QLatin1Char('\n')).toStdString();
}

// Qt's "OpenType support missing" notices (one per font and script of a random-weight reply)
// flooded the log: one line says what they mean, the notices themselves stay out of it.
TEST(Logging, FontNoticesDoNotFloodTheLog) {
    installLogging(QString());
    QStringList lines;
    auto c =
        QObject::connect(&LogHub::instance(), &LogHub::line, [&](const QString& l) { lines << l; });
    for (int script = 0; script < 40; ++script)
        qWarning("  OpenType support missing for \"DejaVu Sans\", script %d",
                 script);  // as Qt writes it
    qWarning("a real warning");
    spinUntil([&] { return lines.size() >= 2; }, 2000);
    test::spinFor(50);
    QObject::disconnect(c);
    qInstallMessageHandler(nullptr);
    EXPECT_EQ(lines.filter(QStringLiteral("OpenType")).size(), 0)
        << lines.join(QLatin1Char('\n')).toStdString();
    EXPECT_EQ(lines.filter(QStringLiteral("fonts do not cover")).size(), 1);
    EXPECT_EQ(lines.filter(QStringLiteral("a real warning")).size(), 1);
}

// A profile that asks for the persistent CPU team whose library cannot be loaded: the status bar
// says so instead of "Ready".
TEST(PersistentTeam, AFailureToLoadItShowsInTheStatusBar) {
    QTemporaryDir dir;
    const QString store = dir.filePath(QStringLiteral("tiny.nstore"));
    StoreJob job;
    bool done = false, ok = false;
    QObject::connect(&job, &StoreJob::finished, [&](bool success, bool, const QString&) {
        done = true;
        ok = success;
    });
    job.startRepack(fixtureDir(), store, QStringLiteral("raw"));
    ASSERT_TRUE(spinUntil([&] { return done; }, 60000));
    ASSERT_TRUE(ok);
    Profile p = Profile::stock();
    p.name = QStringLiteral("Team");
    p.modelDir = fixtureDir();
    p.store = store;
    p.values.insert(QStringLiteral("kernel"), QStringLiteral("auto"));
    p.values.insert(QStringLiteral("kernel-persistent"), true);
    ProfileStore profiles;
    profiles.upsert(p);
    profiles.setActive(p.name);
    const QString profilesFile = dir.filePath(QStringLiteral("profiles.json"));
    ASSERT_TRUE(profiles.save(profilesFile));
    qputenv("NEURAL_KDLL", dir.filePath(QStringLiteral("no-such-library.so")).toUtf8());

    MainWindow w(windowOptions(dir));  // the profiles just written
    ASSERT_TRUE(showUntilReady(w, 60000));
    qunsetenv("NEURAL_KDLL");
    const QString text = w.engineLabel()->text();
    EXPECT_FALSE(text.startsWith(QStringLiteral("Ready:"))) << text.toStdString();
    EXPECT_NE(text.indexOf(QStringLiteral("persistent CPU team is not used")), -1)
        << text.toStdString();
    EXPECT_NE(text.indexOf(QStringLiteral("no-such-library.so")), -1) << text.toStdString();
    // The long warning does not squeeze the model switcher at the default window width.
    w.resize(1180, 760);
    test::spinFor(100);
    EXPECT_GE(w.modelSwitcher()->width(), w.modelSwitcher()->sizeHint().width());
}

// A wizard-made profile says kernel-persistent "0" (set, and off): the window warned that the
// persistent team was not used, reading whether the option was set instead of its value.
TEST(PersistentTeam, NoWarningWhenTheProfileTurnsItOff) {
    QTemporaryDir dir;
    const QString store = dir.filePath(QStringLiteral("tiny.nstore"));
    StoreJob job;
    bool done = false, ok = false;
    QObject::connect(&job, &StoreJob::finished, [&](bool success, bool, const QString&) {
        done = true;
        ok = success;
    });
    job.startRepack(fixtureDir(), store, QStringLiteral("raw"));
    ASSERT_TRUE(spinUntil([&] { return done; }, 60000));
    ASSERT_TRUE(ok);
    Profile p = Profile::stock();
    p.name = QStringLiteral("Wizard");
    p.modelDir = fixtureDir();
    p.store = store;
    p.values.insert(QStringLiteral("kernel"), QStringLiteral("auto"));
    p.values.insert(QStringLiteral("kernel-persistent"), QStringLiteral("0"));
    ProfileStore profiles;
    profiles.upsert(p);
    profiles.setActive(p.name);
    const QString profilesFile = dir.filePath(QStringLiteral("profiles.json"));
    ASSERT_TRUE(profiles.save(profilesFile));

    MainWindow w(windowOptions(dir));  // the profiles just written
    ASSERT_TRUE(showUntilReady(w, 60000));
    const QString text = w.engineLabel()->text();
    EXPECT_TRUE(text.startsWith(QStringLiteral("Ready:"))) << text.toStdString();
    EXPECT_EQ(text.indexOf(QStringLiteral("persistent")), -1) << text.toStdString();
}

// The status bar's model switcher lists the profiles and the demo model; with --model none of
// them is the one running: the model itself is, listed among the recent ones once loaded.
TEST_F(DesktopTest, TheModelSwitcherListsTheProfilesAndTheDemoModel) {
    QComboBox* models = m_window->modelSwitcher();
    ASSERT_NE(models, nullptr);
    EXPECT_NE(models->findData(QStringLiteral("Stock")), -1);
    EXPECT_NE(models->findData(QStringLiteral("Optimized")), -1);
    EXPECT_NE(models->findData(QString()), -1);  // the demo model
    const int current = models->currentIndex();
    ASSERT_GE(current, 0);
    EXPECT_EQ(models->itemData(current, MainWindow::kSwitchKindRole).toString(),
              QStringLiteral("model"));
    EXPECT_EQ(models->itemData(current).toString(), QFileInfo(fixtureDir()).absoluteFilePath());
    EXPECT_TRUE(models->currentText().startsWith(QStringLiteral("Recent: ")));
}

// The switcher unloads the model (its RAM and VRAM freed, the API server with it) and a choice
// loads one again.
TEST_F(DesktopTest, TheSwitcherUnloadsTheModel) {
    QComboBox* models = m_window->modelSwitcher();
    int unload = -1;
    for (int i = 0; i < models->count(); ++i)
        if (models->itemData(i, MainWindow::kSwitchKindRole).toString() == QStringLiteral("unload"))
            unload = i;
    ASSERT_GE(unload, 0);
    models->setCurrentIndex(unload);
    emit models->activated(unload);
    EXPECT_EQ(m_window->engine()->state(), EngineHost::State::empty);
    EXPECT_EQ(m_window->engine()->model(), nullptr);
    EXPECT_TRUE(m_window->engineLabel()->text().contains(QStringLiteral("No model loaded")))
        << m_window->engineLabel()->text().toStdString();
    EXPECT_EQ(models->currentIndex(), -1);
    EXPECT_EQ(models->placeholderText(), QStringLiteral("No model loaded"));
    m_window->loadModel(fixtureDir(), {});
    EXPECT_TRUE(spinUntil([&] { return m_window->engine()->state() == EngineHost::State::ready; }));
    EXPECT_GE(models->currentIndex(), 0);
}

// The Settings page: its values reach appSettings() and the API server (a key is required, the
// LAN warning shows without one); it replaces the menu pop-ups.
TEST_F(DesktopTest, TheSettingsPageConfiguresTheApiServer) {
    AppSettingsDialog dialog;  // no parent: the window is restarted below
    dialog.show();
    dialog.portBox()->setValue(0);
    dialog.lanBox()->setChecked(true);
    EXPECT_TRUE(dialog.lanWarning()->isVisible());
    EXPECT_NE(dialog.lanWarning()->text().indexOf(QStringLiteral("no key")), -1);
    dialog.keyEdit()->setText(QStringLiteral("sekret"));
    EXPECT_EQ(dialog.lanWarning()->text().indexOf(QStringLiteral("no key")), -1);
    dialog.lanBox()->setChecked(false);
    EXPECT_FALSE(dialog.lanWarning()->isVisible());
    dialog.corsEdit()->setText(QStringLiteral("http://localhost:3000"));
    dialog.maxTokensBox()->setValue(300);
    dialog.startAtLaunchBox()->setChecked(true);
    dialog.save();
    EXPECT_EQ(appSettings()->value(QStringLiteral("chat/maxTokens")).toInt(), 300);

    m_window->toggleServer();
    ASSERT_TRUE(m_window->server()->isRunning()) << m_window->server()->lastError().toStdString();
    QNetworkAccessManager nam;
    auto status = [&](const QByteArray& key) {
        QNetworkRequest req(QUrl(m_window->server()->url() + QStringLiteral("/models")));
        if (!key.isEmpty()) req.setRawHeader("Authorization", "Bearer " + key);
        QNetworkReply* reply = nam.get(req);
        spinUntil([&] { return reply->isFinished(); }, 10000);
        reply->deleteLater();
        return reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
    };
    EXPECT_EQ(status({}), 401);
    EXPECT_EQ(status("sekret"), 200);
    m_window->toggleServer();
    // Started at launch (the setting), although it was off at the last exit.
    restart();
    EXPECT_TRUE(spinUntil([&] { return m_window->server()->isRunning(); }, 10000));

    bool pagesInMenu = false, popUps = false;
    for (QAction* a : m_window->findChildren<QAction*>()) {
        pagesInMenu = pagesInMenu || a->text() == QStringLiteral("&Settings...");
        popUps = popUps || a->text().contains(QStringLiteral("port..."));
    }
    EXPECT_TRUE(pagesInMenu);
    EXPECT_FALSE(popUps);
}

TEST_F(DesktopTest, AboutNamesTheVersionBuildAndBackend) {
    const QString about = m_window->aboutText();
    EXPECT_NE(about.indexOf(QStringLiteral(NEURAL_VERSION)), -1) << about.toStdString();
    EXPECT_NE(about.indexOf(QStringLiteral("cpu")), -1) << about.toStdString();
    bool helpMenu = false;
    for (QAction* a : m_window->menuBar()->actions())
        helpMenu = helpMenu || a->text() == QStringLiteral("&Help");
    EXPECT_TRUE(helpMenu);
}

// The models other apps keep: fake LM Studio, Hugging Face cache and Ollama folders (the
// fixture linked in as their files), with a split GGUF, an incomplete snapshot, a broken
// manifest and a missing blob, and models that are not gpt-oss.
class Discovery : public ::testing::Test {
protected:
    void SetUp() override {
        const QString gguf = QString::fromStdString(
            (neural::test::shared_dir() / "fixtures" / "tiny-gptoss-a-gguf" / "model.gguf")
                .string());
        m_ggufBytes = static_cast<std::uint64_t>(QFileInfo(gguf).size());
        // LM Studio: PUBLISHER/REPO/FILE.gguf.
        mk(QStringLiteral("lm/lmstudio-community/gpt-oss-20b-GGUF"));
        link(gguf, QStringLiteral("lm/lmstudio-community/gpt-oss-20b-GGUF/gpt-oss-20b-MXFP4.gguf"));
        mk(QStringLiteral("lm/unsloth/gpt-oss-120b-GGUF"));
        write(QStringLiteral("lm/unsloth/gpt-oss-120b-GGUF/gpt-oss-120b-00001-of-00002.gguf"), 100);
        write(QStringLiteral("lm/unsloth/gpt-oss-120b-GGUF/gpt-oss-120b-00002-of-00002.gguf"), 50);
        mk(QStringLiteral("lm/meta/llama-3-GGUF"));
        write(QStringLiteral("lm/meta/llama-3-GGUF/llama-3-8b.gguf"), 10);
        // The Hugging Face cache: a complete snapshot and one without its config yet.
        const QString snap = QStringLiteral(
            "hf/hub/models--openai--gpt-oss-20b/snapshots/"
            "0123456789abcdef0123456789abcdef01234567");
        mk(snap);
        for (const QString& f : QDir(fixtureDir()).entryList(QDir::Files))
            link(QDir(fixtureDir()).filePath(f), snap + QLatin1Char('/') + f);
        mk(
            QStringLiteral("hf/hub/models--openai--gpt-oss-120b/snapshots/"
                           "89abcdef0123456789abcdef0123456789abcdef"));
        mk(QStringLiteral("hf/hub/models--google--bert/snapshots/aa"));
        // Ollama: a manifest naming a blob that is there, one naming a missing blob, a broken one.
        const QString hex = QString(64, QLatin1Char('a')), gone = QString(64, QLatin1Char('b'));
        mk(QStringLiteral("ollama/blobs"));
        link(gguf, QStringLiteral("ollama/blobs/sha256-") + hex);
        const QString lib = QStringLiteral("ollama/manifests/registry.ollama.ai/library/");
        mk(lib + QStringLiteral("gpt-oss"));
        mk(lib + QStringLiteral("llama3"));
        const auto manifest = [](const QString& digest) {
            return QStringLiteral(R"({"schemaVersion":2,"layers":[{"mediaType":)"
                                  R"("application/vnd.ollama.image.model","digest":"sha256:%1"},)"
                                  R"({"mediaType":"application/vnd.ollama.image.template",)"
                                  R"("digest":"sha256:%1"}]})")
                .arg(digest)
                .toUtf8();
        };
        write(lib + QStringLiteral("gpt-oss/20b"), manifest(hex));
        write(lib + QStringLiteral("gpt-oss/120b"), manifest(gone));
        write(lib + QStringLiteral("gpt-oss/broken"), QByteArray("{not json"));
        write(lib + QStringLiteral("llama3/latest"), manifest(hex));
        m_roots.lmStudio << path(QStringLiteral("lm"));
        m_roots.hfCache << path(QStringLiteral("hf/hub"));
        m_roots.ollama << path(QStringLiteral("ollama"));
    }
    QString path(const QString& rel) const { return m_dir.filePath(rel); }
    void mk(const QString& rel) { ASSERT_TRUE(QDir().mkpath(path(rel))); }
    // The apps' own layouts use links (the Hugging Face cache) or plain files; Windows'
    // QFile::link makes .lnk shortcuts, so there the file is copied.
    void link(const QString& target, const QString& rel) {
#ifdef Q_OS_WIN
        ASSERT_TRUE(QFile::copy(target, path(rel))) << rel.toStdString();
#else
        ASSERT_TRUE(QFile::link(target, path(rel))) << rel.toStdString();
#endif
    }
    void write(const QString& rel, int bytes) { write(rel, QByteArray(bytes, 'x')); }
    void write(const QString& rel, const QByteArray& data) {
        QFile f(path(rel));
        ASSERT_TRUE(f.open(QIODevice::WriteOnly));
        f.write(data);
    }
    // Every file under the fake folders with its size and time: what "nothing written" means.
    QStringList listing() const {
        QStringList out;
        QDirIterator it(m_dir.path(), QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden,
                        QDirIterator::Subdirectories);
        while (it.hasNext()) {
            it.next();
            out << QStringLiteral("%1 %2 %3")
                       .arg(it.filePath())
                       .arg(it.fileInfo().size())
                       .arg(it.fileInfo().lastModified().toMSecsSinceEpoch());
        }
        out.sort();
        return out;
    }
    static const FoundModel* named(const QList<FoundModel>& list, const QString& name) {
        for (const FoundModel& f : list)
            if (f.name == name) return &f;
        return nullptr;
    }

    QTemporaryDir m_dir;
    DiscoveryRoots m_roots;
    std::uint64_t m_ggufBytes = 0;
};

TEST_F(Discovery, FindsTheGptOssModelsOfLmStudioTheHuggingFaceCacheAndOllama) {
    const QList<FoundModel> found = discoverModels(m_roots);
    QStringList names;
    for (const FoundModel& f : found) names << f.source + QLatin1Char('/') + f.name;
    EXPECT_EQ(found.size(), 7) << names.join(QStringLiteral(", ")).toStdString();

    const FoundModel* lm = named(found, QStringLiteral("gpt-oss-20b-MXFP4"));
    ASSERT_NE(lm, nullptr);
    EXPECT_EQ(lm->source, QStringLiteral("LM Studio"));
    EXPECT_TRUE(lm->usable());
    EXPECT_EQ(lm->bytes, m_ggufBytes);
    const FoundModel* split = named(found, QStringLiteral("gpt-oss-120b-00001-of-00002"));
    ASSERT_NE(split, nullptr);  // listed once, by its first part, with both parts' size
    EXPECT_EQ(split->bytes, 150u);
    EXPECT_EQ(named(found, QStringLiteral("llama-3-8b")), nullptr);

    const FoundModel* hf = named(found, QStringLiteral("gpt-oss-20b"));
    ASSERT_NE(hf, nullptr);
    EXPECT_EQ(hf->source, QStringLiteral("Hugging Face cache"));
    EXPECT_TRUE(hf->usable()) << hf->problem.toStdString();
    EXPECT_GT(hf->bytes, 1000000u);
    const FoundModel* partial = named(found, QStringLiteral("gpt-oss-120b"));
    ASSERT_NE(partial, nullptr);
    EXPECT_FALSE(partial->usable());
    EXPECT_NE(partial->problem.indexOf(QStringLiteral("config.json")), -1);
    EXPECT_EQ(named(found, QStringLiteral("bert")), nullptr);

    const FoundModel* ollama = named(found, QStringLiteral("gpt-oss:20b"));
    ASSERT_NE(ollama, nullptr);
    EXPECT_TRUE(ollama->usable()) << ollama->problem.toStdString();
    EXPECT_EQ(ollama->bytes, m_ggufBytes);
    EXPECT_TRUE(ollama->path.endsWith(QStringLiteral("sha256-") + QString(64, QLatin1Char('a'))));
    const FoundModel* missing = named(found, QStringLiteral("gpt-oss:120b"));
    ASSERT_NE(missing, nullptr);
    EXPECT_NE(missing->problem.indexOf(QStringLiteral("missing")), -1);
    const FoundModel* broken = named(found, QStringLiteral("gpt-oss:broken"));
    ASSERT_NE(broken, nullptr);
    EXPECT_NE(broken->problem.indexOf(QStringLiteral("not valid JSON")), -1);
    EXPECT_EQ(named(found, QStringLiteral("llama3:latest")), nullptr);
    // What it would take: a store of its size, a time estimate.
    EXPECT_NE(lm->description().indexOf(QStringLiteral("a store needs")), -1);

    // The environment's folders: HF_HOME's hub, OLLAMA_MODELS.
    qputenv("HF_HOME", path(QStringLiteral("hf")).toUtf8());
    qputenv("OLLAMA_MODELS", path(QStringLiteral("ollama")).toUtf8());
    const DiscoveryRoots env = DiscoveryRoots::defaults();
    qunsetenv("HF_HOME");
    qunsetenv("OLLAMA_MODELS");
    EXPECT_TRUE(env.hfCache.contains(path(QStringLiteral("hf")) + QStringLiteral("/hub")));
    EXPECT_TRUE(env.ollama.contains(path(QStringLiteral("ollama"))));
}

// The switcher offers them (those that cannot be used disabled, with the reason); one loads
// where it lies and nothing is written into the other apps' folders, the learned statistics
// included.
TEST_F(Discovery, TheSwitcherLoadsAFoundModelWithoutWritingIntoItsFolder) {
    const QStringList before = listing();
    const QByteArray statsDir = qgetenv("NEURAL_ROUTING_STATS_DIR");
    qunsetenv("NEURAL_ROUTING_STATS_DIR");
    QTemporaryDir home;
    appSettings()->setValue(QStringLiteral("chat/maxTokens"), 8);
    {
        MainWindow w(fixtureWindowOptions(home));
        w.engine()->setForcedOutput(QStringLiteral("<|channel|>final<|message|>Hi.<|end|>"));
        ASSERT_TRUE(showUntilReady(w));
        w.setDiscoveryRoots(m_roots);
        QComboBox* models = w.modelSwitcher();
        // docs/images/discovery.png: the switcher's list with the models found, over a
        // conversation about them.
        w.resize(1180, 760);
        w.settingsPanel()->maxTokensBox()->setValue(64);
        w.engine()->setForcedOutput(QStringLiteral(
            "<|channel|>final<|message|>The model switcher in the status bar lists them: the "
            "gpt-oss models of LM Studio, the Hugging Face cache and Ollama, each with its size "
            "and what setting it up takes. Choose one and it loads where it lies; nothing is "
            "copied.<|return|>"));
        ASSERT_TRUE(test::sendAndWait(w, QStringLiteral("Can you use the models I downloaded "
                                                        "with LM Studio and Ollama?")));
        w.engine()->setForcedOutput(QStringLiteral("<|channel|>final<|message|>Hi.<|end|>"));
        ASSERT_TRUE(test::docShot(&w, "discovery.png", models));
        int ollama = -1, missing = -1;
        for (int i = 0; i < models->count(); ++i) {
            if (models->itemText(i) == QStringLiteral("gpt-oss:20b (Ollama)")) ollama = i;
            if (models->itemText(i) == QStringLiteral("gpt-oss:120b (Ollama)")) missing = i;
        }
        ASSERT_GE(ollama, 0);
        ASSERT_GE(missing, 0);
        auto* model = qobject_cast<QStandardItemModel*>(models->model());
        ASSERT_NE(model, nullptr);
        EXPECT_FALSE(model->item(missing)->isEnabled());
        EXPECT_NE(models->itemData(missing, Qt::ToolTipRole)
                      .toString()
                      .indexOf(QStringLiteral("missing")),
                  -1);
        const QString blob = models->itemData(ollama).toString();
        models->setCurrentIndex(ollama);
        emit models->activated(ollama);
        ASSERT_TRUE(spinUntil([&] {
            return w.engine()->state() != EngineHost::State::loading &&
                   w.engine()->modelDir() == blob;
        }));
        ASSERT_EQ(w.engine()->state(), EngineHost::State::ready)
            << w.engine()->lastError().toStdString();
        w.input()->setPlainText(QStringLiteral("hello"));
        w.sendMessage();
        ASSERT_TRUE(spinUntil([&] { return !w.engine()->busy(); }, 60000));
    }  // the window goes: the statistics are saved
    qputenv("NEURAL_ROUTING_STATS_DIR", statsDir);
    EXPECT_EQ(listing(), before);
}

}  // namespace
}  // namespace neural::gui
