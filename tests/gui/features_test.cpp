// The chat features LM Studio users expect, on the tiny fixture, offscreen: the context meter
// (counted with the model's tokenizer, debounced while typing, the warning and its ways out),
// Continue (a reply cut by the token limit goes on in the same message, its K/V reused),
// Branch (a new conversation with the messages up to one) and text files attached to a message.
#include <gtest/gtest.h>

#include <QApplication>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QDropEvent>
#include <QFile>
#include <QLabel>
#include <QMessageBox>
#include <QMimeData>
#include <QUrl>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QPainter>
#include <QPdfWriter>
#include <QTest>
#include <QTimer>
#include <QToolButton>

#include "common/dialogs.h"
#include "app/mainwindow.h"
#include "common/paths.h"
#include "conversation/assistants.h"
#include "conversation/attachments.h"
#include "conversation/chatinput.h"
#include "conversation/chatview.h"
#include "conversation/contextmeter.h"
#include "conversation/samplingsettings.h"
#include "conversation/settingspanel.h"
#include "fixture_window.h"
#include "gui_test_support.h"
#include "settings/appsettingsdialog.h"
#include "support/fixtures.h"

namespace neural::gui {
namespace {

using test::spinFor;
using test::spinUntil;

class FeaturesTest : public test::WindowTest {
protected:
    FeaturesTest() : WindowTest(12) {}
    ContextMeter* meter() { return m_window->contextMeter(); }
};

// The meter counts the prompt the next turn sends: the count shown before sending is the
// prompt the engine then reports for that turn. Typing is counted once it pauses.
TEST_F(FeaturesTest, TheContextMeterCountsWhatTheNextTurnSends) {
    meter()->refresh();
    const qint64 empty = meter()->usedTokens();
    ASSERT_GT(empty, 0);  // the system message
    ASSERT_GT(meter()->contextTokens(), 0);
    EXPECT_EQ(meter()->contextTokens(), m_window->engine()->model()->context_length());
    EXPECT_TRUE(meter()->label()->text().contains(QStringLiteral("tokens")));
    EXPECT_TRUE(meter()->warning()->isHidden());

    m_window->input()->setPlainText(QStringLiteral("How long is the coast of Norway?"));
    spinFor(ContextMeter::kDelayMs / 3);
    EXPECT_EQ(meter()->usedTokens(), empty);  // debounced: not counted while typing
    ASSERT_TRUE(spinUntil([&] { return meter()->usedTokens() > empty; }, 3000));
    const qint64 typed = meter()->usedTokens();

    m_window->sendMessage();
    ASSERT_TRUE(idle());
    ASSERT_EQ(m_window->messages()->rowCount(), 2);
    const QJsonObject stats = m_window->messages()->at(1).stats;
    EXPECT_EQ(stats.value(QStringLiteral("prompt_tokens")).toInteger(), typed);
    // After the reply: the conversation with it, the box empty again.
    EXPECT_GT(meter()->usedTokens(), typed);
    EXPECT_EQ(meter()->usedTokens(), m_window->engine()->promptTokens(m_window->turnRequest(true)));
}

// Before the context runs out the meter warns, names the ways out, and they work; the warning
// is true: the turn it warns about is refused.
TEST_F(FeaturesTest, TheContextWarningComesBeforeTheContextIsExceeded) {
    ASSERT_TRUE(send(QStringLiteral("hello")));
    const qint64 conv = m_window->currentConversation();
    meter()->refresh();
    EXPECT_FALSE(meter()->overflows());
    EXPECT_TRUE(meter()->warning()->isHidden());
    // A reply limit that no longer fits beside the conversation.
    m_window->settingsPanel()->maxTokensBox()->setValue(SamplingSettings::kMaxTokens);
    meter()->refresh();
    ASSERT_TRUE(meter()->overflows());
    EXPECT_FALSE(meter()->warning()->isHidden());
    const QString text = meter()->warning()->text();
    EXPECT_TRUE(text.contains(QStringLiteral("href=\"new\""))) << text.toStdString();
    EXPECT_TRUE(text.contains(QStringLiteral("href=\"branch\""))) << text.toStdString();
    EXPECT_TRUE(text.contains(QStringLiteral("shorten"))) << text.toStdString();

    ASSERT_TRUE(send(QStringLiteral("and more")));
    EXPECT_TRUE(m_window->statusBar()->currentMessage().contains(QStringLiteral("context")))
        << m_window->statusBar()->currentMessage().toStdString();

    // The way out: a new conversation.
    emit meter()->warning()->linkActivated(QStringLiteral("new"));
    EXPECT_EQ(m_window->currentConversation(), 0);
    EXPECT_EQ(m_window->messages()->rowCount(), 0);
    EXPECT_NE(conv, 0);
}

// Continue: the cut reply goes on in the same stored message, from the cached K/V.
TEST_F(FeaturesTest, AReplyCutByTheTokenLimitContinuesInTheSameMessage) {
    m_window->engine()->setForcedOutput(QStringLiteral(
        "<|channel|>final<|message|>One two three four five six seven eight nine ten eleven "
        "twelve thirteen fourteen<|end|>"));
    ASSERT_TRUE(send(QStringLiteral("count")));
    ASSERT_EQ(m_window->messages()->rowCount(), 2);
    const ChatMessage cut = m_window->messages()->at(1);
    ASSERT_EQ(cut.stats.value(QStringLiteral("finish")).toString(), QStringLiteral("length"));
    ASSERT_TRUE(cut.content.startsWith(QStringLiteral("One two")));
    MessageWidget* w = m_window->chatView()->messageWidget(1);
    ASSERT_NE(w, nullptr);
    EXPECT_FALSE(w->continueButton()->isHidden());
    EXPECT_TRUE(m_window->chatView()->messageWidget(0)->continueButton()->isHidden());

    m_window->engine()->setForcedOutput({});  // the model writes on
    w->continueButton()->click();
    ASSERT_TRUE(idle());
    ASSERT_EQ(m_window->messages()->rowCount(), 2);
    const ChatMessage more = m_window->messages()->at(1);
    EXPECT_EQ(more.id, cut.id);
    EXPECT_TRUE(more.content.startsWith(cut.content)) << more.content.toStdString();
    EXPECT_GT(more.content.size() + more.reasoning.size(), cut.content.size());
    EXPECT_EQ(more.stats.value(QStringLiteral("continued")).toInt(), 1);
    // The token count covers both parts.
    EXPECT_GT(more.stats.value(QStringLiteral("tokens")).toInteger(),
              cut.stats.value(QStringLiteral("tokens")).toInteger());
    // The cut reply's K/V were reused where prompt and decode give the same bits: only its last
    // token (never fed back) was processed. On the CPU's bf16 prompt path (the default with AVX2)
    // its decoded tokens are re-run as prompt tokens, and the first turn's prompt is reused.
    const qint64 cached = more.stats.value(QStringLiteral("cached_tokens")).toInteger();
    EXPECT_TRUE(cached == more.stats.value(QStringLiteral("prompt_tokens")).toInteger() - 1 ||
                cached == cut.stats.value(QStringLiteral("prompt_tokens")).toInteger())
        << cached;
    // Stored as the same message, one version.
    const QList<StoredMessage> stored = m_window->store().messages(m_window->currentConversation());
    ASSERT_EQ(stored.size(), 2);
    EXPECT_EQ(stored[1].id, cut.id);
    EXPECT_EQ(stored[1].content, more.content);
    EXPECT_TRUE(stored[1].versions.isEmpty());
    // A reply that ended is not continued.
    m_window->engine()->setForcedOutput(
        QStringLiteral("<|channel|>final<|message|>Done.<|return|>"));
    ASSERT_TRUE(send(QStringLiteral("thanks")));
    ASSERT_EQ(m_window->messages()->rowCount(), 4);
    EXPECT_TRUE(m_window->chatView()->messageWidget(3)->continueButton()->isHidden());
    const QString done = m_window->messages()->at(3).content;
    m_window->continueReply(3);
    EXPECT_FALSE(m_window->engine()->busy());
    EXPECT_EQ(m_window->messages()->at(3).content, done);
}

// Continue on a regenerated reply replaces the version shown and keeps the others.
TEST_F(FeaturesTest, ContinuingOneVersionKeepsTheOthers) {
    m_window->engine()->setForcedOutput(
        QStringLiteral("<|channel|>final<|message|>A short reply.<|return|>"));
    ASSERT_TRUE(send(QStringLiteral("count")));
    m_window->engine()->setForcedOutput(QStringLiteral(
        "<|channel|>final<|message|>One two three four five six seven eight nine ten eleven "
        "twelve thirteen fourteen<|end|>"));
    m_window->regenerate(1);
    ASSERT_TRUE(idle());
    ASSERT_EQ(m_window->messages()->at(1).versions.size(), 2);
    m_window->engine()->setForcedOutput({});
    m_window->continueReply(1);
    ASSERT_TRUE(idle());
    const ChatMessage m = m_window->messages()->at(1);
    ASSERT_EQ(m.versions.size(), 2);
    EXPECT_EQ(m.version, 1);
    EXPECT_EQ(m.versions[0].content, QStringLiteral("A short reply."));
    EXPECT_TRUE(m.versions[1].content.startsWith(QStringLiteral("One two")));
    EXPECT_EQ(m.versions[1].content, m.content);
    const QList<StoredMessage> stored = m_window->store().messages(m_window->currentConversation());
    ASSERT_EQ(stored.size(), 2);
    EXPECT_EQ(stored[1].versions.size(), 2);
    EXPECT_EQ(stored[1].content, m.content);
}

// Branch: a new conversation named after the original with the messages up to the one chosen
// (versions and settings too); the original keeps all of its own.
TEST_F(FeaturesTest, ABranchIsANewConversationWithTheMessagesUpToOne) {
    m_window->settingsPanel()->systemPromptEdit()->setPlainText(QStringLiteral("Be brief."));
    ASSERT_TRUE(send(QStringLiteral("first question")));
    m_window->regenerate(1);
    ASSERT_TRUE(idle());
    ASSERT_TRUE(send(QStringLiteral("second question")));
    ASSERT_EQ(m_window->messages()->rowCount(), 4);
    const qint64 original = m_window->currentConversation();
    const QString title = m_window->store().conversation(original)->title;
    const int before = static_cast<int>(m_window->store().conversations().size());

    MessageWidget* w = m_window->chatView()->messageWidget(1);
    ASSERT_FALSE(w->branchButton()->isHidden());
    w->branchButton()->click();
    const qint64 branch = m_window->currentConversation();
    ASSERT_NE(branch, original);
    ASSERT_NE(branch, 0);
    EXPECT_EQ(m_window->store().conversations().size(), before + 1);
    const auto info = m_window->store().conversation(branch);
    ASSERT_TRUE(info);
    EXPECT_EQ(info->title, title + QStringLiteral(" (branch)"));
    EXPECT_EQ(info->systemPrompt, QStringLiteral("Be brief."));
    EXPECT_EQ(m_window->settingsPanel()->settings().systemPrompt, QStringLiteral("Be brief."));
    ASSERT_EQ(m_window->messages()->rowCount(), 2);
    EXPECT_EQ(m_window->messages()->at(0).content, QStringLiteral("first question"));
    EXPECT_EQ(m_window->messages()->at(1).versions.size(), 2);
    EXPECT_GE(m_window->conversations()->rowOf(branch), 0);
    EXPECT_EQ(m_window->store().messages(original).size(), 4);

    // The branch goes its own way: a message there leaves the original alone.
    ASSERT_TRUE(send(QStringLiteral("another way")));
    EXPECT_EQ(m_window->store().messages(branch).size(), 4);
    EXPECT_EQ(m_window->store().messages(original).at(2).content,
              QStringLiteral("second question"));

    // A message that does not exist: an error, no conversation made.
    const int now = static_cast<int>(m_window->store().conversations().size());
    EXPECT_EQ(m_window->store().branchConversation(original, 9, QStringLiteral("x")), 0);
    EXPECT_FALSE(m_window->store().lastError().isEmpty());
    EXPECT_EQ(m_window->store().conversations().size(), now);
    EXPECT_EQ(m_window->store().branchConversation(12345, 0, QStringLiteral("x")), 0);
    EXPECT_EQ(m_window->store().conversations().size(), now);
}

// Delete takes effect at once and offers Undo, which puts the message back as it was (id,
// position, versions, time); a new message ends the offer.
TEST_F(FeaturesTest, ADeletedMessageComesBackWithUndo) {
    m_window->engine()->setForcedOutput(
        QStringLiteral("<|channel|>final<|message|>A short reply.<|return|>"));
    ASSERT_TRUE(send(QStringLiteral("one")));
    m_window->regenerate(1);
    ASSERT_TRUE(idle());
    ASSERT_TRUE(send(QStringLiteral("two")));
    const qint64 conv = m_window->currentConversation();
    const QList<StoredMessage> before = m_window->store().messages(conv);
    ASSERT_EQ(before.size(), 4);
    ASSERT_EQ(before[1].versions.size(), 2);

    QPushButton* undo = m_window->undoButton();
    EXPECT_FALSE(undo->isVisibleTo(m_window.get()));
    m_window->deleteMessage(1);
    ASSERT_EQ(m_window->messages()->rowCount(), 3);
    ASSERT_EQ(m_window->store().messages(conv).size(), 3);
    EXPECT_TRUE(undo->isVisibleTo(m_window.get()));
    undo->click();
    EXPECT_FALSE(undo->isVisibleTo(m_window.get()));
    const QList<StoredMessage> after = m_window->store().messages(conv);
    ASSERT_EQ(after.size(), 4);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(after[i].id, before[i].id) << i;
        EXPECT_EQ(after[i].position, i);
        EXPECT_EQ(after[i].content, before[i].content) << i;
        EXPECT_EQ(after[i].createdMs, before[i].createdMs) << i;
        EXPECT_EQ(after[i].versions.size(), before[i].versions.size()) << i;
        EXPECT_EQ(after[i].version, before[i].version) << i;
        EXPECT_EQ(after[i].stats, before[i].stats) << i;
    }
    ASSERT_EQ(m_window->messages()->rowCount(), 4);
    EXPECT_EQ(m_window->messages()->at(1).versions.size(), 2);
    EXPECT_FALSE(m_window->undoDelete());  // nothing left to undo

