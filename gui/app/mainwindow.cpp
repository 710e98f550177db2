#include "app/mainwindow.h"

#include <QAction>
#include <QActionGroup>
#include <QApplication>
#include <QClipboard>
#include <QCloseEvent>
#include <QComboBox>
#include <QDesktopServices>
#include <QDockWidget>
#include <QFile>
#include <QFileDialog>
#include <QFontDatabase>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QLabel>
#include <QLineEdit>
#include <QListView>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSaveFile>
#include <QShortcut>
#include <QSplitter>
#include <QStatusBar>
#include <QSystemTrayIcon>
#include <QTimer>
#include <QUrl>
#include <QVBoxLayout>

#include <spdlog/spdlog.h>

#include "app/applog.h"
#include "app/paths.h"
#include "app/theme.h"
#include "benchmark/benchmarkdialog.h"
#include "chat/chatinput.h"
#include "chat/chatview.h"
#include "settings/profiledialog.h"
#include "telemetry/telemetrydock.h"
#include "tray/servercontrol.h"
#include "wizard/setupwizard.h"

namespace neural::gui {

namespace {
QString titleFrom(const QString &text)
{
    QString t = text.simplified();
    if (t.size() > 48)
        t = t.left(45) + QStringLiteral("...");
    return t.isEmpty() ? QObject::tr("New conversation") : t;
}
}  // namespace

MainWindow::MainWindow(Options options, QWidget *parent)
    : QMainWindow(parent), m_options(std::move(options))
{
    if (m_options.dbPath.isEmpty())
        m_options.dbPath = conversationsPath();
    if (m_options.profilesPath.isEmpty())
        m_options.profilesPath = profilesPath();

    m_engine = new EngineHost(this);
    m_server = new ServerControl(m_engine, this);
    m_conversations = new ConversationModel(this);
    m_messages = new MessageModel(this);

    setWindowTitle(tr("Neural"));
    setWindowIcon(QIcon(QStringLiteral(":/neural/neural.ico")));
    resize(1180, 780);
    buildUi();
    buildMenus();
    buildTray();

    if (!m_store.open(m_options.dbPath)) {
        // Keep working in memory so nothing blocks chatting; say clearly that it is not saved.
        const QString why = m_store.lastError();
        spdlog::error("conversations: {}", why.toStdString());
        QTimer::singleShot(0, this, [this, why] {
            QMessageBox::warning(this, tr("Conversations"),
                                 tr("%1\n\nConversations of this session are kept in memory "
                                    "only.").arg(why));
        });
        m_store.open(QStringLiteral(":memory:"));
    }
    QString profileError;
    if (!m_profiles.load(m_options.profilesPath, &profileError))
        spdlog::warn("{}", profileError.toStdString());

    connect(m_engine, &EngineHost::stateChanged, this, &MainWindow::updateEngineState);
    connect(m_engine, &EngineHost::busyChanged, this, &MainWindow::updateEngineState);
    connect(m_engine, &EngineHost::ready, this, [this] { m_telemetry->setModel(m_engine->model()); });
    connect(m_engine, &EngineHost::turnDelta, m_messages, &MessageModel::appendDelta);
    connect(m_engine, &EngineHost::turnFinished, this, &MainWindow::onTurnFinished);
    connect(m_engine, &EngineHost::loadFailed, this, &MainWindow::onLoadFailed);
    connect(m_server, &ServerControl::runningChanged, this, &MainWindow::updateServerState);
    connect(m_server, &ServerControl::failed, this, [this](const QString &e) {
        statusBar()->showMessage(e, 10000);
    });

    reloadConversations();
    if (m_conversations->rowCount() > 0)
        selectConversation(m_conversations->at(0).id);
    updateEngineState();
    updateServerState(false, {});
    loadActiveProfile();
}

MainWindow::~MainWindow()
{
    m_server->stop();
}

void MainWindow::buildUi()
{
    auto *split = new QSplitter(this);
    split->setChildrenCollapsible(false);

    // Left: search, list, new.
    auto *left = new QWidget(split);
    auto *lv = new QVBoxLayout(left);
    m_search = new QLineEdit(left);
    m_search->setPlaceholderText(tr("Search conversations"));
    m_search->setAccessibleName(tr("Search conversations"));
    m_search->setClearButtonEnabled(true);
    m_list = new QListView(left);
    m_list->setModel(m_conversations);
    m_list->setAccessibleName(tr("Conversations"));
    m_list->setContextMenuPolicy(Qt::CustomContextMenu);
    m_list->setEditTriggers(QAbstractItemView::NoEditTriggers);
    auto *newButton = new QPushButton(tr("New conversation"), left);
    newButton->setAccessibleName(tr("New conversation"));
    newButton->setToolTip(tr("New conversation (Ctrl+N)"));
    lv->addWidget(m_search);
    lv->addWidget(m_list, 1);
    lv->addWidget(newButton);
    connect(m_search, &QLineEdit::textChanged, this, &MainWindow::reloadConversations);
    connect(newButton, &QPushButton::clicked, this, &MainWindow::newConversation);
    connect(m_list, &QListView::clicked, this, [this](const QModelIndex &i) {
        selectConversation(m_conversations->at(i.row()).id);
    });
    connect(m_list, &QListView::activated, this, [this](const QModelIndex &i) {
        selectConversation(m_conversations->at(i.row()).id);
    });
    connect(m_list, &QListView::customContextMenuRequested, this, [this](const QPoint &pos) {
        const QModelIndex i = m_list->indexAt(pos);
        if (!i.isValid())
            return;
        const ConversationInfo c = m_conversations->at(i.row());
        QMenu menu(this);
        menu.addAction(tr("Rename..."), this, [this, c] {
            bool ok = false;
            const QString t = QInputDialog::getText(this, tr("Rename"), tr("Title:"),
                                                    QLineEdit::Normal, c.title, &ok).trimmed();
            if (ok && !t.isEmpty() && m_store.renameConversation(c.id, t))
                reloadConversations();
        });
        QAction *del = menu.addAction(tr("Delete"), this, [this, c] {
            if (QMessageBox::question(this, tr("Delete"), tr("Delete \"%1\"?").arg(c.title)) !=
                QMessageBox::Yes)
                return;
            m_store.deleteConversation(c.id);
            if (c.id == m_current) {
                m_current = 0;
                m_messages->setMessages({});
            }
            reloadConversations();
        });
        del->setEnabled(!(m_engine->busy() && c.id == m_turnConversation));
        menu.exec(m_list->viewport()->mapToGlobal(pos));
    });

    // Right: banner, chat, settings row, input.
    auto *right = new QWidget(split);
    auto *rv = new QVBoxLayout(right);
    m_banner = new QLabel(right);
    m_banner->setWordWrap(true);
    m_banner->setText(tr("<b>Demo model:</b> its weights are random, so its replies are "
                         "nonsense. It shows how the app works; use <i>File &gt; Set up a "
                         "model</i> for a real gpt-oss checkpoint."));
    m_banner->setStyleSheet(QStringLiteral(
        "QLabel { background: #fff3cd; color: #664d03; border: 1px solid #ffe69c; "
        "border-radius: 4px; padding: 6px; }"));
    m_banner->setAccessibleName(tr("Demo model notice"));
    m_banner->hide();
    m_chat = new ChatView(m_messages, right);
    auto *settingsRow = new QHBoxLayout;
    m_effort = new QComboBox(right);
    m_effort->addItems({QStringLiteral("low"), QStringLiteral("medium"), QStringLiteral("high")});
    m_effort->setCurrentText(QStringLiteral("medium"));
    m_effort->setAccessibleName(tr("Reasoning effort"));
    m_systemPrompt = new QPushButton(tr("System prompt..."), right);
    m_systemPrompt->setAccessibleName(tr("System prompt of this conversation"));
    settingsRow->addWidget(new QLabel(tr("Reasoning:"), right));
    settingsRow->addWidget(m_effort);
    settingsRow->addWidget(m_systemPrompt);
    settingsRow->addStretch(1);
    auto *inputRow = new QHBoxLayout;
    m_input = new ChatInput(right);
    m_send = new QPushButton(tr("Send"), right);
    m_send->setAccessibleName(tr("Send message"));
    m_stop = new QPushButton(tr("Stop"), right);
    m_stop->setAccessibleName(tr("Stop generating"));
    m_stop->setToolTip(tr("Stop (Esc)"));
    auto *buttons = new QVBoxLayout;
    buttons->addWidget(m_send);
    buttons->addWidget(m_stop);
    inputRow->addWidget(m_input, 1);
    inputRow->addLayout(buttons);
    rv->addWidget(m_banner);
    rv->addWidget(m_chat, 1);
    rv->addLayout(settingsRow);
    rv->addLayout(inputRow);
    split->addWidget(left);
    split->addWidget(right);
    split->setStretchFactor(1, 1);
    split->setSizes({260, 900});
    setCentralWidget(split);

    connect(m_input, &ChatInput::sendRequested, this, &MainWindow::sendMessage);
    connect(m_input, &ChatInput::stopRequested, this, &MainWindow::stopGeneration);
    connect(m_send, &QPushButton::clicked, this, &MainWindow::sendMessage);
    connect(m_stop, &QPushButton::clicked, this, &MainWindow::stopGeneration);
    connect(m_chat, &ChatView::regenerateRequested, this, [this](int row) { regenerate(row); });
    connect(m_chat, &ChatView::editRequested, this, [this](int row) { editMessage(row); });
    connect(m_effort, &QComboBox::currentTextChanged, this, &MainWindow::saveConversationSettings);
    connect(m_systemPrompt, &QPushButton::clicked, this, [this] {
        if (m_current == 0)
            newConversation();
        const auto info = m_store.conversation(m_current);
        bool ok = false;
        const QString text = QInputDialog::getMultiLineText(
            this, tr("System prompt"),
            tr("Instructions for the assistant in this conversation (empty: none):"),
            info ? info->systemPrompt : QString(), &ok);
        if (ok && m_store.setConversationSettings(m_current, text, m_effort->currentText()))
            m_systemPrompt->setText(text.isEmpty() ? tr("System prompt...")
                                                   : tr("System prompt (set)..."));
    });

    // Docks.
    m_telemetry = new TelemetryDock(this);
    addDockWidget(Qt::RightDockWidgetArea, m_telemetry);
    m_telemetry->hide();
    auto *logDock = new QDockWidget(tr("Logs"), this);
    logDock->setObjectName(QStringLiteral("logsDock"));
    m_logs = new QPlainTextEdit(logDock);
    m_logs->setReadOnly(true);
    m_logs->setMaximumBlockCount(5000);
    m_logs->setAccessibleName(tr("Log messages"));
    m_logs->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
    logDock->setWidget(m_logs);
    addDockWidget(Qt::BottomDockWidgetArea, logDock);
    logDock->hide();
    connect(&LogHub::instance(), &LogHub::line, m_logs, &QPlainTextEdit::appendPlainText);

    // Status bar: engine state, busy bar; server controls when there is no tray.
    m_engineLabel = new QLabel(this);
    m_engineLabel->setAccessibleName(tr("Engine state"));
    m_busy = new QProgressBar(this);
    m_busy->setRange(0, 0);
    m_busy->setMaximumWidth(120);
    m_busy->setAccessibleName(tr("Working"));
    m_busy->hide();
    statusBar()->addWidget(m_engineLabel, 1);
    statusBar()->addWidget(m_busy);
    m_serverLabel = new QLabel(this);
    m_serverLabel->setAccessibleName(tr("API server state"));
    m_serverLabel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_serverButton = new QPushButton(this);
    m_serverButton->setAccessibleName(tr("Start or stop the API server"));
    m_copyUrl = new QPushButton(tr("Copy URL"), this);
    m_copyUrl->setAccessibleName(tr("Copy the API URL"));
    statusBar()->addPermanentWidget(m_serverLabel);
    statusBar()->addPermanentWidget(m_serverButton);
    statusBar()->addPermanentWidget(m_copyUrl);
    connect(m_serverButton, &QPushButton::clicked, this, &MainWindow::toggleServer);
    connect(m_copyUrl, &QPushButton::clicked, this,
            [this] { QApplication::clipboard()->setText(m_server->url()); });

    // Shortcuts (Enter / Shift+Enter live in ChatInput).
    auto *esc = new QShortcut(QKeySequence(Qt::Key_Escape), this);
    connect(esc, &QShortcut::activated, this, &MainWindow::stopGeneration);
    auto *find = new QShortcut(QKeySequence::Find, this);
    connect(find, &QShortcut::activated, m_search, qOverload<>(&QWidget::setFocus));
}

void MainWindow::buildMenus()
{
    QMenu *file = menuBar()->addMenu(tr("&File"));
    QAction *newAct = file->addAction(tr("&New conversation"), this, &MainWindow::newConversation);
    newAct->setShortcut(QKeySequence::New);
    file->addAction(tr("Export as &Markdown..."), this, [this] {
        const QString p = QFileDialog::getSaveFileName(this, tr("Export"), QStringLiteral("conversation.md"),
                                                       tr("Markdown (*.md)"));
        if (!p.isEmpty())
            exportConversation(p, false);
    });
    file->addAction(tr("Export as &JSON..."), this, [this] {
        const QString p = QFileDialog::getSaveFileName(this, tr("Export"), QStringLiteral("conversation.json"),
                                                       tr("JSON (*.json)"));
        if (!p.isEmpty())
            exportConversation(p, true);
    });
    file->addSeparator();
    file->addAction(tr("&Set up a model..."), this, &MainWindow::openWizard);
    file->addAction(tr("Use the &demo model"), this, [this] {
        m_engine->loadDemo(demoModelDir(), demoTokenizerPath());
    });
    file->addSeparator();
    QAction *quit = file->addAction(tr("&Quit"), this, &MainWindow::quitApplication);
    // QKeySequence::Quit is empty on Windows: Ctrl+Q everywhere (Cmd+Q on macOS).
    quit->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Q));
    quit->setShortcutContext(Qt::ApplicationShortcut);

    QMenu *settings = menuBar()->addMenu(tr("&Settings"));
    settings->addAction(tr("&Profiles..."), this, &MainWindow::openProfiles);
    QMenu *theme = settings->addMenu(tr("&Theme"));
    auto *group = new QActionGroup(this);
    const QString current = appSettings()->value(QStringLiteral("ui/theme"), QStringLiteral("system")).toString();
    for (const auto &[key, label] : {std::pair{QStringLiteral("system"), tr("System")},
                                     std::pair{QStringLiteral("light"), tr("Light")},
                                     std::pair{QStringLiteral("dark"), tr("Dark")}}) {
        QAction *a = theme->addAction(label, this, [this, key = key] { setTheme(key); });
        a->setCheckable(true);
        a->setChecked(key == current);
        group->addAction(a);
    }
    QAction *keep = settings->addAction(tr("Keep running in the tray while the API server runs"));
    keep->setCheckable(true);
    keep->setChecked(appSettings()->value(QStringLiteral("server/keepInTray"), true).toBool());
    connect(keep, &QAction::toggled, this,
            [](bool on) { appSettings()->setValue(QStringLiteral("server/keepInTray"), on); });
    settings->addAction(tr("API server &port..."), this, [this] {
        bool ok = false;
        const int port = QInputDialog::getInt(
            this, tr("API server port"), tr("Port (takes effect at the next start):"),
            appSettings()->value(QStringLiteral("server/port"), 8080).toInt(), 1, 65535, 1, &ok);
        if (ok)
            appSettings()->setValue(QStringLiteral("server/port"), port);
    });

    settings->addAction(tr("Reply &length limit..."), this, [this] {
        bool ok = false;
        const int n = QInputDialog::getInt(
            this, tr("Reply length limit"), tr("Most tokens in one reply (reasoning included):"),
            appSettings()->value(QStringLiteral("chat/maxTokens"), 2048).toInt(), 1, 131072, 256, &ok);
        if (ok)
            appSettings()->setValue(QStringLiteral("chat/maxTokens"), n);
    });

    QMenu *tools = menuBar()->addMenu(tr("&Tools"));
    tools->addAction(tr("&Benchmark (A/B profiles)..."), this, &MainWindow::openBenchmark);

    QMenu *server = menuBar()->addMenu(tr("Se&rver"));
    m_serverAction = server->addAction(tr("Start API server"), this, &MainWindow::toggleServer);
    m_copyUrlAction = server->addAction(tr("Copy API URL"), this,
                                        [this] { QApplication::clipboard()->setText(m_server->url()); });

    QMenu *view = menuBar()->addMenu(tr("&View"));
    view->addAction(m_telemetry->toggleViewAction());
    for (QDockWidget *d : findChildren<QDockWidget *>())
        if (d != m_telemetry)
            view->addAction(d->toggleViewAction());
    view->addAction(tr("Open the log folder"), this,
                    [] { QDesktopServices::openUrl(QUrl::fromLocalFile(logDir())); });
}

