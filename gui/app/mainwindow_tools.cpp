// MainWindow's tools (docs/DESKTOP.md "Tools"): the loop that puts the user in control of every
// tool call. A reply that ends in a call (TurnReport finish "tool_calls") becomes a tool message
// (role "tool"; its stats["tool"] holds the call and how it ended, its content the result the
// model reads), shown as a card. Run starts the call on its provider (ToolManager); its outcome
// is stored with the message and the next turn starts by itself, so the model answers. Deny
// answers the call with a denial; Always allow remembers the tool for the conversation. At most
// ToolManager::kMaxToolRounds rounds follow one message of yours.
#include <QDateTime>
#include <QDesktopServices>
#include <QDir>
#include <QJsonObject>
#include <QMenu>
#include <QStatusBar>
#include <QToolButton>
#include <QUrl>

#include <spdlog/spdlog.h>

#include "common/dialogs.h"
#include "app/mainwindow.h"
#include "conversation/chatinput.h"
#include "conversation/chatview.h"
#include "conversation/contextmeter.h"
#include "settings/toolsettingsdialog.h"
#include "tool.h"
#include "tools/toolcard.h"
#include "tools/toolmanager.h"

namespace neural::gui {

namespace {
const QString kTool = QStringLiteral("tool");
const QString kStatus = QStringLiteral("status");

QJsonObject callOf(const ChatMessage& m) { return m.stats.value(kTool).toObject(); }

bool isPending(const ChatMessage& m) {
    return m.role == QLatin1String("tool") &&
           callOf(m).value(kStatus).toString() == QLatin1String("pending");
}

StoredMessage storedFrom(const ChatMessage& m, qint64 conv, int row) {
    StoredMessage s;
    s.id = m.id;
    s.conversationId = conv;
    s.position = row;
    s.role = m.role;
    s.content = m.content;
    s.reasoning = m.reasoning;
    s.stats = m.stats;
    return s;
}
}  // namespace

void MainWindow::buildToolsUi(QWidget* parent) {
    m_toolsButton = new QToolButton(parent);
    m_toolsButton->setText(tr("Tools"));
    m_toolsButton->setAccessibleName(tr("Tools of this conversation"));
    m_toolsButton->setToolTip(
        tr("The tools the model may call in this conversation: MCP servers, python, browser"));
    m_toolsButton->setPopupMode(QToolButton::InstantPopup);
    m_toolsMenu = new QMenu(m_toolsButton);
    m_toolsButton->setMenu(m_toolsMenu);
    connect(m_toolsMenu, &QMenu::aboutToShow, this, &MainWindow::fillToolsMenu);
    fillToolsMenu();
}

void MainWindow::fillToolsMenu() {
    m_toolsMenu->clear();
    const QStringList names = m_tools->namespaces();
    for (const QString& ns : names) {
        const bool builtin = ConversationTools::isBuiltin(ns);
        toolhost::ToolProvider* p = builtin ? nullptr : m_tools->provider(ns, m_current);
        QString label = ns;
        if (p && p->ready())
            label =
                tr("%1 (%n tool(s))", nullptr, static_cast<int>(p->toolNamespace().tools.size()))
                    .arg(ns);
        else if (p)
            label = tr("%1 (not ready: %2)").arg(ns, p->problem());
        else if (ns == QLatin1String("python"))
            label = tr("python: runs code the model writes on this PC");
        else if (ns == QLatin1String("browser"))
            label = tr("browser: searches and opens web pages");
        QAction* a = m_toolsMenu->addAction(label);
        a->setCheckable(true);
        a->setChecked(m_convTools.enabled(ns));
        a->setData(ns);
        connect(a, &QAction::toggled, this, [this, ns](bool on) {
            if (on && ns == QLatin1String("python") &&
                askQuestion(this, tr("Python"),
                            tr("Python code that the model writes will run on this PC, as "
                               "you, in a separate process with a time and a memory limit and "
                               "its own scratch folder. Each call still waits for your Run. "
                               "Turn python on for this conversation?")) != QMessageBox::Yes) {
                fillToolsMenu();
                return;
            }
            ConversationTools t = m_convTools;
            t.setEnabled(ns, on);
            setConversationTools(t);
        });
    }
    m_toolsMenu->addSeparator();
    m_toolsMenu->addAction(tr("Open python's scratch folder"), this, [this] {
        const QString dir = ToolManager::scratchFolder(m_current);
        QDir().mkpath(dir);
        QDesktopServices::openUrl(QUrl::fromLocalFile(dir));
    });
    QAction* restart = m_toolsMenu->addAction(tr("Restart python"), this, [this] {
        if (m_toolCall && m_toolConversation == m_current) m_toolCall->cancel();
        m_tools->dropBuiltins(m_current);
        statusBar()->showMessage(tr("Python restarts with the next call."), 4000);
    });
    restart->setEnabled(m_convTools.enabled(QStringLiteral("python")));
    m_toolsMenu->addAction(tr("Tool settings..."), this, &MainWindow::openToolSettings);
}

void MainWindow::setConversationTools(const ConversationTools& tools) {
    m_convTools = tools;
    if (m_current != 0 && !m_store.setConversationTools(m_current, tools.toJson()))
        statusBar()->showMessage(m_store.lastError(), 6000);
    m_meter->refresh();  // the tools are part of the prompt
}

bool MainWindow::toolRunning() const { return !m_toolCall.isNull(); }

ConversationTools MainWindow::toolsOf(qint64 conv) {
    if (conv == m_current) return m_convTools;
    const auto info = m_store.conversation(conv);
    return info ? ConversationTools::fromJson(info->tools) : ConversationTools{};
}

int MainWindow::toolRoundsSinceUser(qint64 conv) {
    const QList<StoredMessage> stored = m_store.messages(conv);
    int rounds = 0;
    for (qsizetype i = stored.size() - 1; i >= 0; --i) {
        if (stored[i].role == QLatin1String("user")) break;
        if (stored[i].role == QLatin1String("tool")) ++rounds;
    }
    return rounds;
}

int MainWindow::rowOfMessage(qint64 id) const {
    for (int r = 0; r < m_messages->rowCount(); ++r)
        if (m_messages->at(r).id == id) return r;
    return -1;
}

void MainWindow::onToolCallReply(qint64 conv, const TurnReport& report) {
    const ToolAddress a = splitRecipient(report.toolRecipient);
    const ConversationTools tools = toolsOf(conv);
    QJsonObject call{{QStringLiteral("recipient"), report.toolRecipient},
                     {QStringLiteral("channel"), report.toolChannel},
                     {QStringLiteral("content_type"), report.toolContentType},
                     {QStringLiteral("arguments"), report.toolArguments},
                     {kStatus, QStringLiteral("pending")}};
    // A note to the user before the call (a commentary preamble) goes with it.
    if (!report.content.trimmed().isEmpty())
        call.insert(QStringLiteral("preamble"), report.content);
    QString result;
    toolhost::ToolProvider* p = tools.enabled(a.ns) ? m_tools->provider(a.ns, conv) : nullptr;
    if (toolRoundsSinceUser(conv) >= ToolManager::kMaxToolRounds) {
        call.insert(kStatus, QStringLiteral("limit"));
        result = tr("Not run: %1 tool calls in a row; the user decides how to go on.")
                     .arg(ToolManager::kMaxToolRounds);
    } else if (!p || !p->ready()) {
        // Nothing to ask the user: the model reads why and answers.
        const QString why = !tools.enabled(a.ns) && m_tools->namespaces().contains(a.ns)
                                ? tr("%1 is turned off in this conversation").arg(a.ns)
                            : !p ? tr("there is no tool %1").arg(report.toolRecipient)
                                 : tr("%1 is not ready: %2").arg(a.ns, p->problem());
        call.insert(kStatus, QStringLiteral("unavailable"));
        call.insert(QStringLiteral("detail"), why);
        result = tr("Error: the tool %1 is not available (%2).").arg(report.toolRecipient, why);
    }
    QJsonObject stats = report.toJson();
    stats.insert(kTool, call);
    const StoredMessage stored =
        m_store.appendMessage(conv, QStringLiteral("tool"), result, report.reasoning, stats);
    if (stored.id == 0) spdlog::error("tool call not saved: {}", m_store.lastError().toStdString());
    const bool open = conv == m_current;
    if (open) m_messages->endStreaming(stored.id ? &stored : nullptr);
    refreshListRow(conv);
    if (!open || stored.id == 0) return;
    const QString status = call.value(kStatus).toString();
    if (status == QLatin1String("unavailable")) {
        startTurn();
    } else if (status == QLatin1String("pending") && tools.allowed(report.toolRecipient)) {
        runTool(m_messages->rowCount() - 1, true);
    }
}

void MainWindow::toolAction(int row, int action) {
    if (row < 0 || row >= m_messages->rowCount()) return;
    const ChatMessage& m = m_messages->at(row);
    if (action == kToolCancel) {
        if (m_toolCall && m.id == m_toolMessage) m_toolCall->cancel();
        return;
    }
    if (!isPending(m) || m_engine->busy() || toolRunning()) return;
    switch (action) {
        case kToolRun:
            runTool(row, false);
            break;
        case kToolAlways: {
            ConversationTools t = m_convTools;
            const QString recipient = callOf(m).value(QStringLiteral("recipient")).toString();
            if (!t.alwaysAllow.contains(recipient)) t.alwaysAllow.push_back(recipient);
            setConversationTools(t);
            runTool(row, true);
            break;
        }
        case kToolDeny:
            answerTool(row, QStringLiteral("denied"),
                       tr("The user denied this call: it was not run."), {}, true);
            break;
        default:
            break;
    }
}

void MainWindow::runTool(int row, bool automatic) {
    ChatMessage m = m_messages->at(row);
    QJsonObject call = callOf(m);
    const QString recipient = call.value(QStringLiteral("recipient")).toString();
    const ToolAddress a = splitRecipient(recipient);
    toolhost::ToolProvider* p =
        m_convTools.enabled(a.ns) ? m_tools->provider(a.ns, m_current) : nullptr;
    if (!p || !p->ready()) {
        const QString why = !p ? tr("%1 is turned off or gone").arg(a.ns)
                               : tr("%1 is not ready: %2").arg(a.ns, p->problem());
        answerTool(row, QStringLiteral("unavailable"),
                   tr("Error: the tool %1 is not available (%2).").arg(recipient, why), why, true);
        return;
    }
    m_toolAutomatic = automatic;
    m_toolStopped = false;
    showToolRunning(row);
    m_toolMessage = m.id;
    m_toolConversation = m_current;
    m_toolStartMs = QDateTime::currentMSecsSinceEpoch();
    spdlog::info("tool call {} ({} bytes of arguments)", recipient.toStdString(),
                 call.value(QStringLiteral("arguments")).toString().toUtf8().size());
    toolhost::ToolCall* running =
        p->call(a.tool, call.value(QStringLiteral("arguments")).toString(), m_tools->limits());
    m_toolCall = running;
    connect(running, &toolhost::ToolCall::progress, this,
            [this, id = m.id](double fraction, const QString& message) {
                const int r = rowOfMessage(id);
                if (r < 0 || m_toolConversation != m_current) return;
                ChatMessage cm = m_messages->at(r);
                QJsonObject c = callOf(cm);
                c.insert(QStringLiteral("progress"), fraction);
                if (!message.isEmpty()) c.insert(QStringLiteral("progress_message"), message);
                cm.stats.insert(kTool, c);
                m_messages->replace(r, storedFrom(cm, m_current, r));
            });
    connect(running, &toolhost::ToolCall::finished, this, &MainWindow::onToolFinished);
}

void MainWindow::showToolRunning(int row) {
    // Running lives in the view only: a crash while it runs leaves the card waiting for Run.
    ChatMessage m = m_messages->at(row);
    QJsonObject call = callOf(m);
    call.insert(kStatus, QStringLiteral("running"));
    call.insert(QStringLiteral("auto"), m_toolAutomatic);
    call.insert(QStringLiteral("progress"), -1);
    m.stats.insert(kTool, call);
    m_messages->replace(row, storedFrom(m, m_current, row));
}

void MainWindow::onToolFinished(const toolhost::ToolOutcome& outcome) {
    if (m_toolCall) m_toolCall->deleteLater();
    m_toolCall = nullptr;
    const qint64 conv = std::exchange(m_toolConversation, 0);
    const qint64 id = std::exchange(m_toolMessage, 0);
    const double seconds = (QDateTime::currentMSecsSinceEpoch() - m_toolStartMs) / 1000.0;
    // The stored message as it waited (pending), now answered.
    const QList<StoredMessage> stored = m_store.messages(conv);
    auto it = std::find_if(stored.begin(), stored.end(),
                           [id](const StoredMessage& s) { return s.id == id; });
    if (it == stored.end()) return;  // deleted meanwhile
    StoredMessage s = *it;
    QJsonObject call = s.stats.value(kTool).toObject();
    const int row = conv == m_current ? rowOfMessage(id) : -1;
    call.insert(QStringLiteral("auto"), m_toolAutomatic);
    call.insert(kStatus, toolhost::statusName(outcome.status));
    call.insert(QStringLiteral("seconds"), seconds);
    if (!outcome.detail.isEmpty()) call.insert(QStringLiteral("detail"), outcome.detail);
    if (outcome.truncated) {
        call.insert(QStringLiteral("truncated"), true);
        call.insert(QStringLiteral("full_bytes"), outcome.fullBytes);
    }
    s.stats.insert(kTool, call);
    s.content = outcome.text;
    if (!m_store.setMessageVersions(id, {MessageVersion{s.content, s.reasoning, s.stats}}, 0))
        statusBar()->showMessage(m_store.lastError(), 6000);
    spdlog::info("tool call {}: {} in {:.1f} s",
                 call.value(QStringLiteral("recipient")).toString().toStdString(),
                 toolhost::statusName(outcome.status).toStdString(), seconds);
    if (row < 0) return;  // its conversation is not open: Regenerate answers it there
    m_messages->replace(row, s);
    // The model reads the outcome (an error and a cancel too) and answers, unless Stop ended it.
    if (row == m_messages->rowCount() - 1 && !m_engine->busy() && !m_toolStopped) startTurn();
}

void MainWindow::answerTool(int row, const QString& status, const QString& text,
                            const QString& detail, bool continueTurn) {
    ChatMessage m = m_messages->at(row);
    QJsonObject call = callOf(m);
    call.insert(kStatus, status);
    if (!detail.isEmpty()) call.insert(QStringLiteral("detail"), detail);
    m.stats.insert(kTool, call);
    m.content = text;
    if (!m_store.setMessageVersions(m.id, {MessageVersion{m.content, m.reasoning, m.stats}}, 0))
        statusBar()->showMessage(m_store.lastError(), 6000);
    m_messages->replace(row, storedFrom(m, m_current, row));
    if (continueTurn && row == m_messages->rowCount() - 1 && !m_engine->busy()) startTurn();
}

void MainWindow::settlePendingTool() {
    const int last = m_messages->rowCount() - 1;
    if (last >= 0 && isPending(m_messages->at(last)))
        answerTool(last, QStringLiteral("denied"),
                   tr("The user did not run this call and wrote a new message instead."), {},
                   false);
}

void MainWindow::openToolSettings() {
    ToolSettingsDialog d(m_tools, this);
    d.exec();
    m_meter->refresh();  // the tools offered are part of the prompt
}

}  // namespace neural::gui