    // A message sent after a delete ends the offer.
    m_window->deleteMessage(3);
    EXPECT_TRUE(undo->isVisibleTo(m_window.get()));
    ASSERT_TRUE(send(QStringLiteral("three")));
    EXPECT_FALSE(undo->isVisibleTo(m_window.get()));
    EXPECT_FALSE(m_window->undoDelete());

    // The store refuses a position past the end and a conversation that is gone.
    StoredMessage m = before[0];
    m.id = 0;
    m.position = 99;
    EXPECT_FALSE(m_window->store().insertMessage(m));
    m.position = 0;
    m.conversationId = 12345;
    EXPECT_FALSE(m_window->store().insertMessage(m));
    EXPECT_EQ(m_window->store().messages(conv).size(), 5);
}

// Deletions are an undo stack: Ctrl+Z (Edit > Undo delete) takes them back newest first, each
// as it was, opening its conversation; the message box keeps Ctrl+Z while it has typing to undo.
TEST_F(FeaturesTest, DeletionsAreUndoneNewestFirstAcrossConversations) {
    m_window->engine()->setForcedOutput(
        QStringLiteral("<|channel|>final<|message|>A short reply.<|return|>"));
    ASSERT_TRUE(send(QStringLiteral("one")));
    ASSERT_TRUE(send(QStringLiteral("two")));
    const qint64 a = m_window->currentConversation();
    const QList<StoredMessage> beforeA = m_window->store().messages(a);
    ASSERT_EQ(beforeA.size(), 4);
    m_window->deleteMessage(3);
    m_window->deleteMessage(0);
    m_window->newConversation();
    ASSERT_TRUE(send(QStringLiteral("three")));
    const qint64 b = m_window->currentConversation();
    const QList<StoredMessage> beforeB = m_window->store().messages(b);
    m_window->deleteMessage(0);
    EXPECT_EQ(m_window->undoCount(), 3);
    EXPECT_TRUE(m_window->undoAction()->isEnabled());
    EXPECT_TRUE(m_window->undoButton()->isVisibleTo(m_window.get()));

    // Ctrl+Z in the message box: its typing first, then the latest deletion.
    m_window->activateWindow();
    ASSERT_TRUE(QTest::qWaitForWindowActive(m_window.get()));
    m_window->input()->setFocus();
    QTest::keyClicks(m_window->input(), QStringLiteral("x"));
    QTest::keyClick(m_window->input(), Qt::Key_Z, Qt::ControlModifier);
    EXPECT_TRUE(m_window->input()->toPlainText().isEmpty());
    EXPECT_EQ(m_window->undoCount(), 3);
    QTest::keyClick(m_window->input(), Qt::Key_Z, Qt::ControlModifier);
    EXPECT_EQ(m_window->undoCount(), 2);
    EXPECT_EQ(m_window->currentConversation(), b);
    ASSERT_EQ(m_window->store().messages(b).size(), 2);
    EXPECT_EQ(m_window->store().messages(b)[0].id, beforeB[0].id);

    // The next ones belong to the other conversation, which opens; in reverse order.
    m_window->undoAction()->trigger();
    EXPECT_EQ(m_window->currentConversation(), a);
    EXPECT_EQ(m_window->messages()->rowCount(), 3);
    EXPECT_EQ(m_window->messages()->at(0).id, beforeA[0].id);
    EXPECT_TRUE(m_window->undoDelete());
    EXPECT_EQ(m_window->undoCount(), 0);
    EXPECT_FALSE(m_window->undoAction()->isEnabled());
    const QList<StoredMessage> afterA = m_window->store().messages(a);
    ASSERT_EQ(afterA.size(), 4);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(afterA[i].id, beforeA[i].id) << i;
        EXPECT_EQ(afterA[i].position, i);
        EXPECT_EQ(afterA[i].content, beforeA[i].content) << i;
        EXPECT_EQ(afterA[i].createdMs, beforeA[i].createdMs) << i;
        EXPECT_EQ(afterA[i].stats, beforeA[i].stats) << i;
    }
    EXPECT_EQ(m_window->messages()->rowCount(), 4);
    EXPECT_FALSE(m_window->undoDelete());

