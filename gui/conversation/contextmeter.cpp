#include "conversation/contextmeter.h"

#include <QVBoxLayout>
#include <QLabel>
#include <QLocale>

namespace neural::gui {

ContextMeter::ContextMeter(EngineHost* engine, std::function<TurnRequest()> request,
                           QWidget* parent)
    : QWidget(parent), m_engine(engine), m_request(std::move(request)) {
    auto* v = new QVBoxLayout(this);
    v->setContentsMargins(0, 0, 0, 0);
    v->setSpacing(2);
    m_label = new QLabel(this);
    m_label->setForegroundRole(QPalette::PlaceholderText);
    m_label->setAccessibleName(tr("Context used"));
    // Wrapped, so the line never widens the chat column past a narrow window.
    m_label->setWordWrap(true);
    m_warning = new QLabel(this);
    m_warning->setWordWrap(true);
    m_warning->setTextFormat(Qt::RichText);
    m_warning->setTextInteractionFlags(Qt::LinksAccessibleByMouse | Qt::LinksAccessibleByKeyboard);
    m_warning->setAccessibleName(tr("Context warning"));
    m_warning->hide();
    v->addWidget(m_label);
    v->addWidget(m_warning);
    connect(m_warning, &QLabel::linkActivated, this, [this](const QString& link) {
        if (link == QLatin1String("new"))
            emit newConversationRequested();
        else if (link == QLatin1String("branch"))
            emit branchRequested();
    });
    m_timer.setSingleShot(true);
    m_timer.setInterval(kDelayMs);
    connect(&m_timer, &QTimer::timeout, this, &ContextMeter::refresh);
    // A model loaded or unloaded changes the tokenizer and the context.
    connect(engine, &EngineHost::stateChanged, this, &ContextMeter::schedule);
}

void ContextMeter::schedule() { m_timer.start(); }

bool ContextMeter::overflows() const {
    return m_used >= 0 && m_context > 0 && m_used + m_replyLimit > m_context;
}

void ContextMeter::refresh() {
    m_timer.stop();
    const TurnRequest req = m_request();
    m_replyLimit = req.maxTokens;
    m_used = m_engine->promptTokens(req);
    m_context = m_engine->contextLength();
    const QLocale locale;
    if (m_used < 0) {
        m_label->setText(tr("Context: no model loaded"));
        m_warning->hide();
    } else if (m_context <= 0) {
        m_label->setText(tr("Context: %1 tokens").arg(locale.toString(m_used)));
        m_warning->hide();
    } else {
        const double percent = 100.0 * static_cast<double>(m_used) / static_cast<double>(m_context);
        m_label->setText(tr("Context: %1 of %2 tokens (%3%)")
                             .arg(locale.toString(m_used), locale.toString(m_context))
                             .arg(percent, 0, 'f', percent < 10 ? 1 : 0));
        if (overflows()) {
            const qint64 room = m_context - m_used;
            m_warning->setText(
                (room > 0 ? tr("<b>The context is nearly full:</b> a reply has room for %1 "
                               "tokens, less than its limit of %2, and the next message is "
                               "refused.")
                                .arg(locale.toString(room), locale.toString(m_replyLimit))
                          : tr("<b>The context is full:</b> this conversation and your message "
                               "take more than the model's %1 tokens.")
                                .arg(locale.toString(m_context))) +
                QLatin1Char(' ') +
                tr("Start a <a href=\"new\">new conversation</a>, <a href=\"branch\">branch "
                   "from an earlier message</a> (a new conversation with the messages up to "
                   "it), or shorten your message or the reply's token limit."));
            m_warning->show();
        } else {
            m_warning->hide();
        }
    }
    m_label->setToolTip(
        tr("Tokens of the conversation as the model reads it, with the message being typed, "
           "of the model's context; a reply may take up to %1 more (its token limit).")
            .arg(m_replyLimit));
    emit counted();
}

}  // namespace neural::gui