void MainWindow::buildTray()
{
    if (!m_options.useTray || !QSystemTrayIcon::isSystemTrayAvailable())
        return;
    m_tray = new QSystemTrayIcon(windowIcon(), this);
    m_tray->setToolTip(tr("Neural"));
    auto *menu = new QMenu(this);
    menu->addAction(tr("Show / hide window"), this, [this] { setVisible(!isVisible()); });
    menu->addAction(m_serverAction);
    menu->addAction(m_copyUrlAction);
    menu->addSeparator();
    menu->addAction(tr("Quit"), this, &MainWindow::quitApplication);
    m_tray->setContextMenu(menu);
    connect(m_tray, &QSystemTrayIcon::activated, this, [this](QSystemTrayIcon::ActivationReason r) {
        if (r == QSystemTrayIcon::Trigger) {
            show();
            raise();
            activateWindow();
        }
    });
    m_tray->show();
}

void MainWindow::quitApplication()
{
    // close() alone does not end the app when the window is already hidden in the tray (the
    // last *visible* window closing is what quits), so the event loop is ended explicitly.
    m_quitting = true;
    close();
    m_engine->stop();
    QCoreApplication::quit();
}

void MainWindow::closeEvent(QCloseEvent *event)
{
    const bool keep = appSettings()->value(QStringLiteral("server/keepInTray"), true).toBool();
    if (!m_quitting && m_tray && m_server->isRunning() && keep) {
        hide();
        m_tray->showMessage(tr("Neural"), tr("The API server keeps running at %1.").arg(m_server->url()));
        event->ignore();
        return;
    }
    m_engine->stop();
    event->accept();
}

