#include "conversation/chatview.h"

#include <QApplication>
#include <QAbstractTextDocumentLayout>
#include <QClipboard>
#include <QTextCursor>
#include <QTextDocument>

#include <cmath>
#include <QHBoxLayout>
#include <QJsonObject>
#include <QLabel>
#include <QPalette>
#include <QPushButton>
#include <QScrollBar>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include "conversation/markdown.h"
#include "conversation/messagemodel.h"

namespace neural::gui {

QString statsLine(const QJsonObject &stats)
{
    if (stats.isEmpty())
        return {};
    QStringList parts;
    parts << QObject::tr("%n tokens", nullptr, stats.value(QStringLiteral("tokens")).toInt());
    const double tps = stats.value(QStringLiteral("tokens_per_second")).toDouble();
    if (tps > 0)
        parts << QObject::tr("%1 tok/s").arg(tps, 0, 'f', 1);
    parts << QObject::tr("first token %1 s")
                 .arg(stats.value(QStringLiteral("ttft_s")).toDouble(), 0, 'f', 2);
    const QString finish = stats.value(QStringLiteral("finish")).toString();
    if (finish == QLatin1String("cancelled"))
        parts << QObject::tr("stopped");
    else if (finish == QLatin1String("length"))
        parts << QObject::tr("cut at the token limit");
    else if (finish == QLatin1String("error"))
        parts << QObject::tr("error: %1").arg(stats.value(QStringLiteral("error")).toString());
    return parts.join(QStringLiteral(" · "));
}

MessageBody::MessageBody(QWidget *parent) : QTextBrowser(parent)
{
    setReadOnly(true);
    setOpenExternalLinks(true);
    setFrameShape(QFrame::NoFrame);
    setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setWordWrapMode(QTextOption::WrapAtWordBoundaryOrAnywhere);
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    viewport()->setAutoFillBackground(false);
    document()->setDocumentMargin(2);
    connect(document()->documentLayout(), &QAbstractTextDocumentLayout::documentSizeChanged, this,
            &MessageBody::fitHeight);
}

void MessageBody::showStreaming(const QString &text)
{
    if (m_streaming && !m_plain.isEmpty() && text.startsWith(m_plain)) {
        // Append only the new text: the layout redoes the last block, not the whole reply.
        QTextCursor c(document());
        c.movePosition(QTextCursor::End);
        c.insertText(text.mid(m_plain.size()));
    } else {
        setPlainText(text);
    }
    m_plain = text;
    m_streaming = true;
}

void MessageBody::showMarkdown(const QString &markdown, const QColor &codeBackground)
{
    m_streaming = false;
    m_plain.clear();
    renderMarkdown(document(), markdown, codeBackground);
}

void MessageBody::fitHeight()
{
    const int h = static_cast<int>(std::ceil(document()->size().height())) + 2 * frameWidth();
    if (h != height())
        setFixedHeight(std::max(h, fontMetrics().height()));
}

void MessageBody::resizeEvent(QResizeEvent *event)
{
    QTextBrowser::resizeEvent(event);
    document()->setTextWidth(viewport()->width());
    fitHeight();
}

QSize MessageBody::sizeHint() const
{
    return {200, static_cast<int>(std::ceil(document()->size().height()))};
}

QSize MessageBody::minimumSizeHint() const { return {50, fontMetrics().height()}; }

MessageWidget::MessageWidget(QWidget *parent) : QFrame(parent)
{
    setFrameShape(QFrame::StyledPanel);
    auto *v = new QVBoxLayout(this);
    auto *head = new QHBoxLayout;
    m_role = new QLabel(this);
    QFont bold = m_role->font();
    bold.setBold(true);
    m_role->setFont(bold);
    m_stats = new QLabel(this);
    m_stats->setForegroundRole(QPalette::PlaceholderText);
    m_stats->setAccessibleName(tr("Message statistics"));
    m_copy = new QPushButton(tr("Copy"), this);
    m_copyCode = new QPushButton(tr("Copy code"), this);
    m_edit = new QPushButton(tr("Edit"), this);
    m_regenerate = new QPushButton(tr("Regenerate"), this);
    m_copy->setAccessibleName(tr("Copy message"));
    m_copyCode->setAccessibleName(tr("Copy the code blocks of this message"));
    m_edit->setAccessibleName(tr("Edit and resend message"));
    m_regenerate->setAccessibleName(tr("Regenerate reply"));
    for (QPushButton *b : {m_copy, m_copyCode, m_edit, m_regenerate})
        b->setFlat(true);
    head->addWidget(m_role);
    head->addWidget(m_stats, 1);
    head->addWidget(m_copy);
    head->addWidget(m_copyCode);
    head->addWidget(m_edit);
    head->addWidget(m_regenerate);
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
        m_reasoning->setVisible(on);
    });
    v->addWidget(m_thought);
    v->addWidget(m_reasoning);

    m_body = new MessageBody(this);
    m_body->setAccessibleName(tr("Message text"));
    // A long unbroken word (code, a URL, random-weight output) must not widen the column past
    // the view: the labels take the width they are given and grow in height.
    for (QLabel *l : {m_reasoning, m_stats}) {
        QSizePolicy sp(QSizePolicy::Ignored, QSizePolicy::Preferred);
        sp.setHeightForWidth(l != m_stats);
        l->setSizePolicy(sp);
    }
    v->addWidget(m_body);

    connect(m_copy, &QPushButton::clicked, this,
            [this] { QApplication::clipboard()->setText(m_content); });
    connect(m_copyCode, &QPushButton::clicked, this, [this] {
        QApplication::clipboard()->setText(codeBlocks(m_content).join(QStringLiteral("\n\n")));
    });
    connect(m_edit, &QPushButton::clicked, this, &MessageWidget::editRequested);
    connect(m_regenerate, &QPushButton::clicked, this, &MessageWidget::regenerateRequested);
}

