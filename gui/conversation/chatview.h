// The messages of a conversation as a column of message bubbles (your messages tinted and
// indented on the right, replies on the left) bound to a MessageModel. A bubble shows the
// Markdown text (rendered live while it streams), a collapsible "Thought for N s" reasoning
// section, the reply's stats (tokens, tok/s, first token; live while it streams), the versions
// of a regenerated reply or an edited message of yours (< 2/3 >) and Copy / Edit / Regenerate / Delete / Branch, and Continue
// on a last reply the token limit cut. Edit opens the text
// in place. Colours come from the palette: a theme change re-renders every message.
//
// Scrolling: the view sticks to the end while the user is at the bottom (also while a reply
// streams into a reopened conversation); scrollPosition / restoreScrollPosition let the window
// keep each conversation's place.
#pragma once

#include <QElapsedTimer>
#include <QFrame>
#include <QList>
#include <QScrollArea>
#include <QTextBrowser>

class QLabel;
class QMenu;
class QPlainTextEdit;
class QToolButton;
class QPushButton;
class QVBoxLayout;

namespace neural::gui {

class MessageModel;
struct ChatMessage;

// A read-only QTextBrowser as tall as its text (no scroll bars of its own), showing Markdown.
// While a reply streams, the complete blocks are rendered once and appended; only the open tail
// (the paragraph or code block being written) is rendered again per update.
class MessageBody : public QTextBrowser {
    Q_OBJECT
public:
    explicit MessageBody(QWidget* parent = nullptr);
    // The whole text, rendered at once (a complete message).
    void showMarkdown(const QString& markdown);
    // A growing text: appends what was completed since the last call, re-renders the tail.
    void showStreamingMarkdown(const QString& markdown);
    QString markdown() const { return m_source; }
    // Characters of the streamed text rendered for good (the rest is the tail).
    int stableLength() const { return m_stableLength; }
    // The fenced code blocks shown, in order ("Copy" in a block's header copies its entry).
    QStringList codeTexts() const { return m_codes + m_tailCodes; }
    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;

protected:
    void resizeEvent(QResizeEvent* event) override;
    void changeEvent(QEvent* event) override;

private:
    void fitHeight();
    QStringList appendRendered(const QString& markdown, int firstCodeIndex);
    void removeTail();
    void rerender();

    QString m_source;
    bool m_streaming = false;
    int m_stableLength = 0;  // streamed characters rendered into the document for good
    int m_tailStart = 0;     // document position where the tail's rendering starts
    QStringList m_codes;     // code blocks of the stable part
    QStringList m_tailCodes;
    bool m_rerenderPending = false;
    qint64 m_renderCostMs = 0;    // the last tail rendering's cost
    QElapsedTimer m_sinceRender;  // since then
};

class ToolCard;

// What a tool card asks for (MessageWidget::toolActionRequested).
enum ToolAction { kToolRun, kToolDeny, kToolAlways, kToolCancel };

class MessageWidget : public QFrame {
    Q_OBJECT
public:
    explicit MessageWidget(QWidget* parent = nullptr);
    void setMessage(const ChatMessage& message, bool canRegenerate);
    QString content() const { return m_content; }
    bool isUser() const { return m_user; }
    MessageBody* body() const { return m_body; }
    QLabel* statsLabel() const { return m_stats; }
    // The chips of the files attached to a message of yours (hidden when there are none).
    QLabel* attachmentsLabel() const { return m_files; }
    QLabel* versionLabel() const { return m_versionLabel; }
    QToolButton* reasoningToggle() const { return m_thought; }
    QPlainTextEdit* editor() const { return m_editor; }
    void setReasoningOpen(bool open);
    QPushButton* copyButton() const { return m_copy; }
    // "Continue": the last reply, cut by the token limit (its finish reason is "length").
    QPushButton* continueButton() const { return m_continue; }
    // "Branch": a new conversation with the messages up to and including this one.
    QPushButton* branchButton() const { return m_branch; }
    // A tool round's card (role "tool"; hidden for other messages).
    ToolCard* toolCard() const { return m_card; }
    // The menu a right-click on the message opens (its own actions; the selected text's Copy
    // first when there is a selection).
    QMenu* contextMenu();
    // Edit in place: the text in an editor inside the bubble (Ctrl+Enter sends, Esc cancels).
    void startEdit();
    void cancelEdit();
    bool isEditing() const;

signals:
    void editSubmitted(const QString& text);
    void regenerateRequested();
    void deleteRequested();
    void versionRequested(int index);
    void continueRequested();
    void branchRequested();
    void toolActionRequested(int action);  // a ToolAction

protected:
    void paintEvent(QPaintEvent* event) override;
    bool eventFilter(QObject* watched, QEvent* event) override;
    void contextMenuEvent(QContextMenuEvent* event) override;
    // The focus ring (drawn in paintEvent) appears and goes as Tab reaches and leaves.
    void focusInEvent(QFocusEvent* event) override;
    void focusOutEvent(QFocusEvent* event) override;

private:
    void submitEdit();