    // Bounded: only the latest kMaxUndo deletions are kept.
    for (int i = 0; i <= MainWindow::kMaxUndo; ++i)
        m_window->store().appendMessage(a, QStringLiteral("user"),
                                        QStringLiteral("more %1").arg(i));
    m_window->newConversation();
    m_window->selectConversation(a);
    const int rows = m_window->messages()->rowCount();
    ASSERT_EQ(rows, 4 + MainWindow::kMaxUndo + 1);
    for (int i = 0; i < rows; ++i) m_window->deleteMessage(0);
    EXPECT_EQ(m_window->messages()->rowCount(), 0);
    EXPECT_EQ(m_window->undoCount(), MainWindow::kMaxUndo);
    while (m_window->undoDelete()) {
    }
    EXPECT_EQ(m_window->messages()->rowCount(), MainWindow::kMaxUndo);
    // Another change to a conversation ends the offer for its deletions.
    m_window->deleteMessage(0);
    ASSERT_TRUE(send(QStringLiteral("last")));
    EXPECT_EQ(m_window->undoCount(), 0);
}

// Editing an earlier message of yours keeps the old text and what followed it as a version:
// the arrows flip between the branches, exactly, also after the conversation is reopened.
TEST_F(FeaturesTest, EditingAnEarlierMessageKeepsTheOldBranchAsAVersion) {
    m_window->engine()->setForcedOutput(
        QStringLiteral("<|channel|>final<|message|>A short reply.<|return|>"));
    ASSERT_TRUE(send(QStringLiteral("one")));
    ASSERT_TRUE(send(QStringLiteral("two")));
    m_window->regenerate(3);
    ASSERT_TRUE(idle());
    const qint64 conv = m_window->currentConversation();
    const QList<StoredMessage> before = m_window->store().messages(conv);
    ASSERT_EQ(before.size(), 4);
    ASSERT_EQ(before[3].versions.size(), 2);

    m_window->engine()->setForcedOutput(
        QStringLiteral("<|channel|>final<|message|>Another reply.<|return|>"));
    m_window->editMessage(0, QStringLiteral("one, edited"));
    ASSERT_TRUE(idle());
    ASSERT_EQ(m_window->messages()->rowCount(), 2);
    EXPECT_EQ(m_window->messages()->at(0).content, QStringLiteral("one, edited"));
    EXPECT_EQ(m_window->messages()->at(0).id, before[0].id);
    EXPECT_EQ(m_window->messages()->at(1).content, QStringLiteral("Another reply."));
    const QList<StoredMessage> edited = m_window->store().messages(conv);

    MessageWidget* w = m_window->chatView()->messageWidget(0);
    ASSERT_NE(w, nullptr);
    EXPECT_FALSE(w->versionLabel()->isHidden());
    EXPECT_EQ(w->versionLabel()->text(), QStringLiteral("2/2"));
    QToolButton* prev = nullptr;
    for (QToolButton* t : w->findChildren<QToolButton*>())
        if (t->accessibleName() == QStringLiteral("Previous version")) prev = t;
    ASSERT_NE(prev, nullptr);
    ASSERT_TRUE(prev->isEnabled());
    prev->click();
    // The old branch, exactly: the later messages with their ids, times and versions.
    const QList<StoredMessage> restored = m_window->store().messages(conv);
    ASSERT_EQ(restored.size(), 4);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(restored[i].id, before[i].id) << i;
        EXPECT_EQ(restored[i].content, before[i].content) << i;
        EXPECT_EQ(restored[i].createdMs, before[i].createdMs) << i;
        EXPECT_EQ(restored[i].stats, before[i].stats) << i;
    }
    EXPECT_EQ(restored[3].versions.size(), 2);
    EXPECT_EQ(restored[3].version, before[3].version);
    ASSERT_EQ(m_window->messages()->rowCount(), 4);
    EXPECT_EQ(m_window->messages()->at(0).version, 0);
    EXPECT_EQ(m_window->chatView()->messageWidget(0)->versionLabel()->text(),
              QStringLiteral("1/2"));
    // What the next turn sends follows the version shown.
    EXPECT_EQ(m_window->turnRequest(false).history.size(), 4);

    // Reopened: the version shown stays, the other branch is still there.
    m_window->newConversation();
    m_window->selectConversation(conv);
    ASSERT_EQ(m_window->messages()->rowCount(), 4);
    EXPECT_EQ(m_window->messages()->at(0).content, QStringLiteral("one"));
    m_window->showVersion(0, 1);
    const QList<StoredMessage> again = m_window->store().messages(conv);
    ASSERT_EQ(again.size(), 2);
    EXPECT_EQ(again[1].id, edited[1].id);
    EXPECT_EQ(again[1].content, QStringLiteral("Another reply."));
    EXPECT_EQ(m_window->messages()->rowCount(), 2);
}

