#include "tools/toolcard.h"

#include <QFontDatabase>
#include <QHBoxLayout>
#include <QJsonDocument>
#include <QLabel>
#include <QLocale>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QToolButton>
#include <QVBoxLayout>

#include "tools/conversationtools.h"
#include "tools/toolmanager.h"

namespace neural::gui {

namespace {
QString str(const QJsonObject& o, const char* key) {
    return o.value(QLatin1String(key)).toString();
}

// JSON arguments indented for reading; anything else (python's code, malformed JSON) as it is.
QString prettyArguments(const QString& text) {
    QJsonParseError error;
    const QJsonDocument doc = QJsonDocument::fromJson(text.toUtf8(), &error);
    if (error.error != QJsonParseError::NoError || doc.isNull()) return text;
    return QString::fromUtf8(doc.toJson(QJsonDocument::Indented)).trimmed();
}
}  // namespace

ToolCard::ToolCard(QWidget* parent) : QFrame(parent) {
    setFrameShape(QFrame::StyledPanel);
    setAccessibleName(tr("Tool call"));
    auto* v = new QVBoxLayout(this);
    v->setContentsMargins(8, 6, 8, 6);
    m_preamble = new QLabel(this);
    m_preamble->setWordWrap(true);
    m_preamble->setTextFormat(Qt::PlainText);
    m_preamble->setAccessibleName(tr("The model's note"));
    m_preamble->hide();
    m_title = new QLabel(this);
    m_title->setTextFormat(Qt::RichText);
    m_title->setAccessibleName(tr("Tool"));
    m_arguments = new QLabel(this);
    m_arguments->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_arguments->setTextFormat(Qt::PlainText);
    m_arguments->setWordWrap(true);
    m_arguments->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_arguments->setAccessibleName(tr("Tool arguments"));
    m_state = new QLabel(this);
    m_state->setWordWrap(true);
    m_state->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_state->setAccessibleName(tr("Tool call state"));
    for (QLabel* l : {m_preamble, m_arguments, m_state}) {
        QSizePolicy sp(QSizePolicy::Ignored, QSizePolicy::Preferred);
        sp.setHeightForWidth(true);
        l->setSizePolicy(sp);
    }
    m_progress = new QProgressBar(this);
    m_progress->setAccessibleName(tr("Tool call progress"));
    m_progress->setMaximumHeight(8);
    m_progress->setTextVisible(false);
    m_run = new QPushButton(tr("Run"), this);
    m_run->setAccessibleName(tr("Run the tool call"));
    m_deny = new QPushButton(tr("Deny"), this);
    m_deny->setAccessibleName(tr("Deny the tool call"));
    m_deny->setToolTip(tr("Do not run it: the model is told that you said no"));
    m_always = new QPushButton(tr("Always allow"), this);
    m_always->setAccessibleName(tr("Always allow this tool in this conversation"));
    m_always->setToolTip(tr("Run it, and run this tool without asking in this conversation"));
    m_cancel = new QPushButton(tr("Cancel"), this);
    m_cancel->setAccessibleName(tr("Cancel the running tool call"));
    auto* buttons = new QHBoxLayout;
    buttons->addWidget(m_run);
    buttons->addWidget(m_deny);
    buttons->addWidget(m_always);
    buttons->addWidget(m_cancel);
    buttons->addStretch(1);
    m_resultToggle = new QToolButton(this);
    m_resultToggle->setCheckable(true);
    m_resultToggle->setArrowType(Qt::RightArrow);
    m_resultToggle->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    m_resultToggle->setAutoRaise(true);
    m_resultToggle->setAccessibleName(tr("Show the tool's result"));
    m_result = new QPlainTextEdit(this);
    m_result->setReadOnly(true);
    m_result->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    m_result->setAccessibleName(tr("Tool result"));
    m_result->setMaximumHeight(240);
    m_result->hide();
    connect(m_resultToggle, &QToolButton::toggled, this, [this](bool on) {
        m_resultToggle->setArrowType(on ? Qt::DownArrow : Qt::RightArrow);
        m_resultToggle->setAccessibleName(on ? tr("Hide the tool's result")
                                             : tr("Show the tool's result"));
        m_result->setVisible(on);
    });
    v->addWidget(m_preamble);
    v->addWidget(m_title);
    v->addWidget(m_arguments);
    v->addWidget(m_state);
    v->addWidget(m_progress);
    v->addLayout(buttons);
    v->addWidget(m_resultToggle);
    v->addWidget(m_result);
    connect(m_run, &QPushButton::clicked, this, &ToolCard::runRequested);
    connect(m_deny, &QPushButton::clicked, this, &ToolCard::denyRequested);
    connect(m_always, &QPushButton::clicked, this, &ToolCard::alwaysAllowRequested);
    connect(m_cancel, &QPushButton::clicked, this, &ToolCard::cancelRequested);
}

QString ToolCard::stateText(const QJsonObject& call) {
    const QString status = str(call, "status");
    const QString detail = str(call, "detail");
    const double seconds = call.value(QStringLiteral("seconds")).toDouble();
    const QString took =
        seconds > 0 ? tr(" in %1 s").arg(QLocale().toString(seconds, 'f', 1)) : QString();
    QString text;
    if (status == QLatin1String("pending")) {
        text = tr("The model wants to run this tool. Run it?");
    } else if (status == QLatin1String("running")) {
        const QString message = str(call, "progress_message");
        text = message.isEmpty() ? tr("Running ...") : tr("Running: %1").arg(message);
    } else if (status == QLatin1String("ok")) {
        text = tr("Done%1.").arg(took);
    } else if (status == QLatin1String("tool_error")) {
        text = tr("The tool reported an error%1; the model reads it.").arg(took);
    } else if (status == QLatin1String("failed")) {
        text = tr("The call failed: %1").arg(detail.isEmpty() ? tr("no reason given") : detail);
    } else if (status == QLatin1String("timed_out")) {
        text = tr("The call timed out%1.")
                   .arg(detail.isEmpty() ? QString() : QStringLiteral(": ") + detail);
    } else if (status == QLatin1String("cancelled")) {
        text = tr("Cancelled; the model was told the call was stopped.");
    } else if (status == QLatin1String("denied")) {
        text = tr("Denied; the model was told that you did not allow this call.");
    } else if (status == QLatin1String("unavailable")) {
        text = tr("Not run: %1").arg(detail);
    } else if (status == QLatin1String("limit")) {
        text = tr("Not run: the model called tools %1 times in a row for one message. Send a "
                  "message to go on.")
                   .arg(ToolManager::kMaxToolRounds);
    } else {
        text = status;
    }
    if (call.value(QStringLiteral("truncated")).toBool())
        text += QLatin1Char(' ') +
                tr("The result was cut to the size limit (%1 bytes in full).")
                    .arg(QLocale().toString(call.value(QStringLiteral("full_bytes")).toInteger()));
    if (call.value(QStringLiteral("auto")).toBool())
        text += QLatin1Char(' ') + tr("(Always allowed in this conversation.)");
    // The error in full (stderr, the server's message) under a failure the model also read.
    if (!detail.isEmpty() &&
        (status == QLatin1String("tool_error") || status == QLatin1String("cancelled")))
        text += QLatin1Char('\n') + detail;
    return text;
}

void ToolCard::setCall(const QJsonObject& call, const QString& result) {
    const QString recipient = str(call, "recipient");
    const ToolAddress a = splitRecipient(recipient);
    const QString ns = a.ns.toHtmlEscaped();
    m_title->setText(a.tool.isEmpty()
                         ? tr("Tool call: <b>%1</b>").arg(ns)
                         : tr("Tool call: <b>%1</b> \u203a %2").arg(ns, a.tool.toHtmlEscaped()));
    const QString preamble = str(call, "preamble").trimmed();
    m_preamble->setText(preamble);
    m_preamble->setVisible(!preamble.isEmpty());
    const QString args = prettyArguments(str(call, "arguments"));
    m_arguments->setText(args.isEmpty() ? tr("(no arguments)") : args);
    const QString status = str(call, "status");
    m_state->setText(stateText(call));
    const bool pending = status == QLatin1String("pending");
    const bool running = status == QLatin1String("running");
    m_run->setVisible(pending);
    m_deny->setVisible(pending);
    m_always->setVisible(pending);
    m_cancel->setVisible(running);
    m_progress->setVisible(running);
    if (running) {
        const double f = call.value(QStringLiteral("progress")).toDouble(-1);
        if (f < 0) {
            m_progress->setRange(0, 0);  // busy, no fraction known
        } else {
            m_progress->setRange(0, 1000);
            m_progress->setValue(static_cast<int>(f * 1000));
        }
    }
    const bool answered = !pending && !running;
    m_resultToggle->setVisible(answered && !result.isEmpty());
    m_resultToggle->setText(
        tr("Result (%1 bytes)").arg(QLocale().toString(result.toUtf8().size())));
    if (m_result->toPlainText() != result) m_result->setPlainText(result);
    if (!m_resultToggle->isVisible())
        m_result->hide();
    else
        m_result->setVisible(m_resultToggle->isChecked());
    setAccessibleDescription(tr("%1 %2. %3").arg(recipient, args.left(300), m_state->text()));
}

}  // namespace neural::gui