void MainWindow::reloadConversations()
{
    m_conversations->setConversations(m_store.conversations(m_search ? m_search->text() : QString()));
    const int row = m_conversations->rowOf(m_current);
    if (row >= 0)
        m_list->setCurrentIndex(m_conversations->index(row));
}

void MainWindow::selectConversation(qint64 id)
{
    if (m_engine->busy() && id != m_turnConversation) {
        // The reply streams into the open conversation; switching waits for it.
        statusBar()->showMessage(tr("Stop or wait for the reply before switching."), 4000);
        reloadConversations();
        return;
    }
    if (id == m_current && m_messages->rowCount() > 0)
        return;
    const auto info = m_store.conversation(id);
    if (!info)
        return;
    m_current = id;
    m_messages->setMessages(m_store.messages(id));
    const QSignalBlocker block(m_effort);
    m_effort->setCurrentText(info->reasoningEffort);
    m_systemPrompt->setText(info->systemPrompt.isEmpty() ? tr("System prompt...")
                                                         : tr("System prompt (set)..."));
    const int row = m_conversations->rowOf(id);
    if (row >= 0)
        m_list->setCurrentIndex(m_conversations->index(row));
}

void MainWindow::newConversation()
{
    if (m_engine->busy())
        return;
    const qint64 id = m_store.createConversation(tr("New conversation"));
    if (id == 0) {
        QMessageBox::warning(this, tr("Conversations"), m_store.lastError());
        return;
    }
    m_store.setConversationSettings(id, {}, m_effort->currentText());
    m_current = 0;
    reloadConversations();
    selectConversation(id);
    m_input->setFocus();
}

