// The chat view, driven through its real widgets offscreen: Markdown rendered live while a
// reply streams (incrementally), code blocks with a language label, a Copy link and syntax
// colours, tables and quotes styled from the palette, a theme switch re-rendering the messages,
// the view following a streamed reply and reopening at the end or a restored place, reply
// versions, delete and edit in place, live stats, focus and accessible names. The end-to-end
// tests run the main window on the tiny fixture.
#include <gtest/gtest.h>

#include <QAccessible>

#include <QApplication>
#include <QImage>
#include <QMenu>
#include <QContextMenuEvent>
#include <QClipboard>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QSqlQuery>
#include <QSqlDatabase>
#include <QStyle>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBlock>
#include <QTextDocument>
#include <QTextFrame>
#include <QTextTable>
#include <QToolButton>

#include "app/mainwindow.h"
#include "common/paths.h"
#include "app/theme.h"
#include "conversation/chatinput.h"
#include "conversation/chatview.h"
#include "conversation/markdown.h"
#include "conversation/messagemodel.h"
#include "fixture_window.h"
#include "gui_test_support.h"
#include "support/fixtures.h"

namespace neural::gui {
namespace {

using test::spinFor;
using test::spinUntil;

StoredMessage message(qint64 id, const QString& role, const QString& content) {
    StoredMessage m;
    m.id = id;
    m.role = role;
    m.content = content;
    return m;
}

// The first block of the first fenced code block in `doc`.
QTextBlock firstCodeBlock(const QTextDocument* doc) {
    for (QTextBlock b = doc->begin(); b.isValid(); b = b.next())
        if (b.blockFormat().hasProperty(QTextFormat::BlockCodeFence)) return b;
    return {};
}

// The foreground colour of the character at `offset` in block `b`.
QColor colourAt(const QTextBlock& b, int offset) {
    for (auto it = b.begin(); !it.atEnd(); ++it) {
        const QTextFragment f = it.fragment();
        if (offset >= f.position() - b.position() &&
            offset < f.position() - b.position() + f.length())
            return f.charFormat().foreground().color();
    }
    return {};
}

TEST(Highlighter, ColoursKeywordsStringsCommentsAndNumbersPerLanguage) {
    auto kinds = [](const QString& code, const QString& lang) {
        QStringList out;
        for (const CodeSpan& s : highlightCode(code, codeLanguage(lang)))
            out << QStringLiteral("%1:%2").arg(int(s.kind)).arg(code.mid(s.start, s.length));
        return out.join(QLatin1Char('|'));
    };
    // kind numbers: 0 keyword, 1 string, 2 comment, 3 number
    EXPECT_EQ(kinds(QStringLiteral("int x = 42; // the answer"), QStringLiteral("c++")),
              QStringLiteral("0:int|3:42|2:// the answer"));
    EXPECT_EQ(kinds(QStringLiteral("/* two\nlines */ return \"a\\\"b\";"), QStringLiteral("cpp")),
              QStringLiteral("2:/* two\nlines */|0:return|1:\"a\\\"b\""));
    EXPECT_EQ(kinds(QStringLiteral("def f():\n    return '''x\ny''' # done"), QStringLiteral("py")),
              QStringLiteral("0:def|0:return|1:'''x\ny'''|2:# done"));
    EXPECT_EQ(kinds(QStringLiteral("const s = `a\nb`; let n = 3.5;"), QStringLiteral("ts")),
              QStringLiteral("0:const|1:`a\nb`|0:let|3:3.5"));
    EXPECT_EQ(
        kinds(QStringLiteral("{\"a\": -1, \"b\": true, \"c\": null}"), QStringLiteral("json")),
        QStringLiteral("1:\"a\"|3:-1|1:\"b\"|0:true|1:\"c\"|0:null"));
    EXPECT_EQ(kinds(QStringLiteral("echo '#not' # yes"), QStringLiteral("bash")),
              QStringLiteral("0:echo|1:'#not'|2:# yes"));
    EXPECT_EQ(kinds(QStringLiteral("fn main<'a>() { let s = \"x\"; }"), QStringLiteral("rs")),
              QStringLiteral("0:fn|0:let|1:\"x\""));
    EXPECT_EQ(kinds(QStringLiteral("func main() { var x int = 0x1F }"), QStringLiteral("golang")),
              QStringLiteral("0:func|0:var|0:int|3:0x1F"));
    // Unknown languages and unterminated text: no colours / a span to the end, no crash.
    EXPECT_TRUE(
        highlightCode(QStringLiteral("int x"), codeLanguage(QStringLiteral("cobol"))).isEmpty());
    EXPECT_EQ(kinds(QStringLiteral("x = \"open"), QStringLiteral("python")),
              QStringLiteral("1:\"open"));
    EXPECT_EQ(kinds(QStringLiteral("/* open"), QStringLiteral("c")), QStringLiteral("2:/* open"));
    EXPECT_TRUE(highlightCode(QString(), QStringLiteral("cpp")).isEmpty());
}

TEST(Markdown, CodeBlocksGetAHeaderWithTheLanguageAndACopyLinkAndColours) {
    QPalette light = QApplication::style()->standardPalette();
    QTextDocument doc;
    const QStringList codes = renderMarkdown(
        &doc, QStringLiteral("Text\n\n```python\nimport os\nprint('hi')\n```\n\n```\nplain\n```\n"),
        light, 3);
    ASSERT_EQ(codes.size(), 2);
    EXPECT_EQ(codes[0], QStringLiteral("import os\nprint('hi')"));
    EXPECT_EQ(codes[1], QStringLiteral("plain"));
    const QString html = doc.toHtml();
    EXPECT_NE(html.indexOf(QStringLiteral("copy-code:3")), -1);
    EXPECT_NE(html.indexOf(QStringLiteral("copy-code:4")), -1);
    EXPECT_NE(doc.toPlainText().indexOf(QStringLiteral("python")), -1);  // the label
    const QTextBlock code = firstCodeBlock(&doc);
    ASSERT_TRUE(code.isValid());
    EXPECT_EQ(code.text(), QStringLiteral("import os"));
    const CodeColors colours = codeColors(light);
    EXPECT_EQ(colourAt(code, 0), colours.keyword);        // import
    EXPECT_EQ(colourAt(code.next(), 7), colours.string);  // 'hi'
    EXPECT_EQ(code.blockFormat().background().color(), colours.background);
}

TEST(Markdown, TablesHaveBordersAndPaddingAndQuotesATintedBand) {
    const QPalette pal = QApplication::style()->standardPalette();
    QTextDocument doc;
    renderMarkdown(&doc,
                   QStringLiteral("| Name | Size |\n|:-----|-----:|\n| a | 1 |\n| longer | 22 |\n\n"
                                  "> quoted words\n"),
                   pal);
    QTextTable* table = nullptr;
    for (QTextFrame* f : doc.rootFrame()->childFrames())
        if (auto* t = qobject_cast<QTextTable*>(f)) table = t;
    ASSERT_NE(table, nullptr);
    EXPECT_EQ(table->columns(), 2);
    EXPECT_EQ(table->rows(), 3);
    EXPECT_EQ(table->format().border(), 1);
    EXPECT_EQ(table->format().cellPadding(), 4);
    EXPECT_TRUE(table->format().borderCollapse());
    // Header cells hold their text only (no empty line above it), in bold.
    const QTextTableCell head = table->cellAt(0, 0);
    EXPECT_EQ(head.firstCursorPosition().block().text(), QStringLiteral("Name"));
    EXPECT_EQ(head.firstCursorPosition().block(), head.lastCursorPosition().block());
    EXPECT_EQ(head.firstCursorPosition().block().begin().fragment().charFormat().fontWeight(),
              QFont::Bold);
    // The right-aligned column stays right-aligned.
    EXPECT_TRUE(table->cellAt(1, 1).firstCursorPosition().blockFormat().alignment() &
                Qt::AlignRight);
    bool quote = false;
    for (QTextBlock b = doc.begin(); b.isValid(); b = b.next())
        if (b.text() == QStringLiteral("quoted words"))
            quote = b.blockFormat().background().style() != Qt::NoBrush;
    EXPECT_TRUE(quote);
}

// A table right after a code block: Qt's importer put an empty code line at the top of the
// first cell (its header text a line lower than the others, and joined to the code block).
TEST(Markdown, ATableAfterACodeBlockHasNoEmptyLineInItsFirstCell) {
    QTextDocument doc;
    const QStringList codes = renderMarkdown(
        &doc, QStringLiteral("```python\nx = 1\n```\n\n| input | output |\n|---|---|\n| 1 | 2 |\n"),
        QApplication::palette());
    EXPECT_EQ(codes, QStringList{QStringLiteral("x = 1")});
    QTextTable* table = nullptr;
    for (QTextFrame* f : doc.rootFrame()->childFrames())
        if (auto* t = qobject_cast<QTextTable*>(f)) table = t;
    ASSERT_NE(table, nullptr);
    const QTextTableCell cell = table->cellAt(0, 0);
    EXPECT_EQ(cell.firstCursorPosition().block().text(), QStringLiteral("input"));
    EXPECT_EQ(cell.firstCursorPosition().block(), cell.lastCursorPosition().block());
    EXPECT_FALSE(cell.firstCursorPosition().blockFormat().hasProperty(QTextFormat::BlockCodeFence));
}

TEST(Markdown, TheStablePrefixEndsAfterCompleteBlocksOnly) {
    EXPECT_EQ(stablePrefixLength(QStringLiteral("one para")), 0);
    EXPECT_EQ(stablePrefixLength(QStringLiteral("one\n\ntwo")), 5);
    // Inside an open fence a blank line is code, not a block end.
    EXPECT_EQ(stablePrefixLength(QStringLiteral("a\n\n```\nx\n\ny")), 3);
    EXPECT_EQ(stablePrefixLength(QStringLiteral("a\n\n```\nx\n```\nafter")), 13);
    // A long paragraph without blank lines is cut at a line break.
    const QString longText = QString(30, QLatin1Char('w')) + QStringLiteral("\nmore");
    EXPECT_EQ(stablePrefixLength(longText, 10), 31);
}

// Streams a reply in small pieces: what is complete is rendered once (the stable length
// grows), code is highlighted while it streams, and the end result reads as the full render.
TEST(ChatView, StreamingRendersMarkdownLiveAndIncrementally) {
    const QString reply = QStringLiteral(
        "# Title\n\nSome **bold** text.\n\n```cpp\nint main() {\n    return 0;\n}\n```\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\nThe end.");
    MessageBody body;
    body.resize(500, 100);
    body.show();
    int stableSeen = 0;
    bool highlightedWhileStreaming = false;
    const CodeColors colours = codeColors(body.palette());
    for (int n = 1; n <= reply.size(); n += 3) {
        body.showStreamingMarkdown(reply.left(n));
        EXPECT_GE(body.stableLength(), stableSeen);
        stableSeen = body.stableLength();
        const QTextBlock code = firstCodeBlock(body.document());
        if (code.isValid() && code.text().startsWith(QStringLiteral("int")) &&
            n < reply.indexOf(QStringLiteral("| a")))
            highlightedWhileStreaming |= colourAt(code, 0) == colours.keyword;
    }
    body.showStreamingMarkdown(reply);
    EXPECT_TRUE(highlightedWhileStreaming);
    EXPECT_EQ(body.stableLength(), reply.indexOf(QStringLiteral("The end.")));
    EXPECT_EQ(body.codeTexts(), QStringList{QStringLiteral("int main() {\n    return 0;\n}")});
    const QString streamed = body.document()->toPlainText();
    QTextDocument full;
    renderMarkdown(&full, reply, body.palette());
    EXPECT_EQ(streamed.simplified(), full.toPlainText().simplified());
    // The "Copy" link of the streamed code block copies it.
    emit body.anchorClicked(QUrl(QStringLiteral("copy-code:0")));
    EXPECT_EQ(QApplication::clipboard()->text(), QStringLiteral("int main() {\n    return 0;\n}"));
    // Out of range: nothing happens.
    emit body.anchorClicked(QUrl(QStringLiteral("copy-code:7")));
    EXPECT_EQ(QApplication::clipboard()->text(), QStringLiteral("int main() {\n    return 0;\n}"));
}

// Dark -> light: code blocks rendered in the dark theme kept their dark background with the
// light theme's dark text (colours were fixed at render time and nothing re-rendered).
TEST(ChatView, AThemeSwitchRerendersCodeBlocksInTheNewColours) {
    applyTheme(QStringLiteral("dark"));
    MessageModel model;
    ChatView view(&model);
    view.resize(600, 400);
    view.show();
    model.setMessages({message(1, QStringLiteral("user"), QStringLiteral("code?")),
                       message(2, QStringLiteral("assistant"),
                               QStringLiteral("Sure:\n\n```js\nlet x = 1;\n```\n"))});
    spinFor(50);
    MessageBody* body = view.messageWidget(1)->body();
    QTextBlock code = firstCodeBlock(body->document());
    ASSERT_TRUE(code.isValid());
    EXPECT_LT(code.blockFormat().background().color().lightness(), 100);

    applyTheme(QStringLiteral("light"));
    ASSERT_TRUE(spinUntil(
        [&] {
            const QTextBlock b = firstCodeBlock(body->document());
            return b.isValid() && b.blockFormat().background().color().lightness() > 180;
        },
        3000));
    code = firstCodeBlock(body->document());
    const QColor text = colourAt(code, 4);  // "x": plain code text
    EXPECT_LT(text.lightness(), 100) << "light theme, dark code text";
    EXPECT_EQ(colourAt(code, 0), codeColors(body->palette()).keyword);
    applyTheme(QStringLiteral("light"));
}

// A conversation reopened at the top and stopped following the reply streaming into it.
TEST(ChatView, AReopenedConversationShowsItsEndAndFollowsAStreamedReply) {
    MessageModel model;
    ChatView view(&model);
    view.resize(500, 300);
    view.show();
    QList<StoredMessage> history;
    for (int i = 0; i < 16; ++i)
        history << message(i + 1, i % 2 ? QStringLiteral("assistant") : QStringLiteral("user"),
                           QStringLiteral("Message %1\n\nwith a second paragraph of text.").arg(i));
    model.setMessages(history);
    QScrollBar* bar = view.verticalScrollBar();
    ASSERT_TRUE(spinUntil([&] { return bar->maximum() > 300; }, 3000));
    spinFor(50);
    EXPECT_EQ(bar->value(), bar->maximum());
    EXPECT_EQ(view.scrollPosition(), -1);

    model.append(message(100, QStringLiteral("user"), QStringLiteral("next question")));
    model.beginStreaming();
    for (int i = 0; i < 30; ++i) {
        model.appendDelta({}, QStringLiteral("line %1 of the reply\n\n").arg(i), 5);
        spinFor(5);
    }
    spinFor(50);
    EXPECT_EQ(bar->value(), bar->maximum()) << "the view stopped following the reply";

    // Scrolled up by the user: the view stays where it is while the reply grows.
    bar->setValue(100);
    EXPECT_EQ(view.scrollPosition(), 100);
    for (int i = 0; i < 10; ++i) model.appendDelta({}, QStringLiteral("more text\n\n"), 2);
    spinFor(50);
    EXPECT_EQ(bar->value(), 100);
    EXPECT_FALSE(view.followsEnd());

    // Live stats while streaming.
    MessageWidget* live = view.messageWidget(view.messageCount() - 1);
    EXPECT_NE(live->statsLabel()->text().indexOf(QStringLiteral("tokens")), -1)
        << live->statsLabel()->text().toStdString();
    EXPECT_NE(live->statsLabel()->text().indexOf(QStringLiteral("first token")), -1);
}

// Your bubbles were indented when sent but full width when reopened: the indent was taken from
// the view's width before the window was laid out and never again.
TEST(ChatView, YourBubblesKeepTheirIndentWhenTheViewIsLaidOutLater) {
    MessageModel model;
    ChatView view(&model);
    model.setMessages({message(1, QStringLiteral("user"), QStringLiteral("mine")),
                       message(2, QStringLiteral("assistant"), QStringLiteral("reply"))});
    view.resize(800, 400);
    view.show();
    spinFor(50);
    EXPECT_EQ(view.messageWidget(0)->contentsMargins().left(), 100);
    EXPECT_EQ(view.messageWidget(1)->contentsMargins().right(), 50);
}

TEST(ChatView, RestoresASavedScrollPositionOnceLaidOut) {
    MessageModel model;
    ChatView view(&model);
    view.resize(500, 300);
    view.show();
    QList<StoredMessage> history;
    for (int i = 0; i < 16; ++i)
        history << message(i + 1, QStringLiteral("user"),
                           QStringLiteral("Message %1\n\nmore").arg(i));
    model.setMessages(history);
    view.restoreScrollPosition(200);  // before the layout has happened
    QScrollBar* bar = view.verticalScrollBar();
    ASSERT_TRUE(spinUntil([&] { return bar->maximum() > 400; }, 3000));
    spinFor(50);
    EXPECT_EQ(bar->value(), 200);
    EXPECT_EQ(view.scrollPosition(), 200);
    view.restoreScrollPosition(-1);
    EXPECT_EQ(bar->value(), bar->maximum());
    EXPECT_TRUE(view.followsEnd());
}

TEST(ChatView, MessagesHaveAccessibleNamesAndTheirText) {
    MessageModel model;
    ChatView view(&model);
    view.show();
    model.setMessages({message(1, QStringLiteral("user"), QStringLiteral("What is 2+2?")),
                       message(2, QStringLiteral("assistant"), QStringLiteral("It is **4**."))});
    // Role and text, as a screen reader reads it (QAccessible: the widget's name), the text as
    // shown (no Markdown marks).
    EXPECT_EQ(view.messageWidget(0)->accessibleName(), QStringLiteral("You: What is 2+2?"));
    EXPECT_EQ(view.messageWidget(0)->accessibleDescription(), QStringLiteral("What is 2+2?"));
    EXPECT_EQ(view.messageWidget(1)->accessibleName(), QStringLiteral("Assistant: It is 4."));
    QAccessibleInterface* iface = QAccessible::queryAccessibleInterface(view.messageWidget(1));
    ASSERT_NE(iface, nullptr);
    EXPECT_EQ(iface->text(QAccessible::Name), QStringLiteral("Assistant: It is 4."));
    EXPECT_EQ(view.messageWidget(1)->body()->toPlainText(), QStringLiteral("It is 4."));
    for (QPushButton* b : view.findChildren<QPushButton*>())
        EXPECT_FALSE(b->accessibleName().isEmpty()) << b->text().toStdString();
}

TEST(ConversationStore, KeepsReplyVersionsAndDeletesMessagesInPlace) {
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("c.sqlite"));
    qint64 conv = 0, reply = 0;
    {
        ConversationStore s;
        ASSERT_TRUE(s.open(path)) << s.lastError().toStdString();
        conv = s.createConversation(QStringLiteral("t"));
        s.appendMessage(conv, QStringLiteral("user"), QStringLiteral("q1"));
        reply = s.appendMessage(conv, QStringLiteral("assistant"), QStringLiteral("a1")).id;
        s.appendMessage(conv, QStringLiteral("user"), QStringLiteral("q2"));
        const QList<MessageVersion> versions = {{QStringLiteral("a1"), {}, {}},
                                                {QStringLiteral("a1 again"), QStringLiteral("why"),
                                                 QJsonObject{{QStringLiteral("tokens"), 3}}}};
        ASSERT_TRUE(s.setMessageVersions(reply, versions, 1));
        EXPECT_FALSE(s.setMessageVersions(reply, versions, 2));  // out of range: refused
        EXPECT_FALSE(s.setMessageVersions(reply, {}, 0));
        EXPECT_FALSE(s.deleteMessage(conv, 9));  // no such message
    }
    ConversationStore s;
    ASSERT_TRUE(s.open(path));
    auto msgs = s.messages(conv);
    ASSERT_EQ(msgs.size(), 3);
    EXPECT_EQ(msgs[1].content, QStringLiteral("a1 again"));
    EXPECT_EQ(msgs[1].reasoning, QStringLiteral("why"));
    EXPECT_EQ(msgs[1].version, 1);
    ASSERT_EQ(msgs[1].versions.size(), 2);
    EXPECT_EQ(msgs[1].versions[0].content, QStringLiteral("a1"));

