#include "chat/chatview.h"

#include <QApplication>
#include <QClipboard>
#include <QElapsedTimer>
#include <QHBoxLayout>
#include <QJsonObject>
#include <QLabel>
#include <QPalette>
#include <QPushButton>
#include <QScrollBar>
#include <QTimer>
#include <QToolButton>
#include <QVBoxLayout>

#include "chat/markdown.h"
#include "chat/messagemodel.h"

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

    m_body = new QLabel(this);
    m_body->setWordWrap(true);
    m_body->setTextFormat(Qt::RichText);
    m_body->setTextInteractionFlags(Qt::TextBrowserInteraction);
    m_body->setOpenExternalLinks(true);
    m_body->setAccessibleName(tr("Message text"));
    // A long unbroken word (code, a URL, random-weight output) must not widen the column past
    // the view: the labels take the width they are given and grow in height.
    for (QLabel *l : {m_body, m_reasoning, m_stats}) {
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
    // While streaming, a long reply costs more to lay out than the 33 ms between batches: then
    // re-render only after 3x the last render's time has passed (the final state always renders),
    // so the GUI thread keeps at least 3/4 of its time for input and painting.
    const bool due = !streaming || !m_lastRender.isValid() ||
                     m_lastRender.elapsed() >= 3 * m_renderMs;
    if ((content != m_renderedContent || m_body->text().isEmpty()) && due) {
        QElapsedTimer t;
        t.start();
        m_body->setText(content.isEmpty() && streaming ? tr("<i>...</i>")
                                                       : markdownToHtml(content, codeBg));
        m_body->adjustSize();
        m_renderedContent = content;
        m_renderMs = t.elapsed();
        m_lastRender.start();
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
