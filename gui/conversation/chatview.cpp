#include "conversation/chatview.h"

#include <QAbstractTextDocumentLayout>
#include <QApplication>
#include <QClipboard>
#include <QContextMenuEvent>
#include <QMenu>
#include <QDesktopServices>
#include <QElapsedTimer>
#include <QEvent>
#include <QHBoxLayout>
#include <QJsonObject>
#include <QKeyEvent>
#include <QLabel>
#include <QPainter>
#include <QPalette>
#include <QShortcut>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScopedValueRollback>
#include <QScrollBar>
#include <QTextCursor>
#include <QTextDocument>
#include <QTextDocumentFragment>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

#include "conversation/attachments.h"
#include "conversation/markdown.h"
#include "conversation/messagemodel.h"
#include "tools/toolcard.h"

namespace neural::gui {

QString statsLine(const QJsonObject& stats) {
    // A message of yours has stats only for its attachments (shown as chips).
    if (stats.isEmpty() || !stats.contains(QStringLiteral("tokens"))) return {};
    QStringList parts;
    parts << QObject::tr("%n tokens", nullptr, stats.value(QStringLiteral("tokens")).toInt());
    const double tps = stats.value(QStringLiteral("tokens_per_second")).toDouble();
    if (tps > 0) parts << QObject::tr("%1 tok/s").arg(tps, 0, 'f', 1);
    if (stats.contains(QStringLiteral("ttft_s")))
        parts << QObject::tr("first token %1 s")
                     .arg(stats.value(QStringLiteral("ttft_s")).toDouble(), 0, 'f', 2);
    const QString finish = stats.value(QStringLiteral("finish")).toString();
    if (finish == QLatin1String("cancelled"))
        parts << QObject::tr("stopped");
    else if (finish == QLatin1String("length"))
        parts << QObject::tr("cut at the token limit");
    if (const int n = stats.value(QStringLiteral("continued")).toInt(); n > 0)
        parts << QObject::tr("continued");
    else if (finish == QLatin1String("error"))
        parts << QObject::tr("error: %1").arg(stats.value(QStringLiteral("error")).toString());
    return parts.join(QStringLiteral(" · "));
}

MessageBody::MessageBody(QWidget* parent) : QTextBrowser(parent) {
    setReadOnly(true);
    setOpenLinks(false);  // "copy-code:N" is ours; other links open in the browser
    setFrameShape(QFrame::NoFrame);
    setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setWordWrapMode(QTextOption::WrapAtWordBoundaryOrAnywhere);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    setTextInteractionFlags(Qt::TextBrowserInteraction);
    viewport()->setAutoFillBackground(false);
    document()->setDocumentMargin(2);
    connect(document()->documentLayout(), &QAbstractTextDocumentLayout::documentSizeChanged, this,
            &MessageBody::fitHeight);
    connect(this, &QTextBrowser::anchorClicked, this, [this](const QUrl& url) {
        if (url.scheme() == QLatin1String("copy-code")) {
            const QStringList codes = codeTexts();
            const int i = url.path().toInt();
            if (i >= 0 && i < codes.size()) QApplication::clipboard()->setText(codes.at(i));
            return;
        }
        QDesktopServices::openUrl(url);
    });
}

QStringList MessageBody::appendRendered(const QString& markdown, int firstCodeIndex) {
    QTextDocument part;
    part.setDefaultFont(document()->defaultFont());
    const QStringList codes = renderMarkdown(&part, markdown, palette(), firstCodeIndex);
    QTextCursor c(document());
    c.movePosition(QTextCursor::End);
    if (!document()->isEmpty()) c.insertBlock(QTextBlockFormat(), QTextCharFormat());
    c.insertFragment(QTextDocumentFragment(&part));
    return codes;
}

void MessageBody::removeTail() {
    QTextCursor c(document());
    c.setPosition(std::min(m_tailStart, document()->characterCount() - 1));
    c.movePosition(QTextCursor::End, QTextCursor::KeepAnchor);
    c.removeSelectedText();
    m_tailCodes.clear();
}

void MessageBody::showMarkdown(const QString& markdown) {
    m_streaming = false;
    m_source = markdown;
    m_stableLength = 0;
    m_tailStart = 0;
    m_tailCodes.clear();
    m_codes = renderMarkdown(document(), markdown, palette());
}

namespace {
// Text that cannot change how the Markdown before it reads when appended to a line that has
// letters already (no markup characters, no line break, no list or heading marker).
bool isPlainAppend(QStringView added, QStringView lastLine) {
    static const QString markup = QStringLiteral("*_`[]()<>#|~!\\&=+-:/\n\r\t");
    for (const QChar c : added)
        if (markup.contains(c)) return false;
    for (const QChar c : lastLine)
        if (c.isLetter()) return true;
    return false;
}
}  // namespace

void MessageBody::showStreamingMarkdown(const QString& markdown) {
    if (!m_streaming || !markdown.startsWith(m_source.left(m_stableLength))) {
        document()->clear();
        m_source.clear();
        m_codes.clear();
        m_tailCodes.clear();
        m_stableLength = 0;
        m_tailStart = 0;
        m_streaming = true;
        m_renderCostMs = 0;
    }
    // Only the tail after the last complete block is scanned (the stable part ends outside
    // any code fence).
    const int stable =
        m_stableLength + stablePrefixLength(QStringView(markdown).mid(m_stableLength).toString());
    if (stable == m_stableLength && markdown.size() > m_source.size() &&
        markdown.startsWith(m_source) && document()->characterCount() > m_tailStart + 1) {
        // The tail grew. Plain words are appended as they are; other text too while the last
        // tail rendering's cost is not paid back (a long paragraph re-laid out per update would
        // hold the GUI thread), so rendering takes at most ~1/8 of the time. The next full
        // rendering of the tail puts the Markdown right.
        const QStringView added = QStringView(markdown).mid(m_source.size());
        const int lineStart = static_cast<int>(m_source.lastIndexOf(QLatin1Char('\n'))) + 1;
        if (isPlainAppend(added, QStringView(m_source).mid(lineStart)) ||
            m_sinceRender.elapsed() < 8 * m_renderCostMs) {
            QTextCursor c(document());
            c.movePosition(QTextCursor::End);
            c.insertText(added.toString());
            m_source = markdown;
            return;
        }
    }
    QElapsedTimer cost;
    cost.start();
    m_source = markdown;
    removeTail();
    if (stable > m_stableLength) {
        m_codes += appendRendered(markdown.mid(m_stableLength, stable - m_stableLength),
                                  static_cast<int>(m_codes.size()));
        m_stableLength = stable;
    }
    m_tailStart = document()->isEmpty() ? 0 : document()->characterCount() - 1;
    const QString tail = markdown.mid(m_stableLength);
    if (!tail.trimmed().isEmpty())
        m_tailCodes = appendRendered(tail, static_cast<int>(m_codes.size()));
    m_renderCostMs = cost.elapsed();
    m_sinceRender.start();
}

void MessageBody::rerender() {
    m_rerenderPending = false;
    if (m_streaming) {
        const QString text = m_source;
        m_streaming = false;  // start over in the new colours
        showStreamingMarkdown(text);
    } else {
        showMarkdown(m_source);
    }
}

void MessageBody::changeEvent(QEvent* event) {
    QTextBrowser::changeEvent(event);
    // The colours of code, tables and quotes are baked into the document: a new palette
    // (theme switch) renders the text again. Coalesced: a theme change sends several events.
    const QEvent::Type t = event->type();
    if ((t == QEvent::PaletteChange || t == QEvent::ApplicationPaletteChange ||
         t == QEvent::StyleChange || t == QEvent::FontChange) &&
        !m_rerenderPending) {
        m_rerenderPending = true;
        QTimer::singleShot(0, this, &MessageBody::rerender);
    }
}

void MessageBody::fitHeight() {
    const int h = static_cast<int>(std::ceil(document()->size().height())) + 2 * frameWidth();
    if (h != height()) setFixedHeight(std::max(h, fontMetrics().height()));
}

void MessageBody::resizeEvent(QResizeEvent* event) {
    QTextBrowser::resizeEvent(event);
    document()->setTextWidth(viewport()->width());
    fitHeight();
}

QSize MessageBody::sizeHint() const {
    return {200, static_cast<int>(std::ceil(document()->size().height()))};
}

QSize MessageBody::minimumSizeHint() const { return {50, fontMetrics().height()}; }

MessageWidget::MessageWidget(QWidget* parent) : QFrame(parent) {
    setFocusPolicy(Qt::TabFocus);  // a screen reader reaches the message itself
    auto* v = new QVBoxLayout(this);
    v->setContentsMargins(12, 8, 12, 8);
    auto* head = new QHBoxLayout;
    m_role = new QLabel(this);
    QFont bold = m_role->font();
    bold.setBold(true);
    m_role->setFont(bold);
    m_stats = new QLabel(this);
    m_stats->setForegroundRole(QPalette::PlaceholderText);
    m_stats->setAccessibleName(tr("Message statistics"));
    m_prevVersion = new QToolButton(this);
    m_prevVersion->setArrowType(Qt::LeftArrow);
    m_prevVersion->setAutoRaise(true);
    m_prevVersion->setAccessibleName(tr("Previous version"));
    m_prevVersion->setToolTip(tr("Previous version of this reply"));
    m_versionLabel = new QLabel(this);
    m_versionLabel->setAccessibleName(tr("Version"));
    m_nextVersion = new QToolButton(this);
    m_nextVersion->setArrowType(Qt::RightArrow);
    m_nextVersion->setAutoRaise(true);
    m_nextVersion->setAccessibleName(tr("Next version"));
    m_nextVersion->setToolTip(tr("Next version of this reply"));
    m_copy = new QPushButton(tr("Copy"), this);
    m_edit = new QPushButton(tr("Edit"), this);
    m_regenerate = new QPushButton(tr("Regenerate"), this);
    m_delete = new QPushButton(tr("Delete"), this);
    m_copy->setAccessibleName(tr("Copy message"));
    m_edit->setAccessibleName(tr("Edit and resend message"));
    m_regenerate->setAccessibleName(tr("Regenerate reply"));
    m_regenerate->setToolTip(tr("Another reply; the earlier ones stay as versions"));
    m_delete->setAccessibleName(tr("Delete message"));
    m_continue = new QPushButton(tr("Continue"), this);
    m_continue->setAccessibleName(tr("Continue the reply"));
    m_continue->setToolTip(
        tr("The reply was cut by the token limit: write on from where it stopped"));
    m_branch = new QPushButton(tr("Branch"), this);
    m_branch->setAccessibleName(tr("Branch from this message"));
    m_branch->setToolTip(tr("A new conversation with the messages up to and including this one"));
    for (QPushButton* b : {m_copy, m_edit, m_regenerate, m_continue, m_branch, m_delete})
        b->setFlat(true);
    head->addWidget(m_role);
    head->addStretch(1);
    head->addWidget(m_prevVersion);
    head->addWidget(m_versionLabel);
    head->addWidget(m_nextVersion);
    head->addWidget(m_copy);
    head->addWidget(m_edit);
    head->addWidget(m_regenerate);
    head->addWidget(m_continue);
    head->addWidget(m_branch);
    head->addWidget(m_delete);
    v->addLayout(head);

    m_thought = new QToolButton(this);
    m_thought->setCheckable(true);
    m_thought->setArrowType(Qt::RightArrow);
    m_thought->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    m_thought->setAutoRaise(true);
    m_thought->setAccessibleName(tr("Show reasoning"));
    m_reasoning = new QLabel(this);
    m_reasoning->setWordWrap(true);
    m_reasoning->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_reasoning->setForegroundRole(QPalette::PlaceholderText);
    m_reasoning->setAccessibleName(tr("Reasoning"));
    m_reasoning->hide();
    connect(m_thought, &QToolButton::toggled, this, [this](bool on) {
        m_thought->setArrowType(on ? Qt::DownArrow : Qt::RightArrow);
        m_thought->setAccessibleName(on ? tr("Hide reasoning") : tr("Show reasoning"));
        m_reasoning->setVisible(on);
    });
    v->addWidget(m_thought);
    v->addWidget(m_reasoning);

    m_body = new MessageBody(this);
    m_body->setAccessibleName(tr("Message text"));
    // A long unbroken word (code, a URL, random-weight output) must not widen the column past
    // the view: the labels take the width they are given and grow in height.
    for (QLabel* l : {m_reasoning, m_stats}) {
        QSizePolicy sp(QSizePolicy::Ignored, QSizePolicy::Preferred);
        sp.setHeightForWidth(true);
        l->setSizePolicy(sp);
    }
    v->addWidget(m_body);
    // A tool round (role "tool"): the call's card in place of the text.
    m_card = new ToolCard(this);
    m_card->hide();
    v->addWidget(m_card);
    connect(m_card, &ToolCard::runRequested, this, [this] { emit toolActionRequested(kToolRun); });
    connect(m_card, &ToolCard::denyRequested, this,
            [this] { emit toolActionRequested(kToolDeny); });
    connect(m_card, &ToolCard::alwaysAllowRequested, this,
            [this] { emit toolActionRequested(kToolAlways); });
    connect(m_card, &ToolCard::cancelRequested, this,
            [this] { emit toolActionRequested(kToolCancel); });
    m_files = new QLabel(this);
    m_files->setWordWrap(true);
    m_files->setTextFormat(Qt::RichText);
    m_files->setAccessibleName(tr("Attached files"));
    m_files->hide();
    v->addWidget(m_files);
    // The statistics on a line of their own under the text: beside the version arrows and the
    // buttons they were cut off at the default window width.
    m_stats->setWordWrap(true);
    v->addWidget(m_stats);

    // The in-place editor of a message of yours.
    m_editor = new QPlainTextEdit(this);
    m_editor->setAccessibleName(tr("Edit message"));
    m_editor->setTabChangesFocus(true);
    m_editor->installEventFilter(this);
    m_editor->hide();
    m_editBar = new QWidget(this);
    auto* eb = new QHBoxLayout(m_editBar);
    eb->setContentsMargins(0, 0, 0, 0);
    auto* hint =
        new QLabel(tr("The earlier text and its replies stay as a version (Ctrl+Enter sends, "
                      "Esc cancels)"),
                   m_editBar);
    hint->setForegroundRole(QPalette::PlaceholderText);
    auto* save = new QPushButton(tr("Send"), m_editBar);
    save->setAccessibleName(tr("Send the edited message"));
    auto* cancel = new QPushButton(tr("Cancel"), m_editBar);
    cancel->setAccessibleName(tr("Cancel editing"));
    eb->addWidget(hint, 1);
    eb->addWidget(cancel);
    eb->addWidget(save);
    m_editBar->hide();
    v->addWidget(m_editor);
    v->addWidget(m_editBar);
    connect(save, &QPushButton::clicked, this, &MessageWidget::submitEdit);
    connect(cancel, &QPushButton::clicked, this, &MessageWidget::cancelEdit);

    connect(m_copy, &QPushButton::clicked, this, [this] {
        QApplication::clipboard()->setText(m_content);
        // Feedback where the click was: "Copied" for a moment.
        m_copy->setText(tr("Copied"));
        QTimer::singleShot(1500, m_copy, [b = m_copy] { b->setText(tr("Copy")); });
    });
    // A right-click anywhere on the message (its text too) opens the message's menu.
    m_body->setContextMenuPolicy(Qt::NoContextMenu);
    m_reasoning->setContextMenuPolicy(Qt::NoContextMenu);
    m_stats->setContextMenuPolicy(Qt::NoContextMenu);
    // The keys of a message that has the focus (Tab reaches it): copy and delete it.
    auto* copyKey = new QShortcut(QKeySequence::Copy, this);
    copyKey->setContext(Qt::WidgetShortcut);
    connect(copyKey, &QShortcut::activated, m_copy, &QPushButton::click);
    auto* deleteKey = new QShortcut(QKeySequence::Delete, this);
    deleteKey->setContext(Qt::WidgetShortcut);
    connect(deleteKey, &QShortcut::activated, this, [this] {
        if (m_delete->isVisible() && m_delete->isEnabled()) emit deleteRequested();
    });
    connect(m_edit, &QPushButton::clicked, this, &MessageWidget::startEdit);
    connect(m_regenerate, &QPushButton::clicked, this, &MessageWidget::regenerateRequested);
    connect(m_delete, &QPushButton::clicked, this, &MessageWidget::deleteRequested);
    connect(m_continue, &QPushButton::clicked, this, &MessageWidget::continueRequested);
    connect(m_branch, &QPushButton::clicked, this, &MessageWidget::branchRequested);
    connect(m_prevVersion, &QToolButton::clicked, this,
            [this] { emit versionRequested(m_version - 1); });
    connect(m_nextVersion, &QToolButton::clicked, this,
            [this] { emit versionRequested(m_version + 1); });
}

void MessageWidget::setMessage(const ChatMessage& m, bool canRegenerate) {
    const bool streaming = m.streaming;
    m_user = m.role == QLatin1String("user");
    const bool tool = m.role == QLatin1String("tool");
    m_role->setText(m_user ? tr("You") : tool ? tr("Assistant → tool") : tr("Assistant"));
    m_content = m.content;
    m_card->setVisible(tool);
    m_body->setVisible(!tool && !isEditing());
    if (tool) m_card->setCall(m.stats.value(QLatin1String(toolkey::kTool)).toObject(), m.content);
    // A message of yours with files: its typed text, and a chip per file (the model reads them
    // inlined, conversation/attachments.h).
    const attachments::Shown shown =
        m_user ? attachments::shown(m.content, m.stats) : attachments::Shown{m.content, {}};
    m_typed = shown.text;
    if (streaming) {
        m_body->showStreamingMarkdown(m.content.isEmpty() ? tr("...") : m.content);
        m_renderedFinal = false;
    } else if (!m_renderedFinal || shown.text != m_body->markdown()) {
        m_body->showMarkdown(shown.text);
        m_renderedFinal = true;
    }
    if (shown.names.isEmpty()) {
        m_files->hide();
        m_files->clear();
    } else {
        const QString chip = palette().color(QPalette::AlternateBase).name();
        QStringList chips;
        for (const QString& n : shown.names)
            chips << QStringLiteral("<span style=\"background-color:%1\">&nbsp;%2&nbsp;</span>")
                         .arg(chip, n.toHtmlEscaped());
        m_files->setText(chips.join(QStringLiteral(" &nbsp;")));
        m_files->setToolTip(tr("Attached: %1").arg(shown.names.join(QStringLiteral(", "))));
        m_files->show();
    }
    // What a screen reader says for the message: who wrote it and its text as shown (the name,
    // read first, with the start of it; the description with all of it).
    const QString who = m_user ? tr("You") : tr("Assistant");
    const QString plain =
        tool ? m_card->accessibleDescription() : m_body->toPlainText().simplified();
    setAccessibleName(plain.isEmpty() ? who : tr("%1: %2").arg(who, plain.left(300)));
    setAccessibleDescription(plain.left(4000));
    if (m.reasoning != m_renderedReasoning) {
        m_reasoning->setText(
            m.reasoning.toHtmlEscaped().replace(QLatin1Char('\n'), QStringLiteral("<br>")));
        m_renderedReasoning = m.reasoning;
    }
    m_thought->setVisible(!m.reasoning.isEmpty());
    const double secs = m.stats.value(QStringLiteral("reasoning_s")).toDouble();
    m_thought->setText(
        streaming && m.content.isEmpty()
            ? tr("Thinking ...")
            : (secs > 0 ? tr("Thought for %1 s").arg(secs, 0, 'f', 1) : tr("Reasoning")));
    const QString stats = statsLine(m.stats);
    const QString waiting =
        m.queuedAhead > 0
            ? (m.queuedAhead == 1
                   ? tr("waiting for the API server: 1 request ahead of this reply ...")
                   : tr("waiting for the API server: %1 requests ahead of this reply ...")
                         .arg(m.queuedAhead))
            : tr("waiting for the first token ...");
    m_stats->setText(streaming ? (stats.isEmpty() ? waiting : tr("%1 · generating ...").arg(stats))
                               : stats);
    m_stats->setToolTip(m_stats->text());
    m_stats->setVisible(!m_stats->text().isEmpty());
    m_versionCount = std::max(1, static_cast<int>(m.versions.size()));
    m_version = std::clamp(m.version, 0, m_versionCount - 1);
    const bool versions = m_versionCount > 1 && !streaming;
    m_versionLabel->setText(tr("%1/%2").arg(m_version + 1).arg(m_versionCount));
    m_prevVersion->setToolTip(m_user ? tr("Previous version of this message and what followed it")
                                     : tr("Previous version of this reply"));
    m_nextVersion->setToolTip(m_user ? tr("Next version of this message and what followed it")
                                     : tr("Next version of this reply"));
    m_versionLabel->setAccessibleDescription(
        tr("Version %1 of %2").arg(m_version + 1).arg(m_versionCount));
    m_prevVersion->setVisible(versions);
    m_versionLabel->setVisible(versions);
    m_nextVersion->setVisible(versions);
    m_prevVersion->setEnabled(m_version > 0 && canRegenerate);
    m_nextVersion->setEnabled(m_version + 1 < m_versionCount && canRegenerate);
    m_copy->setEnabled(!streaming);
    m_edit->setVisible(m_user && !isEditing());
    m_edit->setEnabled(canRegenerate);
    m_delete->setVisible(!streaming && !isEditing());
    m_delete->setEnabled(canRegenerate);
    // Every reply can be regenerated: an earlier one keeps what followed it as its version.
    m_regenerate->setVisible(!m_user && !tool && !streaming && canRegenerate);
    m_continue->setVisible(
        !m_user && !tool && !streaming && canRegenerate && property("lastReply").toBool() &&
        m.stats.value(QStringLiteral("finish")).toString() == QLatin1String("length"));
    m_branch->setVisible(!streaming && !isEditing());
    m_branch->setEnabled(m.id != 0);
    update();
}

void MessageWidget::setReasoningOpen(bool open) { m_thought->setChecked(open); }

void MessageWidget::startEdit() {
    if (!m_user) return;
    m_editor->setPlainText(m_typed);
    m_editor->moveCursor(QTextCursor::End);
    m_body->hide();
    m_edit->hide();
    m_delete->hide();
    m_branch->hide();
    m_editor->show();
    m_editBar->show();
    m_editor->setFocus();
}

void MessageWidget::cancelEdit() {
    m_editor->hide();
    m_editBar->hide();
    m_body->show();
    m_edit->setVisible(m_user);
    m_delete->show();
    m_branch->show();
}

bool MessageWidget::isEditing() const { return !m_editor->isHidden(); }

void MessageWidget::submitEdit() {
    const QString text = m_editor->toPlainText().trimmed();
    // A message with files may go without typed text, as when it was sent.
    if (text.isEmpty() && m_files->isHidden()) return;
    cancelEdit();
    emit editSubmitted(text);
}

bool MessageWidget::eventFilter(QObject* watched, QEvent* event) {
    // Esc belongs to the editor while it is open (the window's Esc stops a reply).
    if (watched == m_editor && event->type() == QEvent::ShortcutOverride &&
        static_cast<QKeyEvent*>(event)->key() == Qt::Key_Escape) {
        event->accept();
        return true;
    }
    if (watched == m_editor && event->type() == QEvent::KeyPress) {
        auto* k = static_cast<QKeyEvent*>(event);
        const bool enter = k->key() == Qt::Key_Return || k->key() == Qt::Key_Enter;
        if (enter && (k->modifiers() & Qt::ControlModifier)) {
            submitEdit();
            return true;
        }
        if (k->key() == Qt::Key_Escape) {
            cancelEdit();
            return true;
        }
    }
    return QFrame::eventFilter(watched, event);
}

QMenu* MessageWidget::contextMenu() {
    auto* menu = new QMenu(this);
    menu->setAttribute(Qt::WA_DeleteOnClose);
    const QString selected = m_body->textCursor().selectedText();
    if (!selected.isEmpty())
        menu->addAction(tr("Copy the selection"), this, [this] { m_body->copy(); });
    // The buttons' actions, as far as they are offered now.
    for (QPushButton* b : {m_copy, m_edit, m_regenerate, m_continue, m_branch, m_delete}) {
        if (b->isHidden() || !b->isEnabled()) continue;
        QAction* a = menu->addAction(b->accessibleName(), b, &QPushButton::click);
        a->setEnabled(b->isEnabled());
    }
    return menu;
}

void MessageWidget::contextMenuEvent(QContextMenuEvent* event) {
    contextMenu()->popup(event->globalPos());
    event->accept();
}

void MessageWidget::focusInEvent(QFocusEvent* event) {
    QFrame::focusInEvent(event);
    update();
}

void MessageWidget::focusOutEvent(QFocusEvent* event) {
    QFrame::focusOutEvent(event);
    update();
}

void MessageWidget::paintEvent(QPaintEvent* event) {
    // The bubble, in palette colours (so it follows the theme): yours tinted with the
    // highlight colour, replies on the base colour with a thin border.
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const QPalette& pal = palette();
    QColor fill = pal.color(QPalette::Base);
    if (m_user) {
        const QColor h = pal.color(QPalette::Highlight);
        fill = QColor::fromRgbF(fill.redF() * 0.85f + h.redF() * 0.15f,
                                fill.greenF() * 0.85f + h.greenF() * 0.15f,
                                fill.blueF() * 0.85f + h.blueF() * 0.15f);
    }
    p.setBrush(fill);
    p.setPen(QPen(pal.color(QPalette::Mid), 1));
    const QRectF bubble = QRectF(contentsRect()).adjusted(0.5, 0.5, -0.5, -0.5);
    p.drawRoundedRect(bubble, 8, 8);
    if (hasFocus()) {
        p.setBrush(Qt::NoBrush);
        p.setPen(QPen(pal.color(QPalette::Highlight), 2));
        p.drawRoundedRect(bubble.adjusted(1, 1, -1, -1), 8, 8);
    }
    Q_UNUSED(event);
}

ChatView::ChatView(MessageModel* model, QWidget* parent) : QScrollArea(parent), m_model(model) {
    setWidgetResizable(true);
    setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setAccessibleName(tr("Conversation"));
    m_column = new QWidget(this);
    m_layout = new QVBoxLayout(m_column);
    m_layout->setSpacing(10);
    m_layout->addStretch(1);
    setWidget(m_column);
    QScrollBar* bar = verticalScrollBar();
    // Sticking to the end: the content grows (a streamed reply, a reopened conversation laid
    // out) and the view follows while the user was at the bottom; scrolling up lets go.
    connect(bar, &QScrollBar::rangeChanged, this, [this, bar](int, int max) {
        const QScopedValueRollback<bool> guard(m_settingScroll, true);
        if (m_pendingScroll >= 0) {
            bar->setValue(std::min(m_pendingScroll, max));
            if (max >= m_pendingScroll) m_pendingScroll = -1;
        } else if (m_stick) {
            bar->setValue(max);
        }
    });
    connect(bar, &QScrollBar::valueChanged, this, [this, bar](int value) {
        if (!m_settingScroll) {
            m_pendingScroll = -1;
            m_stick = value >= bar->maximum() - 8;
        }
        emit scrollPositionChanged(scrollPosition());
    });
    connect(model, &QAbstractItemModel::modelReset, this, &ChatView::rebuild);
    connect(model, &QAbstractItemModel::rowsInserted, this,
            [this](const QModelIndex&, int first, int last) { insertRows(first, last); });
    connect(model, &QAbstractItemModel::rowsRemoved, this,
            [this](const QModelIndex&, int first, int last) { removeRows(first, last); });
    connect(model, &QAbstractItemModel::dataChanged, this,
            [this](const QModelIndex& a, const QModelIndex& b) {
                if (m_model->isStreaming() != m_wasStreaming) {
                    refreshAll();  // the other messages' buttons wait for the reply's end
                    return;
                }
                for (int r = a.row(); r <= b.row(); ++r) refresh(r);
            });
    rebuild();
}

int ChatView::scrollPosition() const {
    if (m_pendingScroll >= 0) return m_pendingScroll;
    return m_stick ? -1 : verticalScrollBar()->value();
}

void ChatView::restoreScrollPosition(int position) {
    QScrollBar* bar = verticalScrollBar();
    const QScopedValueRollback<bool> guard(m_settingScroll, true);
    if (position < 0) {
        m_pendingScroll = -1;
        m_stick = true;
        bar->setValue(bar->maximum());
        return;
    }
    m_stick = false;
    m_pendingScroll = position > bar->maximum() ? position : -1;
    bar->setValue(std::min(position, bar->maximum()));
}

void ChatView::dropWidget(MessageWidget* w) {
    // Later, not now: the click that asked for this (Delete, Regenerate, an edit's Send) is
    // still being delivered to a button of this widget.
    m_layout->removeWidget(w);
    w->hide();
    w->disconnect(this);
    w->deleteLater();
}

void ChatView::rebuild() {
    for (MessageWidget* w : std::as_const(m_widgets)) dropWidget(w);
    m_widgets.clear();
    // A conversation opens at its end unless the window restores another place.
    m_stick = true;
    m_pendingScroll = -1;
    if (m_model->rowCount() > 0) insertRows(0, m_model->rowCount() - 1);
}

void ChatView::insertRows(int first, int last) {
    for (int r = first; r <= last; ++r) {
        auto* w = new MessageWidget(m_column);
        m_widgets.insert(r, w);
        m_layout->insertWidget(r, w);
        connect(w, &MessageWidget::editSubmitted, this,
                [this, w](const QString& text) { emit editSubmitted(rowOf(w), text); });
        connect(w, &MessageWidget::regenerateRequested, this,
                [this, w] { emit regenerateRequested(rowOf(w)); });
        connect(w, &MessageWidget::deleteRequested, this,
                [this, w] { emit deleteRequested(rowOf(w)); });
        connect(w, &MessageWidget::versionRequested, this,
                [this, w](int index) { emit versionRequested(rowOf(w), index); });
        connect(w, &MessageWidget::continueRequested, this,
                [this, w] { emit continueRequested(rowOf(w)); });
        connect(w, &MessageWidget::branchRequested, this,
                [this, w] { emit branchRequested(rowOf(w)); });
        connect(w, &MessageWidget::toolActionRequested, this,
                [this, w](int action) { emit toolActionRequested(rowOf(w), action); });
    }
    refreshAll();  // "Regenerate" moves to the new last reply
}

void ChatView::removeRows(int first, int last) {
    for (int r = last; r >= first; --r) dropWidget(m_widgets.takeAt(r));
    refreshAll();
}

void ChatView::refresh(int row) {
    if (row < 0 || row >= m_widgets.size()) return;
    const ChatMessage& m = m_model->at(row);
    MessageWidget* w = m_widgets[row];
    const bool user = m.role == QLatin1String("user");
    w->setProperty("lastReply", row == m_widgets.size() - 1);
    w->setMessage(m, !m_model->isStreaming());
    indent(w, user);
}

void ChatView::indent(MessageWidget* w, bool user) const {
    // Bubbles: yours on the right, replies on the left, each indented from the other side
    // (the margins lie outside the painted bubble).
    const int by = std::max(40, width() / 8);
    w->setContentsMargins(user ? by : 0, 0, user ? 0 : by / 2, 0);
}

void ChatView::resizeEvent(QResizeEvent* event) {
    QScrollArea::resizeEvent(event);
    for (int r = 0; r < m_widgets.size() && r < m_model->rowCount(); ++r)
        indent(m_widgets[r], m_model->at(r).role == QLatin1String("user"));
}

void ChatView::refreshAll() {
    m_wasStreaming = m_model->isStreaming();
    for (int r = 0; r < m_widgets.size(); ++r) refresh(r);
}

}  // namespace neural::gui