void MainWindow::saveConversationSettings()
{
    if (m_current == 0)
        return;
    const auto info = m_store.conversation(m_current);
    if (info)
        m_store.setConversationSettings(m_current, info->systemPrompt, m_effort->currentText());
}

void MainWindow::sendMessage()
{
    const QString text = m_input->toPlainText().trimmed();
    if (text.isEmpty() || m_engine->busy())
        return;
    if (m_engine->state() != EngineHost::State::ready) {
        statusBar()->showMessage(tr("No model is ready yet."), 4000);
        return;
    }
    if (m_current == 0)
        newConversation();
    if (m_current == 0)
        return;
    const bool first = m_messages->rowCount() == 0;
    const StoredMessage stored = m_store.appendMessage(m_current, QStringLiteral("user"), text);
    if (stored.id == 0) {
        QMessageBox::warning(this, tr("Conversations"), m_store.lastError());
        return;
    }
    m_input->clear();
    m_messages->append(stored);
    if (first)
        m_store.renameConversation(m_current, titleFrom(text));
    reloadConversations();
    startTurn();
}

void MainWindow::startTurn()
{
    const auto info = m_store.conversation(m_current);
    TurnRequest req;
    req.maxTokens = appSettings()->value(QStringLiteral("chat/maxTokens"), 2048).toInt();
    if (m_turnTokenLimit > 0)
        req.maxTokens = std::min(req.maxTokens, m_turnTokenLimit);
    for (const ChatMessage &m : m_messages->items())
        req.history.push_back({m.role, m.content});
    if (info) {
        req.systemPrompt = info->systemPrompt;
        req.reasoningEffort = info->reasoningEffort;
    }
    m_turnConversation = m_current;
    m_messages->beginStreaming();
    if (!m_engine->send(req)) {
        m_messages->endStreaming(nullptr);
        statusBar()->showMessage(tr("The engine is busy or not ready."), 4000);
    }
}