    ASSERT_TRUE(s.deleteMessage(conv, 0));
    msgs = s.messages(conv);
    ASSERT_EQ(msgs.size(), 2);
    EXPECT_EQ(msgs[0].position, 0);
    EXPECT_EQ(msgs[0].content, QStringLiteral("a1 again"));
    EXPECT_EQ(msgs[1].position, 1);
    EXPECT_EQ(s.appendMessage(conv, QStringLiteral("user"), QStringLiteral("q3")).position, 2);

    // A damaged versions column reads as a message with one version.
    {
        QSqlDatabase db =
            QSqlDatabase::addDatabase(QStringLiteral("QSQLITE"), QStringLiteral("raw"));
        db.setDatabaseName(path);
        ASSERT_TRUE(db.open());
        QSqlQuery q(db);
        ASSERT_TRUE(
            q.exec(QStringLiteral("UPDATE messages SET versions = 'not json', version = 5")));
        db.close();
    }
    QSqlDatabase::removeDatabase(QStringLiteral("raw"));
    msgs = s.messages(conv);
    ASSERT_EQ(msgs.size(), 3);
    EXPECT_TRUE(msgs[0].versions.isEmpty());
    EXPECT_EQ(msgs[0].version, 0);
    EXPECT_EQ(msgs[0].content, QStringLiteral("a1 again"));
}

const QString kForced = QStringLiteral(
    "<|channel|>analysis<|message|>Short thought.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Here is code:\n\n```python\nx = 1\n```\n");

class ChatWindowTest : public ::testing::Test {
protected:
    void SetUp() override {
        appSettings()->setValue(QStringLiteral("chat/maxTokens"), 30);
        m_window = std::make_unique<MainWindow>(test::fixtureWindowOptions(m_dir));
        m_window->engine()->setForcedOutput(kForced);
        m_window->show();
    }