void MessageWidget::update(const QString &role, const QString &content, const QString &reasoning,
                           const QJsonObject &stats, bool streaming, bool canRegenerate)
{
    const bool user = role == QLatin1String("user");
    m_role->setText(user ? tr("You") : tr("Assistant"));
    setAccessibleName(user ? tr("Your message") : tr("Assistant reply"));
    m_content = content;
    const QColor codeBg = palette().color(QPalette::AlternateBase).darker(110);
    if (streaming) {
        m_body->showStreaming(content.isEmpty() ? tr("...") : content);
        m_renderedContent.clear();
    } else if (content != m_renderedContent || m_renderedContent.isEmpty()) {
        m_body->showMarkdown(content, codeBg);
        m_renderedContent = content;
    }
    if (reasoning != m_renderedReasoning) {
        m_reasoning->setText(reasoning.toHtmlEscaped().replace(QLatin1Char('\n'),
                                                                QStringLiteral("<br>")));
        m_renderedReasoning = reasoning;
    }
    m_thought->setVisible(!reasoning.isEmpty());
    const double secs = stats.value(QStringLiteral("reasoning_s")).toDouble();
    m_thought->setText(streaming && content.isEmpty()
                           ? tr("Thinking ...")
                           : (secs > 0 ? tr("Thought for %1 s").arg(secs, 0, 'f', 1)
                                       : tr("Reasoning")));
    m_stats->setText(streaming ? tr("generating ...") : statsLine(stats));
    m_stats->setToolTip(m_stats->text());
    m_copy->setEnabled(!streaming);
    m_copyCode->setVisible(!streaming && !codeBlocks(content).isEmpty());
    m_edit->setVisible(user);
    m_regenerate->setVisible(!user && canRegenerate && !streaming);
}

ChatView::ChatView(MessageModel *model, QWidget *parent) : QScrollArea(parent), m_model(model)
{
    setWidgetResizable(true);
    setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    setAccessibleName(tr("Conversation"));
    m_column = new QWidget(this);
    m_layout = new QVBoxLayout(m_column);
    m_layout->addStretch(1);
    setWidget(m_column);
    connect(model, &QAbstractItemModel::modelReset, this, &ChatView::rebuild);
    connect(model, &QAbstractItemModel::rowsInserted, this,
            [this](const QModelIndex &, int first, int last) { insertRows(first, last); });
    connect(model, &QAbstractItemModel::rowsRemoved, this,
            [this](const QModelIndex &, int first, int last) { removeRows(first, last); });
    connect(model, &QAbstractItemModel::dataChanged, this,
            [this](const QModelIndex &a, const QModelIndex &b) {
                for (int r = a.row(); r <= b.row(); ++r)
                    refresh(r);
                followEnd();
            });
    rebuild();
}

void ChatView::rebuild()
{
    qDeleteAll(m_widgets);
    m_widgets.clear();
    if (m_model->rowCount() > 0)
        insertRows(0, m_model->rowCount() - 1);
}

void ChatView::insertRows(int first, int last)
{
    for (int r = first; r <= last; ++r) {
        auto *w = new MessageWidget(m_column);
        m_widgets.insert(r, w);
        m_layout->insertWidget(r, w);
        connect(w, &MessageWidget::editRequested, this,
                [this, w] { emit editRequested(static_cast<int>(m_widgets.indexOf(w))); });
        connect(w, &MessageWidget::regenerateRequested, this,
                [this, w] { emit regenerateRequested(static_cast<int>(m_widgets.indexOf(w))); });
    }
    refreshAll();  // "Regenerate" moves to the new last reply
    followEnd();
}

void ChatView::removeRows(int first, int last)
{
    for (int r = last; r >= first; --r)
        delete m_widgets.takeAt(r);
    refreshAll();
}

void ChatView::refresh(int row)
{
    if (row < 0 || row >= m_widgets.size())
        return;
    const ChatMessage &m = m_model->at(row);
    const bool last = row == m_widgets.size() - 1;
    m_widgets[row]->update(m.role, m.content, m.reasoning, m.stats, m.streaming, last);
}

void ChatView::refreshAll()
{
    for (int r = 0; r < m_widgets.size(); ++r)
        refresh(r);
}

void ChatView::followEnd()
{
    QScrollBar *bar = verticalScrollBar();
    const bool atEnd = bar->value() >= bar->maximum() - 40;
    if (atEnd)
        QTimer::singleShot(0, this, [bar] { bar->setValue(bar->maximum()); });
}

}  // namespace neural::gui