void MainWindow::onTurnFinished(const TurnReport &report)
{
    const qint64 conv = m_turnConversation;
    m_turnConversation = 0;
    if (!report.error.isEmpty())
        statusBar()->showMessage(tr("Generation failed: %1").arg(report.error), 10000);
    if (report.content.isEmpty() && report.reasoning.isEmpty()) {
        // Nothing generated (stopped at once, or an error before the first token).
        if (conv == m_current)
            m_messages->endStreaming(nullptr);
        return;
    }
    // Committed now: a crash after this point loses nothing of this reply.
    const StoredMessage stored = m_store.appendMessage(conv, QStringLiteral("assistant"),
                                                       report.content, report.reasoning,
                                                       report.toJson());
    if (stored.id == 0)
        spdlog::error("reply not saved: {}", m_store.lastError().toStdString());
    if (conv == m_current)
        m_messages->endStreaming(stored.id ? &stored : nullptr);
    reloadConversations();
}

void MainWindow::stopGeneration() { m_engine->stop(); }

void MainWindow::regenerate(int row)
{
    if (m_engine->busy() || row < 0 || row >= m_messages->rowCount() ||
        m_messages->at(row).role != QLatin1String("assistant"))
        return;
    m_store.truncate(m_current, row);
    m_messages->truncate(row);
    startTurn();
}