    bool idle(int rows) {
        return spinUntil([&] {
            return !m_window->engine()->busy() && m_window->messages()->rowCount() == rows &&
                   !m_window->messages()->isStreaming();
        });
    }

    bool sendAndWait(const QString& text) {
        const int before = m_window->messages()->rowCount();
        m_window->input()->setPlainText(text);
        m_window->sendMessage();
        return idle(before + 2);
    }

    QTemporaryDir m_dir;
    std::unique_ptr<MainWindow> m_window;
};

// Closing the window while a reply streams: the engine host, deleted after the window's
// members, ended the turn with turnFinished into slots that used the destroyed store.
TEST_F(ChatWindowTest, TheWindowGoesAwayWhileAReplyStreams) {
    ASSERT_TRUE(spinUntil([&] { return m_window->engine()->state() == EngineHost::State::ready; }));
    appSettings()->setValue(QStringLiteral("chat/maxTokens"), 400);
    m_window->engine()->setForcedOutput({});
    m_window->input()->setPlainText(QStringLiteral("a long answer please"));
    m_window->sendMessage();
    // Mid-stream: the reply has text, in its answer or its reasoning (the random fixture may
    // spend many tokens in the analysis channel first).
    ASSERT_TRUE(spinUntil([&] {
        if (!m_window->messages()->isStreaming()) return false;
        const auto& last = m_window->messages()->at(m_window->messages()->rowCount() - 1);
        return !last.content.isEmpty() || !last.reasoning.isEmpty();
    }));
    ASSERT_TRUE(m_window->engine()->busy());
    m_window.reset();
    SUCCEED();
}

TEST_F(ChatWindowTest, FocusStartsInTheMessageBox) {
    EXPECT_EQ(m_window->focusWidget(), m_window->input());
}

// Regenerate kept no earlier reply: it was deleted before the new one streamed.
TEST_F(ChatWindowTest, RegenerateKeepsTheEarlierRepliesAsVersions) {
    ASSERT_TRUE(spinUntil([&] { return m_window->engine()->state() == EngineHost::State::ready; }));
    ASSERT_TRUE(sendAndWait(QStringLiteral("question")));
    const QString first = m_window->messages()->at(1).content;
    m_window->engine()->setForcedOutput(
        QStringLiteral("<|channel|>final<|message|>A second answer.<|end|>"));
    m_window->regenerate(1);
    ASSERT_TRUE(idle(2));
    const ChatMessage& now = m_window->messages()->at(1);
    ASSERT_EQ(now.versions.size(), 2);
    EXPECT_EQ(now.version, 1);
    EXPECT_TRUE(now.content.startsWith(QStringLiteral("A second answer.")));
    MessageWidget* w = m_window->chatView()->messageWidget(1);
    EXPECT_TRUE(w->versionLabel()->isVisible());
    EXPECT_EQ(w->versionLabel()->text(), QStringLiteral("2/2"));

    // "<": the first reply again, also after a restart (stored).
    auto* prev = w->findChild<QToolButton*>();
    for (QToolButton* b : w->findChildren<QToolButton*>())
        if (b->accessibleName() == QStringLiteral("Previous version")) prev = b;
    ASSERT_TRUE(prev->isEnabled());
    QTest::mouseClick(prev, Qt::LeftButton);
    EXPECT_EQ(m_window->messages()->at(1).content, first);
    EXPECT_EQ(w->versionLabel()->text(), QStringLiteral("1/2"));
    const auto stored = m_window->store().messages(m_window->currentConversation());
    ASSERT_EQ(stored.size(), 2);
    EXPECT_EQ(stored[1].content, first);
    EXPECT_EQ(stored[1].versions.size(), 2);
}

TEST_F(ChatWindowTest, EditInPlaceResendsAndFocusReturnsToTheInput) {
    ASSERT_TRUE(spinUntil([&] { return m_window->engine()->state() == EngineHost::State::ready; }));
    ASSERT_TRUE(sendAndWait(QStringLiteral("first question")));
    MessageWidget* w = m_window->chatView()->messageWidget(0);
    QPushButton* edit = nullptr;
    for (QPushButton* b : w->findChildren<QPushButton*>())
        if (b->accessibleName() == QStringLiteral("Edit and resend message")) edit = b;
    ASSERT_NE(edit, nullptr);
    QTest::mouseClick(edit, Qt::LeftButton);
    ASSERT_TRUE(w->isEditing());
    EXPECT_TRUE(QApplication::activeModalWidget() == nullptr);  // no dialog
    EXPECT_EQ(w->editor()->toPlainText(), QStringLiteral("first question"));
    w->editor()->selectAll();
    QTest::keyClicks(w->editor(), QStringLiteral("better question"));
    QTest::keyClick(w->editor(), Qt::Key_Return, Qt::ControlModifier);
    ASSERT_TRUE(idle(2));
    EXPECT_EQ(m_window->messages()->at(0).content, QStringLiteral("better question"));
    EXPECT_EQ(m_window->store().messages(m_window->currentConversation())[0].content,
              QStringLiteral("better question"));
    EXPECT_EQ(m_window->focusWidget(), m_window->input());

    // Esc cancels an edit and keeps the message.
    w = m_window->chatView()->messageWidget(0);
    w->startEdit();
    QTest::keyClicks(w->editor(), QStringLiteral(" changed"));
    QTest::keyClick(w->editor(), Qt::Key_Escape);
    EXPECT_FALSE(w->isEditing());
    EXPECT_EQ(m_window->messages()->at(0).content, QStringLiteral("better question"));
}

TEST_F(ChatWindowTest, DeleteRemovesOneMessageFromTheViewAndTheFile) {
    ASSERT_TRUE(spinUntil([&] { return m_window->engine()->state() == EngineHost::State::ready; }));
    ASSERT_TRUE(sendAndWait(QStringLiteral("one")));
    ASSERT_TRUE(sendAndWait(QStringLiteral("two")));
    MessageWidget* w = m_window->chatView()->messageWidget(1);
    QPushButton* del = nullptr;
    for (QPushButton* b : w->findChildren<QPushButton*>())
        if (b->accessibleName() == QStringLiteral("Delete message")) del = b;
    ASSERT_NE(del, nullptr);
    QTest::mouseClick(del, Qt::LeftButton);
    ASSERT_EQ(m_window->messages()->rowCount(), 3);
    EXPECT_EQ(m_window->chatView()->messageCount(), 3);
    EXPECT_EQ(m_window->messages()->at(1).content, QStringLiteral("two"));
    const auto stored = m_window->store().messages(m_window->currentConversation());
    ASSERT_EQ(stored.size(), 3);
    EXPECT_EQ(stored[1].content, QStringLiteral("two"));
    EXPECT_EQ(stored[1].position, 1);
}

// Regenerate after a message of yours whose reply was deleted cut that message away and
// regenerated the reply before it: it answers the message instead.
TEST_F(ChatWindowTest, RegenerateAnswersAMessageWhoseReplyWasDeleted) {
    ASSERT_TRUE(spinUntil([&] { return m_window->engine()->state() == EngineHost::State::ready; }));
    ASSERT_TRUE(sendAndWait(QStringLiteral("A")));
    ASSERT_TRUE(sendAndWait(QStringLiteral("B")));
    m_window->deleteLastMessage();  // B's reply
    ASSERT_EQ(m_window->messages()->rowCount(), 3);
    m_window->regenerateLast();
    ASSERT_TRUE(idle(4));
    EXPECT_EQ(m_window->messages()->at(2).content, QStringLiteral("B"));
    EXPECT_EQ(m_window->messages()->at(3).role, QStringLiteral("assistant"));
    const auto stored = m_window->store().messages(m_window->currentConversation());
    ASSERT_EQ(stored.size(), 4);
    EXPECT_EQ(stored[0].content, QStringLiteral("A"));
    EXPECT_EQ(stored[2].content, QStringLiteral("B"));
    EXPECT_EQ(stored[1].versions.size(), 0);  // A's reply untouched
}

// Regenerate from the reply's button moved the keyboard focus to the conversation search (the
// focused button was deleted with the reply): the message box takes it.
TEST_F(ChatWindowTest, RegenerateReturnsTheFocusToTheMessageBox) {
    ASSERT_TRUE(spinUntil([&] { return m_window->engine()->state() == EngineHost::State::ready; }));
    ASSERT_TRUE(sendAndWait(QStringLiteral("question")));
    MessageWidget* w = m_window->chatView()->messageWidget(1);
    QPushButton* regen = nullptr;
    for (QPushButton* b : w->findChildren<QPushButton*>())
        if (b->accessibleName() == QStringLiteral("Regenerate reply")) regen = b;
    ASSERT_NE(regen, nullptr);
    m_window->activateWindow();
    regen->setFocus();
    ASSERT_TRUE(spinUntil([&] { return regen->hasFocus(); }, 2000));
    regen->click();
    ASSERT_TRUE(idle(2));
    EXPECT_EQ(m_window->focusWidget(), m_window->input());
}

// The reply's statistics were cut off ("112 tokens · 1(") at the default window width once the
// version arrows appeared beside the buttons.
TEST_F(ChatWindowTest, ReplyStatisticsStayWholeBesideTheVersionArrows) {
    ASSERT_TRUE(spinUntil([&] { return m_window->engine()->state() == EngineHost::State::ready; }));
    m_window->resize(1180, 760);
    ASSERT_TRUE(sendAndWait(QStringLiteral("question")));
    m_window->regenerate(1);
    ASSERT_TRUE(idle(2));
    spinFor(100);
    MessageWidget* w = m_window->chatView()->messageWidget(1);
    ASSERT_TRUE(w->versionLabel()->isVisible());
    QLabel* st = w->statsLabel();
    ASSERT_TRUE(st->isVisible());
    ASSERT_NE(st->text().indexOf(QStringLiteral("tok/s")), -1) << st->text().toStdString();
    const int need = st->fontMetrics().horizontalAdvance(st->text());
    EXPECT_TRUE(need <= st->contentsRect().width() ||
                (st->wordWrap() && st->height() >= st->heightForWidth(st->width())))
        << need << " px of text in " << st->width() << " px";
}

// Minor polish: Copy said nothing, a right-click only highlighted, Tab gave no visible focus
// ring, and there was no text zoom.
TEST_F(ChatWindowTest, CopyFeedbackMenuFocusRingAndZoom) {
    ASSERT_TRUE(spinUntil([&] { return m_window->engine()->state() == EngineHost::State::ready; }));
    ASSERT_TRUE(sendAndWait(QStringLiteral("question")));
    MessageWidget* w = m_window->chatView()->messageWidget(1);
    w->copyButton()->click();
    EXPECT_EQ(w->copyButton()->text(), QStringLiteral("Copied"));
    EXPECT_EQ(QApplication::clipboard()->text(), m_window->messages()->at(1).content);
    EXPECT_TRUE(spinUntil([&] { return w->copyButton()->text() == QStringLiteral("Copy"); }, 4000));

    // A right-click on the text opens the message's menu.
    const QPoint at(5, 5);
    QContextMenuEvent menuEvent(QContextMenuEvent::Mouse, at,
                                w->body()->viewport()->mapToGlobal(at));
    QApplication::sendEvent(w->body()->viewport(), &menuEvent);
    auto* menu = qobject_cast<QMenu*>(QApplication::activePopupWidget());
    ASSERT_NE(menu, nullptr);
    QStringList items;
    for (QAction* a : menu->actions()) items << a->text();
    EXPECT_TRUE(items.contains(QStringLiteral("Copy message"))) << items.join(',').toStdString();
    EXPECT_TRUE(items.contains(QStringLiteral("Regenerate reply")));
    menu->close();

    // The focus ring shows when Tab reaches the message.
    m_window->activateWindow();
    w->clearFocus();
    spinFor(20);
    const QImage before = w->grab().toImage();
    w->setFocus(Qt::TabFocusReason);
    ASSERT_TRUE(spinUntil([&] { return w->hasFocus(); }, 2000));
    spinFor(20);
    EXPECT_NE(w->grab().toImage(), before);

    // Ctrl+= / Ctrl+- change the text size of the conversation and the message box.
    const qreal size = w->body()->font().pointSizeF();
    m_window->setTextZoom(2);
    EXPECT_GT(w->body()->font().pointSizeF(), size);
    EXPECT_GT(m_window->input()->font().pointSizeF(), size);
    m_window->setTextZoom(0);
    EXPECT_EQ(w->body()->font().pointSizeF(), size);
    bool zoomKey = false;
    for (QAction* a : m_window->findChildren<QAction*>())
        zoomKey = zoomKey || a->shortcuts().contains(QKeySequence(Qt::CTRL | Qt::Key_Equal));
    EXPECT_TRUE(zoomKey);
}

}  // namespace
}  // namespace neural::gui