    bool m_user = false;
    QLabel* m_role;
    QLabel* m_stats;
    QToolButton* m_prevVersion;
    QLabel* m_versionLabel;
    QToolButton* m_nextVersion;
    QToolButton* m_thought;
    QLabel* m_reasoning;
    MessageBody* m_body;
    QLabel* m_files;
    QPlainTextEdit* m_editor;
    QWidget* m_editBar;
    QPushButton* m_copy;
    QPushButton* m_edit;
    QPushButton* m_regenerate;
    QPushButton* m_delete;
    QPushButton* m_continue;
    QPushButton* m_branch;
    ToolCard* m_card;
    QString m_content;
    QString m_typed;  // what Edit opens: the typed text of a message of yours (its files stay)
    QString m_renderedReasoning;
    bool m_renderedFinal = false;
    int m_version = 0;
    int m_versionCount = 1;
};

// "42 tokens · 12.3 tok/s · first token 0.21 s" from a reply's stats.
QString statsLine(const QJsonObject& stats);

class ChatView : public QScrollArea {
    Q_OBJECT
public:
    explicit ChatView(MessageModel* model, QWidget* parent = nullptr);
    MessageWidget* messageWidget(int row) const { return m_widgets.value(row); }
    int messageCount() const { return static_cast<int>(m_widgets.size()); }
    // The scroll position in pixels, or -1 while the view sticks to the end.
    int scrollPosition() const;
    // Goes to `position` (from scrollPosition) once the messages are laid out; -1: the end.
    void restoreScrollPosition(int position);
    bool followsEnd() const { return m_stick; }

signals:
    void editSubmitted(int row, const QString& text);
    void regenerateRequested(int row);
    void deleteRequested(int row);
    void versionRequested(int row, int index);
    void continueRequested(int row);
    void branchRequested(int row);
    void toolActionRequested(int row, int action);  // a ToolAction
    void scrollPositionChanged(int position);

protected:
    void resizeEvent(QResizeEvent* event) override;

private:
    // The bubble's indent from the other side, from the view's width (again on each resize: a
    // conversation reopened before the window was laid out got the indent of a tiny view).
    void indent(MessageWidget* w, bool user) const;
    void rebuild();
    void insertRows(int first, int last);
    void removeRows(int first, int last);
    void refresh(int row);
    void refreshAll();
    void dropWidget(MessageWidget* w);
    int rowOf(const MessageWidget* w) const { return static_cast<int>(m_widgets.indexOf(w)); }

    MessageModel* m_model;
    QWidget* m_column;
    QVBoxLayout* m_layout;
    QList<MessageWidget*> m_widgets;
    bool m_stick = true;       // follow the end as the content grows
    int m_pendingScroll = -1;  // restoreScrollPosition waiting for the layout
    bool m_settingScroll = false;
    bool m_wasStreaming = false;  // the model's state at the last refreshAll
};

}  // namespace neural::gui