void MainWindow::editMessage(int row, const QString &newText)
{
    if (m_engine->busy() || row < 0 || row >= m_messages->rowCount() ||
        m_messages->at(row).role != QLatin1String("user"))
        return;
    QString text = newText;
    if (text.isEmpty()) {
        bool ok = false;
        text = QInputDialog::getMultiLineText(this, tr("Edit message"),
                                              tr("The conversation continues from the edited "
                                                 "message (later messages are replaced):"),
                                              m_messages->at(row).content, &ok);
        if (!ok || text.trimmed().isEmpty())
            return;
    }
    m_store.truncate(m_current, row);
    m_messages->truncate(row);
    const StoredMessage stored = m_store.appendMessage(m_current, QStringLiteral("user"), text.trimmed());
    if (stored.id == 0)
        return;
    m_messages->append(stored);
    startTurn();
}

bool MainWindow::exportConversation(const QString &path, bool json)
{
    if (m_current == 0)
        return false;
    const QByteArray bytes = json ? m_store.exportJson(m_current)
                                  : m_store.exportMarkdown(m_current).toUtf8();
    QSaveFile f(path);
    if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size() || !f.commit()) {
        QMessageBox::warning(this, tr("Export"), tr("Cannot write %1: %2").arg(path, f.errorString()));
        return false;
    }
    statusBar()->showMessage(tr("Exported to %1").arg(path), 4000);
    return true;
}