// Regenerating an earlier reply keeps it and everything after it as a version: the arrows
// flip between the branches, exactly, also after a restart; nothing is removed from the store
// before the new reply is there.
TEST_F(FeaturesTest, RegeneratingAnEarlierReplyKeepsTheLaterMessagesAsAVersion) {
    m_window->engine()->setForcedOutput(
        QStringLiteral("<|channel|>final<|message|>A short reply.<|return|>"));
    ASSERT_TRUE(send(QStringLiteral("one")));
    ASSERT_TRUE(send(QStringLiteral("two")));
    ASSERT_TRUE(send(QStringLiteral("three")));
    const qint64 conv = m_window->currentConversation();
    const QList<StoredMessage> before = m_window->store().messages(conv);
    ASSERT_EQ(before.size(), 6);

    m_window->engine()->setForcedOutput(
        QStringLiteral("<|channel|>final<|message|>A better first reply.<|return|>"));
    // The first reply's own Regenerate button.
    QPushButton* regen = nullptr;
    for (QPushButton* b : m_window->chatView()->messageWidget(1)->findChildren<QPushButton*>())
        if (b->accessibleName() == QStringLiteral("Regenerate reply")) regen = b;
    ASSERT_NE(regen, nullptr);
    ASSERT_FALSE(regen->isHidden());
    regen->click();
    ASSERT_TRUE(m_window->engine()->busy());
    EXPECT_EQ(m_window->messages()->rowCount(), 2);         // the new reply streams after "one"
    EXPECT_EQ(m_window->store().messages(conv).size(), 6);  // a crash now loses nothing
    // Another conversation and back while it streams: still the new reply after "one".
    m_window->newConversation();
    m_window->selectConversation(conv);
    EXPECT_EQ(m_window->messages()->rowCount(), 2);
    ASSERT_TRUE(idle());

    ASSERT_EQ(m_window->messages()->rowCount(), 2);
    EXPECT_EQ(m_window->messages()->at(1).content, QStringLiteral("A better first reply."));
    EXPECT_EQ(m_window->messages()->at(1).id, before[1].id);
    const QList<StoredMessage> regenerated = m_window->store().messages(conv);
    ASSERT_EQ(regenerated.size(), 2);
    ASSERT_EQ(regenerated[1].versions.size(), 2);
    EXPECT_EQ(regenerated[1].version, 1);
    MessageWidget* w = m_window->chatView()->messageWidget(1);
    ASSERT_NE(w, nullptr);
    EXPECT_FALSE(w->versionLabel()->isHidden());
    EXPECT_EQ(w->versionLabel()->text(), QStringLiteral("2/2"));

    // Back to the first version: the old reply and its four later messages, exactly.
    QToolButton* prev = nullptr;
    for (QToolButton* t : w->findChildren<QToolButton*>())
        if (t->accessibleName() == QStringLiteral("Previous version")) prev = t;
    ASSERT_NE(prev, nullptr);
    ASSERT_TRUE(prev->isEnabled());
    prev->click();
    auto expectOldBranch = [&] {
        const QList<StoredMessage> now = m_window->store().messages(conv);
        ASSERT_EQ(now.size(), 6);
        for (int i = 0; i < 6; ++i) {
            EXPECT_EQ(now[i].id, before[i].id) << i;
            EXPECT_EQ(now[i].role, before[i].role) << i;
            EXPECT_EQ(now[i].content, before[i].content) << i;
            EXPECT_EQ(now[i].createdMs, before[i].createdMs) << i;
            EXPECT_EQ(now[i].stats, before[i].stats) << i;
        }
        ASSERT_EQ(m_window->messages()->rowCount(), 6);
        for (int i = 0; i < 6; ++i)
            EXPECT_EQ(m_window->messages()->at(i).content, before[i].content) << i;
        EXPECT_EQ(m_window->chatView()->messageWidget(1)->versionLabel()->text(),
                  QStringLiteral("1/2"));
        // What the next turn sends follows the version shown.
        EXPECT_EQ(m_window->turnRequest(false).history.size(), 6);
    };
    expectOldBranch();

    // After a restart the conversation store has both branches.
    m_window.reset();
    open();
    m_window->selectConversation(conv);
    expectOldBranch();
    m_window->showVersion(1, 1);
    ASSERT_EQ(m_window->messages()->rowCount(), 2);
    EXPECT_EQ(m_window->messages()->at(1).content, QStringLiteral("A better first reply."));
    EXPECT_EQ(m_window->chatView()->messageWidget(1)->versionLabel()->text(),
              QStringLiteral("2/2"));
    m_window->showVersion(1, 0);
    expectOldBranch();
}