void MainWindow::updateEngineState()
{
    const EngineHost::State s = m_engine->state();
    QString text = m_engine->stateText();
    if (m_engine->busy())
        text = tr("Generating ... (Esc stops)");
    m_engineLabel->setText(text);
    m_busy->setVisible(s == EngineHost::State::loading || m_engine->busy());
    m_banner->setVisible(s == EngineHost::State::ready && m_engine->isDemo());
    const bool ready = s == EngineHost::State::ready;
    m_send->setEnabled(ready && !m_engine->busy());
    m_stop->setEnabled(m_engine->busy());
    m_effort->setEnabled(!m_engine->busy());
}

void MainWindow::updateServerState(bool running, const QString &url)
{
    m_serverLabel->setText(running ? tr("API: %1").arg(url) : tr("API: off"));
    m_serverButton->setText(running ? tr("Stop API") : tr("Start API"));
    m_serverAction->setText(running ? tr("Stop API server") : tr("Start API server"));
    m_copyUrl->setEnabled(running);
    m_copyUrlAction->setEnabled(running);
    m_copyUrlAction->setText(running ? tr("Copy %1").arg(url) : tr("Copy API URL"));
    // With a tray the controls live in its menu; without one, in the status bar.
    const bool inWindow = m_tray == nullptr;
    m_serverLabel->setVisible(inWindow || running);
    m_serverButton->setVisible(inWindow);
    m_copyUrl->setVisible(inWindow);
    if (m_tray)
        m_tray->setToolTip(running ? tr("Neural - API at %1").arg(url) : tr("Neural - API off"));
}

void MainWindow::toggleServer()
{
    if (m_server->isRunning()) {
        m_server->stop();
        return;
    }
    const quint16 port = static_cast<quint16>(
        appSettings()->value(QStringLiteral("server/port"), 8080).toInt());
    if (!m_server->start(port))
        QMessageBox::warning(this, tr("API server"), m_server->lastError());
}

void MainWindow::loadActiveProfile()
{
    if (m_options.demo && m_options.modelDir.isEmpty()) {
        m_engine->loadDemo(demoModelDir(), demoTokenizerPath());
        return;
    }
    const Profile &p = m_profiles.active();
    int threads = 0;
    LoadOptions o = p.toLoadOptions(&threads);
    const QString dir = !m_options.modelDir.isEmpty() ? m_options.modelDir : p.modelDir;
    if (!dir.isEmpty()) {
        if (!m_options.modelDir.isEmpty() && p.modelDir != m_options.modelDir) {
            o.store.clear();  // the profile's store belongs to its own model
        }
        m_engine->load(dir, o, threads);
        return;
    }
    if (QFileInfo::exists(demoModelDir() + QStringLiteral("/config.json")) || !m_options.askFirstRun) {
        m_engine->loadDemo(demoModelDir(), demoTokenizerPath());
        return;
    }
    QTimer::singleShot(0, this, &MainWindow::firstRun);
}

void MainWindow::onLoadFailed(const QString &error)
{
    // Window-modal but not blocking (open(), not exec()): the app keeps running meanwhile.
    auto *box = new QMessageBox(QMessageBox::Warning, tr("Model not loaded"),
                                tr("The model in %1 could not be loaded.").arg(m_engine->modelDir()),
                                QMessageBox::Close, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->setInformativeText(error);
    QPushButton *wizard = box->addButton(tr("Set up a model..."), QMessageBox::AcceptRole);
    QPushButton *demo = box->addButton(tr("Use the demo model"), QMessageBox::ActionRole);
    connect(box, &QMessageBox::buttonClicked, this, [this, wizard, demo](QAbstractButton *b) {
        if (b == wizard)
            openWizard();
        else if (b == demo)
            m_engine->loadDemo(demoModelDir(), demoTokenizerPath());
    });
    box->open();
}

void MainWindow::firstRun()
{
    QMessageBox box(this);
    box.setWindowTitle(tr("Welcome to Neural"));
    box.setText(tr("No model is set up yet."));
    box.setInformativeText(tr("Set up a gpt-oss checkpoint you downloaded, or try the app with "
                              "the built-in demo model (random weights: its replies are "
                              "nonsense)."));
    QPushButton *wizard = box.addButton(tr("Set up a model..."), QMessageBox::AcceptRole);
    box.addButton(tr("Use the demo model"), QMessageBox::RejectRole);
    box.exec();
    if (box.clickedButton() == wizard)
        openWizard();
    else
        m_engine->loadDemo(demoModelDir(), demoTokenizerPath());
}

void MainWindow::openWizard()
{
    auto *wizard = new SetupWizard(this);
    wizard->setAttribute(Qt::WA_DeleteOnClose);
    connect(wizard, &QWizard::accepted, this, [this, wizard] {
        const Profile p = wizard->profile();
        m_profiles.upsert(p);
        m_profiles.setActive(p.name);
        QString error;
        if (!m_profiles.save(m_options.profilesPath, &error))
            QMessageBox::warning(this, tr("Profiles"), error);
        m_options.modelDir.clear();
        loadActiveProfile();
    });
    wizard->open();
}

void MainWindow::openProfiles()
{
    auto *dialog = new ProfileDialog(&m_profiles, m_options.profilesPath, this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &ProfileDialog::applied, this, [this](const Profile &) {
        m_options.modelDir.clear();  // the profile's model from now on
        loadActiveProfile();
    });
    dialog->open();
}

void MainWindow::openBenchmark()
{
    if (m_benchmark) {
        m_benchmark->raise();
        m_benchmark->activateWindow();
        return;
    }
    auto *dialog = new BenchmarkDialog(&m_profiles, m_engine, this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    dialog->setModelOverride(m_options.modelDir);
    // After a run the chat engine comes back with the active profile (as after Apply).
    dialog->setReloadEngine([this] { loadActiveProfile(); });
    connect(dialog, &BenchmarkDialog::started, this, [this] {
        statusBar()->showMessage(tr("Benchmark running: the chat model is paused."), 5000);
    });
    m_benchmark = dialog;
    connect(dialog, &QObject::destroyed, this, [this] { m_benchmark = nullptr; });
    dialog->open();  // window-modal: no chat or profile change while it is open
}

void MainWindow::setTheme(const QString &name)
{
    appSettings()->setValue(QStringLiteral("ui/theme"), name);
    applyTheme(name);
}

}  // namespace neural::gui