// A regenerated earlier reply that turns into a tool call cannot be a version of the reply: the
// round replaces it, and the conversation as it was is kept as a copy first.
TEST_F(FeaturesTest, ARegeneratedEarlierReplyThatCallsAToolKeepsTheOldConversationAsACopy) {
    m_window->engine()->setForcedOutput(
        QStringLiteral("<|channel|>final<|message|>A short reply.<|return|>"));
    ASSERT_TRUE(send(QStringLiteral("one")));
    ASSERT_TRUE(send(QStringLiteral("two")));
    const qint64 conv = m_window->currentConversation();
    const QList<StoredMessage> before = m_window->store().messages(conv);
    ASSERT_EQ(before.size(), 4);

    // A call of a tool that does not exist: answered at once with an error, then the reply
    // (room for the call's header tokens).
    m_window->settingsPanel()->maxTokensBox()->setValue(64);
    m_window->engine()->queueForcedOutput(
        QStringLiteral("<|channel|>commentary to=nowhere.tool <|constrain|>json<|message|>{}"
                       "<|call|>"));
    m_window->regenerate(1);
    ASSERT_TRUE(spinUntil([&] {
        return !m_window->engine()->busy() && !m_window->messages()->isStreaming() &&
               m_window->messages()->rowCount() == 3;
    })) <<
        [&] {
            std::string rows;
            for (const ChatMessage& m : m_window->messages()->items())
                rows += m.role.toStdString() + ": " + m.content.toStdString() + " | ";
            return rows;
        }();
    const QList<StoredMessage> now = m_window->store().messages(conv);
    ASSERT_EQ(now.size(), 3);
    EXPECT_EQ(now[0].id, before[0].id);
    EXPECT_EQ(now[1].role, QStringLiteral("tool"));
    EXPECT_EQ(now[2].role, QStringLiteral("assistant"));

    qint64 copy = 0;
    for (const ConversationInfo& c : m_window->store().conversations())
        if (c.title.endsWith(QStringLiteral("(before regenerate)"))) copy = c.id;
    ASSERT_NE(copy, 0);
    const QList<StoredMessage> kept = m_window->store().messages(copy);
    ASSERT_EQ(kept.size(), 4);
    for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(kept[i].role, before[i].role) << i;
        EXPECT_EQ(kept[i].content, before[i].content) << i;
    }
}

// A message box is as wide as its title (the title bar cut "Delete conversation" above a short
// question); askQuestion returns the button clicked.
TEST(DialogTitles, AMessageBoxIsAsWideAsItsTitle) {
    const QString title = QStringLiteral("Delete conversation and everything in it");
    QMessageBox fitted(QMessageBox::Question, title, QStringLiteral("Sure?"),
                       QMessageBox::Yes | QMessageBox::No);
    const int needed = titleBarWidth(&fitted, title);
    fitTitle(&fitted);
    fitted.show();
    QCoreApplication::processEvents();
    EXPECT_GE(fitted.width(), needed);
    fitted.close();

    // askQuestion runs its own event loop: a timer answers once the box is open.
    int width = 0;
    QTimer poll;
    poll.setInterval(20);
    QObject::connect(&poll, &QTimer::timeout, [&] {
        if (auto* box = qobject_cast<QMessageBox*>(QApplication::activeModalWidget())) {
            poll.stop();
            width = box->width();
            box->button(QMessageBox::Yes)->click();
        }
    });
    poll.start();
    EXPECT_EQ(askQuestion(nullptr, title, QStringLiteral("Sure?")), QMessageBox::Yes);
    EXPECT_GE(width, needed);
}

QString writeFile(const QTemporaryDir& dir, const QString& name, const QByteArray& data) {
    const QString path = dir.filePath(name);
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(data) != data.size()) return {};
    return path;
}

// Text files attach (button or drop), binary, non-UTF-8 and oversized files are refused with a
// reason; the files are inlined under their names, counted by the meter, shown as chips.
TEST_F(FeaturesTest, AttachedTextFilesAreInlinedCountedAndShownAsChips) {
    QTemporaryDir files;
    const QString notes = writeFile(files, QStringLiteral("notes.md"),
                                    QByteArray("# Notes\nCaf\xc3\xa9 and *emphasis*.\n"));
    const QString code = writeFile(files, QStringLiteral("main.cpp"),
                                   "int main() { return 0; }\n// ```not a fence```\n");
    const QString png = writeFile(files, QStringLiteral("image.png"),
                                  QByteArray("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16));
    const QString latin1 = writeFile(files, QStringLiteral("latin1.txt"), "caf\xe9\n");
    const QString big =
        writeFile(files, QStringLiteral("big.log"), QByteArray(attachments::kMaxBytes + 1, 'a'));
    ASSERT_FALSE(notes.isEmpty() || code.isEmpty() || png.isEmpty() || latin1.isEmpty() ||
                 big.isEmpty());

    m_window->input()->setPlainText(QStringLiteral("Please review"));
    meter()->refresh();
    const qint64 textOnly = meter()->usedTokens();

    const QStringList problems =
        m_window->attachFiles({notes, png, latin1, big, files.filePath(QStringLiteral("gone"))});
    ASSERT_EQ(problems.size(), 4) << problems.join(QLatin1Char('|')).toStdString();
    EXPECT_TRUE(problems[0].contains(QStringLiteral("binary"))) << problems[0].toStdString();
    EXPECT_TRUE(problems[1].contains(QStringLiteral("UTF-8"))) << problems[1].toStdString();
    EXPECT_TRUE(problems[2].contains(QStringLiteral("too large"))) << problems[2].toStdString();
    EXPECT_TRUE(problems[3].contains(QStringLiteral("not a file"))) << problems[3].toStdString();
    EXPECT_FALSE(m_window->attachmentNote()->isHidden());
    ASSERT_EQ(m_window->pendingAttachments().size(), 1);

    // Dropped on the message box: attached, not pasted as a path.
    QMimeData mime;
    mime.setUrls({QUrl::fromLocalFile(code)});
    QWidget* target = m_window->input()->viewport();
    QDragEnterEvent enter(QPoint(5, 5), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QCoreApplication::sendEvent(target, &enter);
    EXPECT_TRUE(enter.isAccepted());
    QDropEvent drop(QPointF(5, 5), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
    QCoreApplication::sendEvent(target, &drop);
    ASSERT_EQ(m_window->pendingAttachments().size(), 2)
        << m_window->attachmentNote()->text().toStdString() << " accepted " << drop.isAccepted();
    EXPECT_EQ(m_window->input()->toPlainText(), QStringLiteral("Please review"));
    EXPECT_FALSE(m_window->attachmentChips()->isHidden());
    EXPECT_EQ(m_window->attachmentChips()->findChildren<QPushButton*>().size(), 2);

    // Counted by the meter.
    meter()->refresh();
    const qint64 withFiles = meter()->usedTokens();
    EXPECT_GT(withFiles, textOnly + 10);

    m_window->sendMessage();
    ASSERT_TRUE(idle());
    ASSERT_EQ(m_window->messages()->rowCount(), 2);
    const ChatMessage sent = m_window->messages()->at(0);
    EXPECT_TRUE(sent.content.startsWith(QStringLiteral("Please review\n\nFile: notes.md\n```\n")));
    EXPECT_TRUE(sent.content.contains(QStringLiteral("Caf\u00e9 and *emphasis*.")));
    // A fence longer than the file's own backtick runs.
    EXPECT_TRUE(sent.content.contains(QStringLiteral("File: main.cpp\n````\nint main()")));
    EXPECT_TRUE(sent.content.endsWith(QStringLiteral("\n````")));
    EXPECT_EQ(m_window->messages()->at(1).stats.value(QStringLiteral("prompt_tokens")).toInteger(),
              withFiles);
    EXPECT_TRUE(m_window->pendingAttachments().isEmpty());
    EXPECT_TRUE(m_window->attachmentChips()->isHidden());

    // The bubble: the typed text and a chip per file, also when the conversation is reopened.
    const qint64 conv = m_window->currentConversation();
    for (int pass = 0; pass < 2; ++pass) {
        MessageWidget* w = m_window->chatView()->messageWidget(0);
        ASSERT_NE(w, nullptr);
        EXPECT_EQ(w->body()->markdown(), QStringLiteral("Please review"));
        EXPECT_FALSE(w->attachmentsLabel()->isHidden());
        EXPECT_TRUE(w->attachmentsLabel()->text().contains(QStringLiteral("notes.md")));
        EXPECT_TRUE(w->attachmentsLabel()->text().contains(QStringLiteral("main.cpp")));
        EXPECT_EQ(w->content(), sent.content);  // Copy copies what the model read
        m_window->newConversation();
        m_window->selectConversation(conv);
    }
    EXPECT_TRUE(m_window->chatView()->messageWidget(1)->attachmentsLabel()->isHidden());

    // A chip's click removes its file; files alone (no text) can be sent.
    m_window->attachFiles({notes, code});
    ASSERT_EQ(m_window->pendingAttachments().size(), 2);
    m_window->attachmentChips()->findChildren<QPushButton*>().first()->click();
    ASSERT_EQ(m_window->pendingAttachments().size(), 1);
    EXPECT_EQ(m_window->pendingAttachments().first().name, QStringLiteral("main.cpp"));
    EXPECT_TRUE(m_window->attachmentNote()->isHidden());
    ASSERT_TRUE(send(QString()));
    ASSERT_EQ(m_window->messages()->rowCount(), 4);
    EXPECT_TRUE(m_window->messages()->at(2).content.startsWith(QStringLiteral("File: main.cpp")));
}

// Editing a message with files attached changes its typed text and keeps the files.
TEST_F(FeaturesTest, EditingAMessageWithAttachmentsKeepsThem) {
    QTemporaryDir files;
    const QString notes = writeFile(files, QStringLiteral("notes.md"), "# Notes\nline\n");
    ASSERT_FALSE(notes.isEmpty());
    m_window->input()->setPlainText(QStringLiteral("Please review"));
    ASSERT_TRUE(m_window->attachFiles({notes}).isEmpty());
    m_window->sendMessage();
    ASSERT_TRUE(idle());
    const ChatMessage sent = m_window->messages()->at(0);

    MessageWidget* w = m_window->chatView()->messageWidget(0);
    w->startEdit();
    ASSERT_TRUE(w->isEditing());
    EXPECT_EQ(w->editor()->toPlainText(), QStringLiteral("Please review"));  // the typed text
    EXPECT_FALSE(w->attachmentsLabel()->isHidden());
    w->editor()->setPlainText(QStringLiteral("Please check"));
    QTest::keyClick(w->editor(), Qt::Key_Return, Qt::ControlModifier);
    ASSERT_TRUE(idle());
    const ChatMessage m = m_window->messages()->at(0);
    EXPECT_TRUE(
        m.content.startsWith(QStringLiteral("Please check\n\nFile: notes.md\n```\n# Notes")))
        << m.content.toStdString();
    EXPECT_EQ(m.content.mid(12), sent.content.mid(13));  // the files as they were
    EXPECT_EQ(m.stats.value(QStringLiteral("attachments")), sent.stats.value("attachments"));
    EXPECT_EQ(m.stats.value(QStringLiteral("text_length")).toInt(), 12);
    w = m_window->chatView()->messageWidget(0);
    EXPECT_EQ(w->body()->markdown(), QStringLiteral("Please check"));
    EXPECT_FALSE(w->attachmentsLabel()->isHidden());
    EXPECT_TRUE(w->attachmentsLabel()->text().contains(QStringLiteral("notes.md")));
    // The text may go: the files alone are the message.
    w->startEdit();
    w->editor()->clear();
    QTest::keyClick(w->editor(), Qt::Key_Return, Qt::ControlModifier);
    ASSERT_TRUE(idle());
    EXPECT_TRUE(m_window->messages()->at(0).content.startsWith(QStringLiteral("File: notes.md")));
    EXPECT_FALSE(m_window->chatView()->messageWidget(0)->attachmentsLabel()->isHidden());
    EXPECT_EQ(m_window->messages()->at(0).versions.size(), 3);
}

// A PDF with a text layer (written here by QPdfWriter, pages of text) attaches as its text,
// page by page; a damaged file, a file that only claims to be a PDF, an encrypted PDF and a PDF
// without text are refused with the reason. A build without Qt PDF says that it cannot read PDF text.
// The Attach button and its file dialog say what can be attached: PDF where this build reads
// its text; in a build without Qt PDF (the Windows cross build), that PDF text needs the module.
TEST_F(FeaturesTest, TheAttachButtonSaysWhetherThisBuildReadsPdfText) {
    const QString tip = m_window->attachButton()->toolTip();
    EXPECT_EQ(tip, attachments::buttonToolTip());
    const QString filter = attachments::fileDialogFilter();
    EXPECT_TRUE(filter.contains(QStringLiteral("*.md"))) << filter.toStdString();
    EXPECT_TRUE(filter.endsWith(QStringLiteral("(*)"))) << filter.toStdString();
    if (attachments::canReadPdf()) {
        EXPECT_TRUE(filter.contains(QStringLiteral("*.pdf"))) << filter.toStdString();
        EXPECT_TRUE(filter.startsWith(QStringLiteral("Text, code and PDF (*.txt")))
            << filter.toStdString();
        EXPECT_TRUE(tip.contains(QStringLiteral("PDF"))) << tip.toStdString();
        EXPECT_FALSE(tip.contains(QStringLiteral("cannot"))) << tip.toStdString();
    } else {
        EXPECT_FALSE(filter.contains(QStringLiteral("pdf"), Qt::CaseInsensitive))
            << filter.toStdString();
        EXPECT_TRUE(tip.contains(QStringLiteral("Qt PDF module"))) << tip.toStdString();
    }
}

TEST_F(FeaturesTest, APdfAttachesAsItsTextPageByPage) {
    QTemporaryDir dir;
    const QString pdf = dir.filePath(QStringLiteral("report.pdf"));
    const QString scan = dir.filePath(QStringLiteral("scan.pdf"));
    {
        QPdfWriter writer(pdf);
        QPainter painter(&writer);
        painter.setFont(QFont(QStringLiteral("DejaVu Sans"), 14));
        painter.drawText(QPointF(200, 400), QStringLiteral("Quarterly figures rose"));
        writer.newPage();
        painter.drawText(QPointF(200, 400), QStringLiteral("Second page closing words"));
    }
    {
        QPdfWriter writer(scan);
        QPainter painter(&writer);
        painter.fillRect(QRectF(100, 100, 2000, 1000), Qt::darkGray);  // an image, no text
    }
    QFile whole(pdf);
    ASSERT_TRUE(whole.open(QIODevice::ReadOnly));
    const QByteArray bytes = whole.readAll();
    ASSERT_TRUE(bytes.startsWith("%PDF-"));
    const QString damaged = writeFile(dir, QStringLiteral("damaged.pdf"), bytes.left(300));
    const QString fake = writeFile(dir, QStringLiteral("notes.pdf"), "just text\n");
    // Encrypted: the standard security handler with a user password that is not empty (random
    // /O and /U: no empty password opens it), added to the trailer, which follows the offsets.
    QByteArray locked = bytes;
    const qsizetype trailer = locked.lastIndexOf("trailer");
    const qsizetype open = locked.indexOf("<<", trailer);
    ASSERT_TRUE(trailer > 0 && open > trailer);
    const QByteArray key32 = QByteArray(32, '\x5a').toHex();
    locked.insert(open + 2, "\n/Encrypt << /Filter /Standard /V 1 /R 2 /O <" + key32 + "> /U <" +
                                QByteArray(32, '\x3c').toHex() +
                                "> /P -4 >>\n/ID [<0123456789abcdef0123456789abcdef> "
                                "<0123456789abcdef0123456789abcdef>]\n");
    const QString encrypted = writeFile(dir, QStringLiteral("locked.pdf"), locked);

    Attachment a;
    QString error;
    if (!attachments::canReadPdf()) {
        EXPECT_FALSE(attachments::read(pdf, &a, &error));
        EXPECT_TRUE(error.contains(QStringLiteral("cannot read PDF text"))) << error.toStdString();
        EXPECT_TRUE(error.contains(QStringLiteral("Qt PDF module"))) << error.toStdString();
        return;
    }
    ASSERT_TRUE(attachments::read(pdf, &a, &error)) << error.toStdString();
    EXPECT_EQ(a.name, QStringLiteral("report.pdf"));
    const int one = static_cast<int>(a.text.indexOf(QStringLiteral("--- Page 1 of 2 ---\n")));
    const int first = static_cast<int>(a.text.indexOf(QStringLiteral("Quarterly figures rose")));
    const int two = static_cast<int>(a.text.indexOf(QStringLiteral("--- Page 2 of 2 ---\n")));
    const int second =
        static_cast<int>(a.text.indexOf(QStringLiteral("Second page closing words")));
    EXPECT_EQ(one, 0) << a.text.toStdString();
    EXPECT_TRUE(one < first && first < two && two < second) << a.text.toStdString();
    EXPECT_EQ(a.bytes, a.text.toUtf8().size());

    EXPECT_FALSE(attachments::read(damaged, &a, &error));
    EXPECT_TRUE(error.contains(QStringLiteral("damaged"))) << error.toStdString();
    EXPECT_FALSE(attachments::read(fake, &a, &error));
    EXPECT_TRUE(error.contains(QStringLiteral("damaged or not a PDF"))) << error.toStdString();
    EXPECT_FALSE(attachments::read(encrypted, &a, &error));
    EXPECT_TRUE(error.contains(QStringLiteral("encrypted"))) << error.toStdString();
    EXPECT_FALSE(attachments::read(scan, &a, &error));
    EXPECT_TRUE(error.contains(QStringLiteral("no text layer"))) << error.toStdString();

    // In the window: a chip, the text inlined and counted like a text file's.
    meter()->refresh();
    const qint64 empty = meter()->usedTokens();
    ASSERT_TRUE(m_window->attachFiles({pdf}).isEmpty());
    meter()->refresh();
    EXPECT_GT(meter()->usedTokens(), empty + 8);
    ASSERT_TRUE(send(QStringLiteral("Summarise")));
    const ChatMessage sent = m_window->messages()->at(0);
    EXPECT_TRUE(sent.content.startsWith(
        QStringLiteral("Summarise\n\nFile: report.pdf\n```\n--- Page 1 of 2 ---\n")))
        << sent.content.toStdString();
    EXPECT_TRUE(m_window->chatView()->messageWidget(0)->attachmentsLabel()->text().contains(
        QStringLiteral("report.pdf")));
}

}  // namespace
}  // namespace neural::gui

namespace neural::gui {
namespace {

// Assistants: saved from the panel with every field, chosen to fill them, the default one
// (Settings page) filling each New conversation; kept across a restart; a damaged list reads
// as none; deleting the default one leaves none.
TEST_F(FeaturesTest, AssistantsFillTheSettingsAndTheDefaultOneStartsNewConversations) {
    SettingsPanel* panel = m_window->settingsPanel();
    EXPECT_EQ(panel->assistantBox()->count(), 0);
    panel->systemPromptEdit()->setPlainText(QStringLiteral("You are a terse Rust reviewer."));
    panel->effortBox()->setCurrentIndex(panel->effortBox()->findData(QStringLiteral("high")));
    panel->temperatureBox()->setValue(0.3);
    panel->topKBox()->setValue(40);
    ASSERT_TRUE(panel->saveAsAssistant(QStringLiteral("Rust reviewer")));
    EXPECT_FALSE(saveAssistant({QStringLiteral("  "), {}}));  // a name is needed
    ASSERT_EQ(panel->assistantBox()->count(), 1);
    EXPECT_EQ(panel->assistantBox()->currentText(), QStringLiteral("Rust reviewer"));
    panel->temperatureBox()->setValue(0.9);
    emit panel->settingsChanged();
    EXPECT_EQ(panel->assistantBox()->currentIndex(), -1);  // the fields left it: "None"

    // Chosen: every field back, stored with the conversation and sent with the turn.
    ASSERT_TRUE(send(QStringLiteral("hello")));
    panel->assistantBox()->setCurrentIndex(0);
    emit panel->assistantBox()->activated(0);
    EXPECT_EQ(panel->settings().systemPrompt, QStringLiteral("You are a terse Rust reviewer."));
    EXPECT_EQ(panel->settings().reasoningEffort, QStringLiteral("high"));
    EXPECT_DOUBLE_EQ(panel->settings().sampling.temperature, 0.3);
    EXPECT_EQ(panel->settings().sampling.topK, 40);
    const auto stored = m_window->store().conversation(m_window->currentConversation());
    ASSERT_TRUE(stored);
    EXPECT_EQ(stored->systemPrompt, QStringLiteral("You are a terse Rust reviewer."));
    EXPECT_EQ(stored->reasoningEffort, QStringLiteral("high"));
    ASSERT_TRUE(send(QStringLiteral("again")));
    EXPECT_EQ(m_window->engine()->lastRequest().developer.instructions.value_or(""),
              "You are a terse Rust reviewer.");
    EXPECT_FLOAT_EQ(m_window->engine()->lastRequest().sampling.temperature, 0.3f);

    // Without a default, a New conversation has no system prompt; with one, its settings.
    m_window->newConversation();
    EXPECT_TRUE(panel->settings().systemPrompt.isEmpty());
    {
        AppSettingsDialog dialog(m_window.get());
        QComboBox* box = dialog.defaultAssistantBox();
        ASSERT_EQ(box->count(), 2);  // None and the assistant
        box->setCurrentIndex(box->findData(QStringLiteral("Rust reviewer")));
        dialog.save();
    }
    EXPECT_EQ(defaultAssistant(), QStringLiteral("Rust reviewer"));
    m_window->newConversation();
    EXPECT_EQ(panel->settings().systemPrompt, QStringLiteral("You are a terse Rust reviewer."));
    EXPECT_EQ(panel->assistantBox()->currentText(), QStringLiteral("Rust reviewer"));
    ASSERT_TRUE(send(QStringLiteral("new one")));
    EXPECT_EQ(m_window->store().conversation(m_window->currentConversation())->systemPrompt,
              QStringLiteral("You are a terse Rust reviewer."));

    // Deleting the default one leaves none; a damaged list reads as none.
    panel->deleteAssistantButton()->click();
    EXPECT_EQ(panel->assistantBox()->count(), 0);
    EXPECT_TRUE(defaultAssistant().isEmpty());
    m_window->newConversation();
    EXPECT_TRUE(panel->settings().systemPrompt.isEmpty());
    appSettings()->setValue(settingsKey::assistants, QStringLiteral("[{\"name\": 3}, not json"));
    EXPECT_TRUE(assistants().isEmpty());
    appSettings()->setValue(settingsKey::assistants,
                            QStringLiteral("[{\"name\":\"A\",\"reasoning_effort\":\"extreme\","
                                           "\"sampling\":{\"temperature\":99}},{\"name\":\"\"}]"));
    const QList<Assistant> list = assistants();
    ASSERT_EQ(list.size(), 1);
    EXPECT_EQ(list[0].settings.reasoningEffort, QStringLiteral("medium"));
    EXPECT_LE(list[0].settings.sampling.temperature, SamplingSettings::kMaxTemperature);
}

}  // namespace
}  // namespace neural::gui
