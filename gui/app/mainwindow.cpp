#include "app/mainwindow.h"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QCloseEvent>
#include <QComboBox>
#include <QDesktopServices>
#include <QDockWidget>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QMimeData>
#include <QFile>
#include <QFileDialog>
#include <QFontDatabase>
#include <QKeySequence>
#include <QScrollBar>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QInputDialog>
#include <QKeyEvent>
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
#include <QStandardItemModel>
#include <QStatusBar>
#include <QSystemTrayIcon>
#include <QTextDocument>
#include <QTimer>
#include <QToolButton>
#include <QUrl>
#include <QVBoxLayout>

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "common/dialogs.h"
#include "app/applog.h"
#include "app/discovery.h"
#include "app/guideviewer.h"
#include "app/modelcatalog.h"
#include "common/outputpath.h"
#include "common/paths.h"
#include "tool.h"
#include "app/theme.h"
#include "common/wheelguard.h"
#include "benchmark/benchmarkdialog.h"
#include "conversation/chatinput.h"
#include "conversation/assistants.h"
#include "conversation/chatview.h"
#include "conversation/contextmeter.h"
#include "conversation/settingspanel.h"
#include "settings/appsettingsdialog.h"
#include "tools/toolmanager.h"
#include "settings/profiledialog.h"
#include "monitor/telemetrydock.h"
#include "tray/servercontrol.h"
#include "wizard/setupwizard.h"
#include "neural/version.h"
#include "cpu/reference_model.h"
#include "cpu/store_moe.h"
#include "cpu/team/worker_team.h"
#include "runtime/model.h"
#include "runtime/options.h"

namespace neural::gui {

namespace {
QString titleFrom(const QString& text) {
    const QString t = ConversationModel::titleFromMessage(text);
    return t.isEmpty() ? QObject::tr("New conversation") : t;
}
}  // namespace

MainWindow::MainWindow(Options options, QWidget* parent)
    : QMainWindow(parent), m_options(std::move(options)) {
    installWheelGuard();
    if (m_options.dbPath.isEmpty()) m_options.dbPath = conversationsPath();
    if (m_options.profilesPath.isEmpty()) m_options.profilesPath = profilesPath();

    m_engine = new EngineHost(this);
    m_server = new ServerControl(m_engine, this);
    m_conversations = new ConversationModel(this);
    m_messages = new MessageModel(this);
    m_tools = new ToolManager(this);
    m_tools->applySettings(ToolSettings::load());  // starts the MCP servers

    setWindowTitle(tr("Neural"));
    setWindowIcon(QIcon(QStringLiteral(":/neural/neural.ico")));
    resize(1180, 780);
    buildUi();
    buildMenus();
    setTextZoom(appSettings()->value(settingsKey::textZoom, 0).toInt());
    buildTray();

    if (!m_store.open(m_options.dbPath)) {
        // Keep working in memory so nothing blocks chatting; say clearly that it is not saved.
        const QString why = m_store.lastError();
        spdlog::error("conversations: {}", why.toStdString());
        QTimer::singleShot(0, this, [this, why] {
            showWarning(this, tr("Conversations"),
                        tr("%1\n\nConversations of this session are kept in memory "
                           "only.")
                            .arg(why));
        });
        m_store.open(QStringLiteral(":memory:"));
    }
    QString profileError;
    if (!m_profiles.load(m_options.profilesPath, &profileError))
        spdlog::warn("{}", profileError.toStdString());

    connect(m_engine, &EngineHost::stateChanged, this, &MainWindow::updateEngineState);
    connect(m_engine, &EngineHost::busyChanged, this, &MainWindow::updateEngineState);
    connect(m_engine, &EngineHost::loadProgress, this, &MainWindow::updateEngineState);
    connect(m_engine, &EngineHost::ready, this, [this] {
        m_telemetry->setModel(m_engine->model());
        if (!m_engine->isDemo()) {
            noteRecentModel(
                {m_engine->modelDir(), QString::fromStdString(m_loadOptions.store.string())});
            fillModelSwitcher();
        }
    });
    connect(m_engine, &EngineHost::turnDelta, this, &MainWindow::onTurnDelta);
    // A reply queued behind API requests says so (and how many) instead of only waiting.
    connect(m_engine, &EngineHost::queuePositionChanged, this, [this](int ahead) {
        if (m_current == m_turnConversation) m_messages->setQueuedAhead(ahead);
    });
    connect(m_engine, &EngineHost::turnFinished, this, &MainWindow::onTurnFinished);
    connect(m_engine, &EngineHost::loadFailed, this, &MainWindow::onLoadFailed);
    connect(m_server, &ServerControl::runningChanged, this, &MainWindow::updateServerState);
    connect(m_server, &ServerControl::failed, this,
            [this](const QString& e) { statusBar()->showMessage(e, 10000); });

    fillModelSwitcher();
    reloadConversations();
    restoreWindowState();
    updateEngineState();
    updateServerState(false, {});
    loadActiveProfile();
    m_input->setFocus();
}

MainWindow::~MainWindow() {
    saveWindowState();
    m_server->stop();
    // The engine host is a child, destroyed after this body while the widgets are half gone:
    // a reply still streaming is cancelled then, and its turnFinished must not reach this window.
    disconnect(m_engine, nullptr, this, nullptr);
    disconnect(&m_engine->batcher(), nullptr, this, nullptr);
    delete m_engine;
    m_engine = nullptr;
}

void MainWindow::fillModelSwitcher() {
    const QSignalBlocker block(m_modelSwitch);
    m_modelSwitch->clear();
    auto add = [this](const QString& text, const QString& kind, const QString& data,
                      const QString& store, const QString& tip) {
        m_modelSwitch->addItem(text, data);
        const int i = m_modelSwitch->count() - 1;
        m_modelSwitch->setItemData(i, kind, kSwitchKindRole);
        m_modelSwitch->setItemData(i, store, kSwitchStoreRole);
        m_modelSwitch->setItemData(i, tip, Qt::ToolTipRole);
    };
    QStringList profileDirs;
    for (const Profile& p : m_profiles.profiles()) {
        const QString model =
            p.modelDir.isEmpty() ? tr("demo model") : QFileInfo(p.modelDir).fileName();
        add(tr("%1 (%2)").arg(p.name, model), QStringLiteral("profile"), p.name, {},
            tr("Profile %1: %2").arg(p.name, p.modelDir.isEmpty() ? model : p.modelDir));
        if (!p.modelDir.isEmpty()) profileDirs << p.modelDir;
    }
    // Recent first, then what the models folders (and the profiles' folders) hold.
    const QList<ModelEntry> recent = recentModels();
    QList<ModelEntry> found = findModels(modelFolders() + profileDirs);
    found.removeIf([&](const ModelEntry& e) { return recent.contains(e); });
    auto addModels = [&](const QList<ModelEntry>& list, const QString& prefix) {
        if (list.isEmpty()) return;
        m_modelSwitch->insertSeparator(m_modelSwitch->count());
        for (const ModelEntry& e : list)
            add(prefix.arg(e.label()), QStringLiteral("model"), e.model, e.store,
                e.store.isEmpty() ? e.model : tr("%1\nexperts from %2").arg(e.model, e.store));
    };
    addModels(recent, tr("Recent: %1"));
    addModels(found, QStringLiteral("%1"));
    // The gpt-oss models other apps keep (app/discovery.h), used where they lie; those that
    // cannot be used are listed too, disabled, with the reason.
    QList<FoundModel> elsewhere = discoverModels(m_discoveryRoots);
    elsewhere.removeIf([&](const FoundModel& f) {
        return f.usable() &&
               (recent.contains(ModelEntry{f.path, {}}) || found.contains(ModelEntry{f.path, {}}));
    });
    if (!elsewhere.isEmpty()) m_modelSwitch->insertSeparator(m_modelSwitch->count());
    for (const FoundModel& f : elsewhere) {
        add(tr("%1 (%2)").arg(f.name, f.source), QStringLiteral("model"), f.path, {},
            f.description());
        if (!f.usable()) {
            auto* model = qobject_cast<QStandardItemModel*>(m_modelSwitch->model());
            if (QStandardItem* item = model ? model->item(m_modelSwitch->count() - 1) : nullptr)
                item->setEnabled(false);
        }
    }
    m_modelSwitch->insertSeparator(m_modelSwitch->count());
    add(tr("Demo model"), QStringLiteral("demo"), QString(), {},
        tr("The built-in demo model (random weights)"));
    m_modelSwitch->insertSeparator(m_modelSwitch->count());
    add(tr("Unload the model"), QStringLiteral("unload"), QStringLiteral("-"), {},
        tr("Frees the RAM and VRAM the model holds (the API server stops with it); choose a "
           "model to load one again"));
    const bool profileModel = !m_options.demo && m_options.modelDir.isEmpty();
    // Shown while none of the entries runs (--model, --demo).
    m_modelSwitch->setPlaceholderText(
        m_options.demo ? tr("Demo model (--demo)")
                       : tr("%1 (--model)").arg(QFileInfo(m_options.modelDir).fileName()));
    int current = -1;
    if (m_engine->state() == EngineHost::State::empty && m_unloaded) {
        m_modelSwitch->setPlaceholderText(tr("No model loaded"));
    } else if (m_options.demo && m_options.modelDir.isEmpty()) {
        for (int i = 0; i < m_modelSwitch->count(); ++i)
            if (m_modelSwitch->itemData(i, kSwitchKindRole).toString() == QLatin1String("demo"))
                current = i;
    } else if (profileModel) {
        current = m_modelSwitch->findData(m_profiles.activeName());
    } else if (!m_options.demo) {
        // A model chosen here (or --model): its row, when listed.
        const ModelEntry running{
            m_options.modelDir,
            m_modelStore.value_or(QString::fromStdString(m_loadOptions.store.string()))};
        for (int i = 0; i < m_modelSwitch->count(); ++i) {
            if (m_modelSwitch->itemData(i, kSwitchKindRole).toString() != QLatin1String("model"))
                continue;
            const ModelEntry e{m_modelSwitch->itemData(i).toString(),
                               m_modelSwitch->itemData(i, kSwitchStoreRole).toString()};
            if (e == running) {
                current = i;
                break;
            }
        }
    }
    m_modelSwitch->setCurrentIndex(current);
}

void MainWindow::loadModel(const QString& model, const QString& store) {
    m_options.modelDir = model;
    m_options.demo = false;
    m_modelStore = store;
    loadActiveProfile();
    fillModelSwitcher();
}

void MainWindow::saveWindowState() {
    auto s = appSettings();
    s->setValue(QStringLiteral("window/geometry"), saveGeometry());
    s->setValue(QStringLiteral("window/state"), saveState());
    s->setValue(QStringLiteral("window/splitter"), m_split->saveState());
    s->setValue(QStringLiteral("chat/openConversation"), m_current);
    s->setValue(QStringLiteral("chat/scroll"), m_chat->verticalScrollBar()->value());
    s->setValue(QStringLiteral("server/running"), m_server->isRunning());
}

void MainWindow::restoreWindowState() {
    auto s = appSettings();
    const QByteArray geometry = s->value(QStringLiteral("window/geometry")).toByteArray();
    if (!geometry.isEmpty()) restoreGeometry(geometry);
    restoreState(s->value(QStringLiteral("window/state")).toByteArray());
    m_split->restoreState(s->value(QStringLiteral("window/splitter")).toByteArray());
    const qint64 open = s->value(QStringLiteral("chat/openConversation"), 0).toLongLong();
    if (open > 0 && m_conversations->rowOf(open) >= 0) {
        selectConversation(open);
        // The messages are laid out after the window shows: the position is applied once the
        // scroll range covers it (or the user scrolls first).
        m_pendingScroll = s->value(QStringLiteral("chat/scroll"), -1).toInt();
    } else if (m_conversations->rowCount() > 0) {
        selectConversation(m_conversations->at(0).id);
    } else {
        m_panel->applyAssistant(defaultAssistant());  // the first conversation's draft
    }
    QScrollBar* bar = m_chat->verticalScrollBar();
    connect(bar, &QScrollBar::rangeChanged, this, [this, bar](int, int max) {
        if (m_pendingScroll >= 0 && max >= m_pendingScroll)
            bar->setValue(std::exchange(m_pendingScroll, -1));
    });
    connect(bar, &QScrollBar::actionTriggered, this, [this] { m_pendingScroll = -1; });
    // The API server comes back with the model when it ran at the last exit, or when the
    // Settings page says to start it at launch.
    if (s->value(QStringLiteral("server/running"), false).toBool() ||
        s->value(settingsKey::startAtLaunch, false).toBool()) {
        auto once = std::make_shared<QMetaObject::Connection>();
        *once = connect(m_engine, &EngineHost::ready, this, [this, once] {
            QObject::disconnect(*once);
            if (!m_server->isRunning()) toggleServer();
        });
    }
}

void MainWindow::buildUi() {
    auto* split = new QSplitter(this);
    m_split = split;
    split->setObjectName(QStringLiteral("mainSplitter"));
    split->setChildrenCollapsible(false);

    // Left: search, list, new.
    auto* left = new QWidget(split);
    auto* lv = new QVBoxLayout(left);
    m_search = new QLineEdit(left);
    m_search->setPlaceholderText(tr("Search conversations"));
    m_search->setAccessibleName(tr("Search conversations"));
    m_search->setClearButtonEnabled(true);
    m_list = new QListView(left);
    m_list->setModel(m_conversations);
    m_list->setAccessibleName(tr("Conversations"));
    m_list->setContextMenuPolicy(Qt::CustomContextMenu);
    m_list->setEditTriggers(QAbstractItemView::NoEditTriggers);
    // One line of title (elided) and the date per row; never wider than the list.
    m_list->setItemDelegate(new ConversationDelegate(m_list));
    m_list->setTextElideMode(Qt::ElideRight);
    m_list->setWordWrap(false);
    m_list->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
    m_list->setUniformItemSizes(true);
    auto* del = new QShortcut(QKeySequence::Delete, m_list);
    del->setContext(Qt::WidgetShortcut);
    connect(del, &QShortcut::activated, this, [this] {
        const QModelIndex i = m_list->currentIndex();
        if (i.isValid()) deleteConversation(m_conversations->at(i.row()).id);
    });
    auto* newButton = new QPushButton(tr("New conversation"), left);
    newButton->setAccessibleName(tr("New conversation"));
    newButton->setToolTip(tr("New conversation (Ctrl+N)"));
    lv->addWidget(m_search);
    lv->addWidget(m_list, 1);
    lv->addWidget(newButton);
    connect(m_search, &QLineEdit::textChanged, this, &MainWindow::reloadConversations);
    connect(newButton, &QPushButton::clicked, this, &MainWindow::newConversation);
    connect(m_list, &QListView::clicked, this,
            [this](const QModelIndex& i) { selectConversation(m_conversations->at(i.row()).id); });
    connect(m_list, &QListView::activated, this,
            [this](const QModelIndex& i) { selectConversation(m_conversations->at(i.row()).id); });
    connect(m_list, &QListView::customContextMenuRequested, this, [this](const QPoint& pos) {
        const QModelIndex i = m_list->indexAt(pos);
        if (!i.isValid()) return;
        const ConversationInfo c = m_conversations->at(i.row());
        QMenu menu(this);
        menu.addAction(tr("Rename..."), this, [this, c] {
            bool ok = false;
            const QString t = QInputDialog::getText(this, tr("Rename"), tr("Title:"),
                                                    QLineEdit::Normal, c.title, &ok)
                                  .trimmed();
            if (ok && !t.isEmpty() && m_store.renameConversation(c.id, t)) reloadConversations();
        });
        QAction* del = menu.addAction(tr("Delete"), this, [this, c] { deleteConversation(c.id); });
        del->setShortcut(QKeySequence::Delete);
        del->setEnabled(!(m_engine->busy() && c.id == m_turnConversation));
        menu.exec(m_list->viewport()->mapToGlobal(pos));
    });

    // Right: banner, chat, settings row, input.
    auto* right = new QWidget(split);
    auto* rv = new QVBoxLayout(right);
    m_banner = new QLabel(right);
    m_banner->setWordWrap(true);
    m_banner->setText(
        tr("<b>Demo model:</b> its weights are random, so its replies are "
           "nonsense. It shows how the app works; use <i>File &gt; Set up a "
           "model</i> for a real gpt-oss checkpoint."));
    m_banner->setStyleSheet(
        QStringLiteral("QLabel { background: #fff3cd; color: #664d03; border: 1px solid #ffe69c; "
                       "border-radius: 4px; padding: 6px; }"));
    m_banner->setAccessibleName(tr("Demo model notice"));
    m_banner->hide();
    m_chat = new ChatView(m_messages, right);
    auto* inputRow = new QHBoxLayout;
    m_input = new ChatInput(right);
    m_send = new QPushButton(tr("Send"), right);
    m_send->setAccessibleName(tr("Send message"));
    m_send->setToolTip(tr("Send (Enter or Ctrl+Enter; Shift+Enter: a new line)"));
    m_stop = new QPushButton(tr("Stop"), right);
    m_stop->setAccessibleName(tr("Stop generating"));
    m_stop->setToolTip(tr("Stop (Esc)"));
    m_attach = new QPushButton(tr("Attach..."), right);
    m_attach->setAccessibleName(tr("Attach text files"));
    m_attach->setToolTip(attachments::buttonToolTip());
    auto* buttons = new QVBoxLayout;
    buttons->addWidget(m_send);
    buttons->addWidget(m_stop);
    buttons->addWidget(m_attach);
    buildToolsUi(right);
    buttons->addWidget(m_toolsButton);
    // The files attached to the message being written, as chips (click one to remove it).
    m_chips = new QWidget(right);
    auto* chipRow = new QHBoxLayout(m_chips);
    chipRow->setContentsMargins(0, 0, 0, 0);
    chipRow->addStretch(1);
    m_chips->hide();
    m_attachNote = new QLabel(right);
    m_attachNote->setWordWrap(true);
    m_attachNote->setAccessibleName(tr("Attachment problems"));
    m_attachNote->hide();
    inputRow->addWidget(m_input, 1);
    inputRow->addLayout(buttons);
    m_meter = new ContextMeter(
        m_engine, [this] { return turnRequest(true); }, right);
    rv->addWidget(m_banner);
    rv->addWidget(m_chat, 1);
    // "Deleted. Undo" under the messages for kUndoMs after a message is deleted.
    m_undoBar = new QWidget(right);
    auto* undoRow = new QHBoxLayout(m_undoBar);
    undoRow->setContentsMargins(0, 0, 0, 0);
    m_undoLabel = new QLabel(m_undoBar);
    m_undo = new QPushButton(tr("Undo"), m_undoBar);
    m_undo->setAccessibleName(tr("Undo the deletion"));
    m_undo->setToolTip(tr("Put the deleted message back"));
    undoRow->addWidget(m_undoLabel);
    undoRow->addWidget(m_undo);
    undoRow->addStretch(1);
    m_undoBar->hide();
    m_undoTimer = new QTimer(this);
    m_undoTimer->setSingleShot(true);
    // The bar goes after a while; Ctrl+Z still takes the deletions back.
    connect(m_undoTimer, &QTimer::timeout, m_undoBar, &QWidget::hide);
    connect(m_undo, &QPushButton::clicked, this, [this] { undoDelete(); });
    rv->addWidget(m_undoBar);
    rv->addWidget(m_chips);
    rv->addWidget(m_attachNote);
    rv->addLayout(inputRow);
    rv->addWidget(m_meter);
    setAcceptDrops(true);
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
    connect(m_chat, &ChatView::editSubmitted, this, &MainWindow::editMessage);
    connect(m_chat, &ChatView::deleteRequested, this, &MainWindow::deleteMessage);
    connect(m_chat, &ChatView::versionRequested, this, &MainWindow::showVersion);
    connect(m_chat, &ChatView::continueRequested, this, &MainWindow::continueReply);
    connect(m_chat, &ChatView::branchRequested, this, &MainWindow::branchFrom);
    connect(m_chat, &ChatView::toolActionRequested, this, &MainWindow::toolAction);
    // The meter counts again as the message is typed (debounced) and as the conversation changes.
    connect(m_input, &QPlainTextEdit::textChanged, m_meter, &ContextMeter::schedule);
    connect(m_input, &ChatInput::filesDropped, this, &MainWindow::attachFiles);
    connect(m_attach, &QPushButton::clicked, this, [this] {
        const QStringList files = QFileDialog::getOpenFileNames(this, tr("Attach files"), QString(),
                                                                attachments::fileDialogFilter());
        if (!files.isEmpty()) attachFiles(files);
    });
    connect(m_messages, &QAbstractItemModel::rowsInserted, m_meter, &ContextMeter::schedule);
    connect(m_messages, &QAbstractItemModel::rowsRemoved, m_meter, &ContextMeter::schedule);
    connect(m_messages, &QAbstractItemModel::modelReset, m_meter, &ContextMeter::schedule);
    connect(m_meter, &ContextMeter::newConversationRequested, this, &MainWindow::newConversation);
    connect(m_meter, &ContextMeter::branchRequested, this, [this] {
        // Which message to branch from: a menu of the conversation's messages.
        auto* menu = new QMenu(this);
        menu->setAttribute(Qt::WA_DeleteOnClose);
        for (int row = 0; row < m_messages->rowCount(); ++row) {
            const ChatMessage& m = m_messages->at(row);
            if (m.id == 0) continue;
            const QString who = m.role == QLatin1String("user") ? tr("You") : tr("Assistant");
            menu->addAction(tr("Through message %1 (%2: %3)")
                                .arg(row + 1)
                                .arg(who, m.content.simplified().left(50)),
                            this, [this, row] { branchFrom(row); });
        }
        if (menu->isEmpty()) {
            delete menu;
            return;
        }
        menu->popup(QCursor::pos());
    });
    // The conversation settings panel, a dock beside the chat.
    m_panelDock = new QDockWidget(tr("Conversation settings"), this);
    m_panelDock->setObjectName(QStringLiteral("conversationSettingsDock"));
    m_panel = new SettingsPanel(m_panelDock);
    m_panel->setDefaultMaxTokens(appSettings()->value(settingsKey::maxTokens, 2048).toInt());
    m_panelDock->setWidget(m_panel);
    addDockWidget(Qt::RightDockWidgetArea, m_panelDock);
    connect(m_panel, &SettingsPanel::settingsChanged, this, &MainWindow::onSettingsPanelChanged);

    // Docks.
    m_telemetry = new TelemetryDock(this);
    addDockWidget(Qt::RightDockWidgetArea, m_telemetry);
    m_telemetry->hide();
    auto* logDock = new QDockWidget(tr("Logs"), this);
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
    // A long state (a warning) is cut at the window's edge, never squeezing the model switcher;
    // the tooltip holds all of it.
    m_engineLabel->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_engineLabel->setMinimumWidth(80);
    m_busy = new QProgressBar(this);
    m_busy->setRange(0, 0);
    m_busy->setMaximumWidth(120);
    m_busy->setAccessibleName(tr("Progress"));
    m_busy->hide();
    m_modelSwitch = new QComboBox(this);
    m_modelSwitch->setAccessibleName(tr("Model"));
    m_modelSwitch->setToolTip(
        tr("Switch the model: the profiles (Settings > Profiles), the checkpoints and expert "
           "stores in the models folders, the recent models and the demo model"));
    m_modelSwitch->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    statusBar()->addWidget(m_modelSwitch);
    statusBar()->addWidget(m_engineLabel, 1);
    connect(m_modelSwitch, &QComboBox::activated, this, [this](int index) {
        const QString kind = m_modelSwitch->itemData(index, kSwitchKindRole).toString();
        const QString name = m_modelSwitch->itemData(index).toString();
        m_unloaded = false;
        if (kind == QLatin1String("demo")) {
            useDemoModel();
            return;
        }
        if (kind == QLatin1String("unload")) {
            unloadModel();
            return;
        }
        if (kind == QLatin1String("model")) {
            loadModel(name, m_modelSwitch->itemData(index, kSwitchStoreRole).toString());
            return;
        }
        if (kind != QLatin1String("profile")) return;
        if (name == m_profiles.activeName() && m_options.modelDir.isEmpty() && !m_options.demo &&
            m_engine->state() == EngineHost::State::ready)
            return;
        m_profiles.setActive(name);
        QString error;
        if (!m_profiles.save(m_options.profilesPath, &error)) statusBar()->showMessage(error, 6000);
        m_options.modelDir.clear();  // the profile's model from now on
        m_options.demo = false;
        m_modelStore.reset();
        loadActiveProfile();
    });
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

    // Keys: Enter / Shift+Enter live in ChatInput, the rest in the menus (buildMenus).
}

void MainWindow::buildMenus() {
    QMenu* file = menuBar()->addMenu(tr("&File"));
    QAction* newAct = file->addAction(tr("&New conversation"), this, &MainWindow::newConversation);
    newAct->setShortcut(QKeySequence::New);
    file->addAction(tr("Export as &Markdown..."), this, [this] {
        const QString p = QFileDialog::getSaveFileName(
            this, tr("Export"), QStringLiteral("conversation.md"), tr("Markdown (*.md)"));
        if (!p.isEmpty()) exportConversation(p, false);
    });
    file->addAction(tr("Export as &JSON..."), this, [this] {
        const QString p = QFileDialog::getSaveFileName(
            this, tr("Export"), QStringLiteral("conversation.json"), tr("JSON (*.json)"));
        if (!p.isEmpty()) exportConversation(p, true);
    });
    file->addSeparator();
    file->addAction(tr("&Set up a model..."), this, &MainWindow::openWizard);
    file->addAction(tr("Use the &demo model"), this, &MainWindow::useDemoModel);
    file->addSeparator();
    QAction* quit = file->addAction(tr("&Quit"), this, &MainWindow::quitApplication);
    // QKeySequence::Quit is empty on Windows: Ctrl+Q everywhere (Cmd+Q on macOS).
    quit->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Q));
    quit->setShortcutContext(Qt::ApplicationShortcut);

    // Edit: Ctrl+Z takes deletions back, newest first (in the message box only once the box has
    // no typing of its own to undo: see the event filter).
    QMenu* edit = menuBar()->addMenu(tr("&Edit"));
    m_undoAction = edit->addAction(tr("&Undo delete"), this, [this] { undoDelete(); });
    m_undoAction->setShortcut(QKeySequence::Undo);
    m_undoAction->setEnabled(false);
    m_input->installEventFilter(this);

    // Chat: every action on the conversation, with its key (docs/DESKTOP.md "Keyboard").
    QMenu* chat = menuBar()->addMenu(tr("&Chat"));
    QAction* sendAct = chat->addAction(tr("&Send message"), this, &MainWindow::sendMessage);
    // Only in the message box (Enter sends there too): an edited message's own box sends with
    // Ctrl+Enter as well.
    sendAct->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_Return));
    sendAct->setShortcutContext(Qt::WidgetShortcut);
    m_input->addAction(sendAct);
    QAction* stopAct = chat->addAction(tr("S&top generating"), this, &MainWindow::stopGeneration);
    stopAct->setShortcut(QKeySequence(Qt::Key_Escape));
    stopAct->setShortcutContext(Qt::WindowShortcut);
    chat->addSeparator();
    QAction* regenAct =
        chat->addAction(tr("&Regenerate the last reply"), this, &MainWindow::regenerateLast);
    regenAct->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_R));
    QAction* copyAct =
        chat->addAction(tr("&Copy the last reply"), this, &MainWindow::copyLastReply);
    copyAct->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_C));
    QAction* editAct =
        chat->addAction(tr("&Edit your last message"), this, &MainWindow::editLastMessage);
    // Not Ctrl+E: that is "end of line" in text fields on Linux desktops.
    editAct->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_E));
    QAction* deleteAct =
        chat->addAction(tr("&Delete the last message"), this, &MainWindow::deleteLastMessage);
    deleteAct->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_Backspace));
    chat->addAction(tr("C&ontinue the cut reply"), this,
                    [this] { continueReply(m_messages->rowCount() - 1); });
    chat->addAction(tr("&Branch from the last message"), this,
                    [this] { branchFrom(m_messages->rowCount() - 1); });
    chat->addSeparator();
    QAction* focusAct =
        chat->addAction(tr("Go to the &message box"), this, [this] { m_input->setFocus(); });
    focusAct->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_L));
    QAction* searchAct =
        chat->addAction(tr("Search conversations"), this, [this] { m_search->setFocus(); });
    searchAct->setShortcut(QKeySequence::Find);

    QMenu* settings = menuBar()->addMenu(tr("&Settings"));
    QAction* appSettingsAct =
        settings->addAction(tr("&Settings..."), this, &MainWindow::openSettings);
    settings->addAction(tr("&Tools..."), this, &MainWindow::openToolSettings);
    // Ctrl+, everywhere (QKeySequence::Preferences is empty on Windows and most Linux desktops).
    QList<QKeySequence> prefs{QKeySequence(Qt::CTRL | Qt::Key_Comma)};
    for (const QKeySequence& k : QKeySequence::keyBindings(QKeySequence::Preferences))
        if (!prefs.contains(k)) prefs << k;
    appSettingsAct->setShortcuts(prefs);
    settings->addAction(tr("&Profiles (engine settings)..."), this, &MainWindow::openProfiles);

    QMenu* tools = menuBar()->addMenu(tr("&Tools"));
    tools->addAction(tr("&Benchmark (A/B profiles)..."), this, &MainWindow::openBenchmark);

    QMenu* server = menuBar()->addMenu(tr("Se&rver"));
    m_serverAction = server->addAction(tr("Start API server"), this, &MainWindow::toggleServer);
    m_copyUrlAction = server->addAction(
        tr("Copy API URL"), this, [this] { QApplication::clipboard()->setText(m_server->url()); });

    QMenu* view = menuBar()->addMenu(tr("&View"));
    QAction* listAct = view->addAction(tr("Conversation &list"));
    listAct->setCheckable(true);
    listAct->setChecked(true);
    listAct->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_B));
    QWidget* listPane = m_split->widget(0);
    connect(listAct, &QAction::toggled, listPane, &QWidget::setVisible);
    QAction* panelAct = m_panelDock->toggleViewAction();
    panelAct->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_S));
    view->addAction(panelAct);
    QAction* telemetryAct = m_telemetry->toggleViewAction();
    telemetryAct->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_T));
    view->addAction(telemetryAct);
    for (QDockWidget* d : findChildren<QDockWidget*>()) {
        if (d == m_telemetry || d == m_panelDock) continue;
        QAction* a = d->toggleViewAction();
        if (d->objectName() == QLatin1String("logsDock"))
            a->setShortcut(QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_L));
        view->addAction(a);
    }
    // Text zoom of the conversation and the message box (kept in the settings).
    view->addSeparator();
    // Ctrl+= too (no Shift needed for "+" on most layouts); the platform's zoom keys once each
    // (a key listed twice on one action is ambiguous and does nothing).
    const auto keys = [](std::initializer_list<QKeySequence> own, QKeySequence::StandardKey std) {
        QList<QKeySequence> out(own);
        for (const QKeySequence& k : QKeySequence::keyBindings(std))
            if (!out.contains(k)) out << k;
        return out;
    };
    QAction* zoomIn = view->addAction(tr("Zoom &in"), this, [this] { setTextZoom(m_zoom + 1); });
    zoomIn->setShortcuts(
        keys({QKeySequence(Qt::CTRL | Qt::Key_Equal), QKeySequence(Qt::CTRL | Qt::Key_Plus)},
             QKeySequence::ZoomIn));
    QAction* zoomOut = view->addAction(tr("Zoom &out"), this, [this] { setTextZoom(m_zoom - 1); });
    zoomOut->setShortcuts(keys({QKeySequence(Qt::CTRL | Qt::Key_Minus)}, QKeySequence::ZoomOut));
    QAction* zoomReset = view->addAction(tr("&Reset zoom"), this, [this] { setTextZoom(0); });
    zoomReset->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_0));
    view->addSeparator();
    view->addAction(tr("Open the log folder"), this,
                    [] { QDesktopServices::openUrl(QUrl::fromLocalFile(logDir())); });

    QMenu* help = menuBar()->addMenu(tr("&Help"));
    QAction* guide = help->addAction(tr("&User guide"), this, &MainWindow::openGuide);
    guide->setShortcut(QKeySequence::HelpContents);
    help->addAction(tr("&About Neural"), this,
                    [this] { QMessageBox::about(this, tr("About Neural"), aboutText()); });
}

QString MainWindow::aboutText() const {
#ifdef NDEBUG
    const QString buildType = tr("release");
#else
    const QString buildType = tr("debug");
#endif
#ifdef NEURAL_GUI_HAVE_CUDA
    const QString cuda = tr("with the CUDA backend");
#else
    const QString cuda = tr("CPU only (built without CUDA)");
#endif
    QString backend = tr("no model loaded");
    if (m_engine->model()) backend = QString::fromStdString(m_engine->model()->describe_backend());
    return tr("<h3>Neural %1</h3><p>Runs gpt-oss on this PC: the dense core and a pool of expert "
              "slots on the GPU, the other experts on the CPU.</p>"
              "<p>Build: %2, %3, Qt %4.<br>Backend: %5</p>")
        .arg(QStringLiteral(NEURAL_VERSION), buildType, cuda, QString::fromLatin1(qVersion()),
             backend.toHtmlEscaped());
}

void MainWindow::buildTray() {
    if (!m_options.useTray || !QSystemTrayIcon::isSystemTrayAvailable()) return;
    m_tray = new QSystemTrayIcon(windowIcon(), this);
    m_tray->setToolTip(tr("Neural"));
    auto* menu = new QMenu(this);
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

void MainWindow::quitApplication() {
    // close() alone does not end the app when the window is already hidden in the tray (the
    // last *visible* window closing is what quits), so the event loop is ended explicitly.
    m_quitting = true;
    close();
    m_engine->stop();
    QCoreApplication::quit();
}

void MainWindow::closeEvent(QCloseEvent* event) {
    const bool keep = appSettings()->value(QStringLiteral("server/keepInTray"), true).toBool();
    if (!m_quitting && m_tray && m_server->isRunning() && keep) {
        hide();
        m_tray->showMessage(tr("Neural"),
                            tr("The API server keeps running at %1.").arg(m_server->url()));
        event->ignore();
        return;
    }
    saveWindowState();
    m_engine->stop();
    event->accept();
}

void MainWindow::reloadConversations() {
    m_conversations->setConversations(
        m_store.conversations(m_search ? m_search->text() : QString()));
    const int row = m_conversations->rowOf(m_current);
    if (row >= 0) m_list->setCurrentIndex(m_conversations->index(row));
}

void MainWindow::selectConversation(qint64 id) {
    if (id == m_current && m_messages->rowCount() > 0) return;
    const auto info = m_store.conversation(id);
    if (!info) return;
    m_current = id;
    m_pendingScroll = -1;
    QList<StoredMessage> stored = m_store.messages(id);
    // A reply being continued is stored as it was cut until its continuation ends: the
    // streaming row shows it.
    if (m_continued && m_engine->busy() && id == m_turnConversation && !stored.isEmpty() &&
        stored.last().id == m_continued->id)
        stored.removeLast();
    // So is a reply being regenerated with the messages after it: the streaming row is the new
    // reply.
    if (m_regenerated != 0 && m_engine->busy() && id == m_turnConversation) {
        for (int i = 0; i < stored.size(); ++i)
            if (stored.at(i).id == m_regenerated) {
                stored = stored.mid(0, i);
                break;
            }
    }
    m_messages->setMessages(stored);
    if (m_engine->busy() && id == m_turnConversation) {
        // Back to the conversation a reply streams into (in the background meanwhile): what
        // arrived so far, then the rest as it comes.
        m_messages->beginStreaming();
        m_messages->setQueuedAhead(m_engine->jobsAhead());
        if (!m_streamReasoning.isEmpty() || !m_streamContent.isEmpty())
            m_messages->appendDelta(m_streamReasoning, m_streamContent);
    }
    m_panel->flush();  // a prompt still being typed belongs to the conversation left
    m_panel->setSettings({info->systemPrompt, info->reasoningEffort, info->sampling});
    m_convTools = ConversationTools::fromJson(info->tools);
    if (m_toolCall && id == m_toolConversation) {
        // Back to the conversation whose tool call runs: its card shows it running.
        if (const int r = rowOfMessage(m_toolMessage); r >= 0) showToolRunning(r);
    }
    const int row = m_conversations->rowOf(id);
    if (row >= 0) m_list->setCurrentIndex(m_conversations->index(row));
}

void MainWindow::newConversation() {
    // A draft: stored with its first message, so an untouched New leaves no empty row.
    m_current = 0;
    m_pendingScroll = -1;
    m_panel->flush();
    m_messages->setMessages({});
    m_convTools = {};  // the defaults: the servers on, python and browser off
    // The default assistant's settings (Settings page); without one, the sampling settings and
    // the reasoning effort carry over and the system prompt does not.
    m_panel->fillAssistants();
    if (!m_panel->applyAssistant(defaultAssistant())) {
        ConversationSettings draft = m_panel->settings();
        draft.systemPrompt.clear();
        m_panel->setSettings(draft);
    }
    m_list->clearSelection();
    m_list->setCurrentIndex({});
    m_input->setFocus();
}

void MainWindow::deleteConversation(qint64 id) {
    const auto info = m_store.conversation(id);
    if (!info) return;
    if (m_engine->busy() && id == m_turnConversation) {
        statusBar()->showMessage(tr("A reply is being written into this conversation; stop it "
                                    "first."),
                                 4000);
        return;
    }
    if (askQuestion(this, tr("Delete conversation"),
                    tr("Delete \"%1\" and all its messages?").arg(info->title)) != QMessageBox::Yes)
        return;
    if (m_toolCall && id == m_toolConversation) {
        statusBar()->showMessage(tr("A tool runs for this conversation; cancel it first."), 4000);
        return;
    }
    if (!m_store.deleteConversation(id)) {
        showWarning(this, tr("Conversations"), m_store.lastError());
        return;
    }
    forgetDeletions(id);
    m_tools->dropBuiltins(id);
    if (id == m_current) {
        m_current = 0;
        m_messages->setMessages({});
    }
    reloadConversations();
}

void MainWindow::refreshListRow(qint64 id) {
    // In place: the order is the one of the last reload, so rows stay under the mouse.
    if (const auto info = m_store.conversation(id); !info || !m_conversations->updateInPlace(*info))
        reloadConversations();
}

void MainWindow::onTurnDelta(const QString& reasoning, const QString& content) {
    m_streamReasoning += reasoning;
    m_streamContent += content;
    if (m_current == m_turnConversation)
        m_messages->appendDelta(reasoning, content, m_engine->batcher().releasedPieces());
}

void MainWindow::onSettingsPanelChanged() {
    // A New conversation keeps them in the panel until its first message stores it.
    if (m_current == 0) return;
    const ConversationSettings c = m_panel->settings();
    if (!m_store.setConversationSettings(m_current, c.systemPrompt, c.reasoningEffort) ||
        !m_store.setConversationSampling(m_current, c.sampling))
        statusBar()->showMessage(m_store.lastError(), 6000);
}

int MainWindow::lastRowOf(const QString& role) const {
    for (int row = m_messages->rowCount() - 1; row >= 0; --row)
        if (m_messages->at(row).role == role) return row;
    return -1;
}

void MainWindow::regenerateLast() {
    // The reply to the last message of yours: a user message left without one (its reply
    // deleted, or stopped before the first token) is answered, never dropped.
    const int last = m_messages->rowCount() - 1;
    if (last < 0 || m_engine->busy() || toolRunning()) return;
    // A tool round left unanswered (its conversation was not open when the call ended, or the
    // round limit stopped it): the model answers it.
    const bool answeredTool = m_messages->at(last).role == QLatin1String("tool") &&
                              m_messages->at(last)
                                      .stats.value(QStringLiteral("tool"))
                                      .toObject()
                                      .value(QStringLiteral("status")) != QLatin1String("pending");
    if (m_messages->at(last).role == QLatin1String("user") || answeredTool) {
        if (m_engine->state() != EngineHost::State::ready) {
            statusBar()->showMessage(tr("No model is ready yet."), 4000);
            return;
        }
        startTurn();
        m_input->setFocus();
        return;
    }
    regenerate(lastRowOf(QStringLiteral("assistant")));
}

void MainWindow::copyLastReply() {
    const int row = lastRowOf(QStringLiteral("assistant"));
    if (row < 0 || m_messages->isStreaming()) return;
    QApplication::clipboard()->setText(m_messages->at(row).content);
    statusBar()->showMessage(tr("Reply copied."), 3000);
}

void MainWindow::editLastMessage() {
    const int row = lastRowOf(QStringLiteral("user"));
    if (row < 0 || m_engine->busy()) return;
    if (MessageWidget* w = m_chat->messageWidget(row)) {
        m_chat->ensureWidgetVisible(w);
        w->startEdit();
    }
}

void MainWindow::deleteLastMessage() { deleteMessage(m_messages->rowCount() - 1); }

QStringList MainWindow::attachFiles(const QStringList& paths) {
    QStringList problems;
    for (const QString& path : paths) {
        Attachment a;
        QString error;
        if (attachments::read(path, &a, &error))
            m_attachments.push_back(a);
        else
            problems << error;
    }
    m_attachNote->setText(problems.join(QLatin1Char('\n')));
    m_attachNote->setVisible(!problems.isEmpty());
    refreshAttachmentChips();
    m_meter->schedule();
    m_input->setFocus();
    return problems;
}

void MainWindow::removeAttachment(int index) {
    if (index < 0 || index >= m_attachments.size()) return;
    m_attachments.removeAt(index);
    refreshAttachmentChips();
    m_meter->schedule();
}

void MainWindow::refreshAttachmentChips() {
    auto* row = static_cast<QHBoxLayout*>(m_chips->layout());
    while (row->count() > 1) {  // the stretch stays last
        QLayoutItem* item = row->takeAt(0);
        // Later: the chip clicked may be the one whose signal runs this.
        if (QWidget* chip = item->widget()) {
            chip->hide();
            chip->setParent(nullptr);
            chip->deleteLater();
        }
        delete item;
    }
    for (int i = 0; i < m_attachments.size(); ++i) {
        const Attachment& a = m_attachments.at(i);
        auto* chip = new QPushButton(
            tr("%1 (%2)  \u2715").arg(a.name, attachments::sizeText(a.bytes)), m_chips);
        chip->setAccessibleName(tr("Remove the attached file %1").arg(a.name));
        chip->setToolTip(tr("Attached to the message; click to remove"));
        connect(chip, &QPushButton::clicked, this, [this, i] { removeAttachment(i); });
        row->insertWidget(i, chip);
    }
    m_chips->setVisible(!m_attachments.isEmpty());
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
    // The box keeps Ctrl+Z while it has typing to undo; after that the key reaches Edit > Undo
    // delete (a deletion moves the focus into the box, so Ctrl+Z right after it must work).
    if (watched == m_input && event->type() == QEvent::ShortcutOverride &&
        static_cast<QKeyEvent*>(event)->matches(QKeySequence::Undo) &&
        !m_input->document()->isUndoAvailable() && !m_deleted.isEmpty()) {
        event->ignore();
        return true;
    }
    return QMainWindow::eventFilter(watched, event);
}

void MainWindow::dragEnterEvent(QDragEnterEvent* event) {
    if (event->mimeData()->hasUrls()) event->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* event) {
    QStringList files;
    for (const QUrl& url : event->mimeData()->urls())
        if (url.isLocalFile()) files << url.toLocalFile();
    if (files.isEmpty()) return;
    event->acceptProposedAction();
    attachFiles(files);
}

void MainWindow::sendMessage() {
    const QString typed = m_input->toPlainText().trimmed();
    if ((typed.isEmpty() && m_attachments.isEmpty()) || m_engine->busy()) return;
    if (toolRunning()) {
        statusBar()->showMessage(tr("A tool is running: wait for it or cancel it."), 4000);
        return;
    }
    // The files go inline under their names; the stats keep what the bubble shows.
    const QString text = attachments::composeMessage(typed, m_attachments);
    const QJsonObject fileStats = attachments::stats(typed, m_attachments);
    if (m_engine->state() != EngineHost::State::ready) {
        statusBar()->showMessage(tr("No model is ready yet."), 4000);
        return;
    }
    const bool created = m_current == 0;
    if (created) {
        const qint64 id = m_store.createConversation(
            titleFrom(typed.isEmpty() ? m_attachments.first().name : typed));
        if (id == 0) {
            showWarning(this, tr("Conversations"), m_store.lastError());
            return;
        }
        m_panel->flush();
        const ConversationSettings c = m_panel->settings();
        m_store.setConversationSettings(id, c.systemPrompt, c.reasoningEffort);
        m_store.setConversationSampling(id, c.sampling);
        m_store.setConversationTools(id, m_convTools.toJson());
        m_current = id;
        m_messages->setMessages({});
    }
    settlePendingTool();
    const StoredMessage stored =
        m_store.appendMessage(m_current, QStringLiteral("user"), text, {}, fileStats);
    if (stored.id == 0) {
        showWarning(this, tr("Conversations"), m_store.lastError());
        return;
    }
    m_input->clear();
    // A new message ends the offer to put this conversation's deleted ones back (they would
    // land before it).
    forgetDeletions(m_current);
    m_attachments.clear();
    m_attachNote->hide();
    refreshAttachmentChips();
    m_messages->append(stored);
    if (created)
        reloadConversations();  // the new conversation's row appears at the top
    else
        refreshListRow(m_current);
    startTurn();
}

TurnRequest MainWindow::turnRequest(bool typed) const {
    const ConversationSettings c = m_panel->settings();
    TurnRequest req;
    req.maxTokens = c.sampling.maxTokens > 0
                        ? c.sampling.maxTokens
                        : appSettings()->value(settingsKey::maxTokens, 2048).toInt();
    // 0 (the app setting "rest of the context"): no limit but the context's.
    if (m_turnTokenLimit > 0)
        req.maxTokens =
            req.maxTokens > 0 ? std::min(req.maxTokens, m_turnTokenLimit) : m_turnTokenLimit;
    for (const ChatMessage& m : m_messages->items()) {
        ChatTurn t{m.role, m.content};
        if (m.role == QLatin1String("tool")) {
            const QJsonObject call = m.stats.value(QStringLiteral("tool")).toObject();
            t.reasoning = m.reasoning;
            t.toolRecipient = call.value(QStringLiteral("recipient")).toString();
            t.toolChannel = call.value(QStringLiteral("channel")).toString();
            t.toolContentType = call.value(QStringLiteral("content_type")).toString();
            t.toolArguments = call.value(QStringLiteral("arguments")).toString();
            t.toolPreamble = call.value(QStringLiteral("preamble")).toString();
            if (t.content.isEmpty()) t.content = tr("The call was not run.");
        }
        req.history.push_back(t);
    }
    m_tools->turnNamespaces(m_convTools, m_current, req.systemTools, req.developerTools);
    if (typed) {
        const QString text =
            attachments::composeMessage(m_input->toPlainText().trimmed(), m_attachments);
        if (!text.isEmpty()) req.history.push_back({QStringLiteral("user"), text});
    }
    req.systemPrompt = c.systemPrompt;
    req.reasoningEffort = c.reasoningEffort;
    req.temperature = c.sampling.temperature;
    req.topP = c.sampling.topP;
    req.topK = c.sampling.topK;
    req.minP = c.sampling.minP;
    req.seed = c.sampling.fixedSeed ? static_cast<quint64>(c.sampling.seed) : 0;
    return req;
}

void MainWindow::startTurn() {
    // The panel shows the open conversation's settings (stored with it as they change).
    m_panel->flush();
    TurnRequest req = turnRequest(false);
    m_turnConversation = m_current;
    m_streamReasoning.clear();
    m_streamContent.clear();
    if (m_continued) {
        req.continueReply = true;
        req.continueReasoning = m_continued->reasoning;
        req.continueContent = m_continued->content;
        m_streamReasoning = m_continued->reasoning;
        m_streamContent = m_continued->content;
    }
    m_messages->beginStreaming(m_streamReasoning, m_streamContent);
    if (!m_engine->send(req)) {
        statusBar()->showMessage(tr("The engine is busy or not ready."), 4000);
        if (m_regenerated != 0 || m_continued) {
            onTurnFinished(TurnReport{});  // the reply regenerated or continued comes back
            return;
        }
        m_messages->endStreaming(nullptr);
    }
}

void MainWindow::onTurnFinished(const TurnReport& report) {
    const qint64 conv = m_turnConversation;
    m_turnConversation = 0;
    if (m_continued) {
        finishContinue(conv, report);
        m_meter->refresh();
        return;
    }
    const qint64 regenerated = std::exchange(m_regenerated, 0);
    if (report.finish == QLatin1String("tool_calls")) {
        if (regenerated != 0 && !replaceRegeneratedByToolRound(conv, regenerated)) {
            // The reply stays as it was, with what followed it; the call is not made.
            if (conv == m_current) {
                m_messages->endStreaming(nullptr);
                m_messages->setMessages(m_store.messages(conv));
            }
            return;
        }
        onToolCallReply(conv, report);
        m_meter->refresh();
        return;
    }
    if (!report.error.isEmpty())
        statusBar()->showMessage(tr("Generation failed: %1").arg(report.error), 10000);
    const bool empty = report.content.isEmpty() && report.reasoning.isEmpty();
    if (empty) {
        // Nothing generated (stopped at once, or an error before the first token); a reply
        // being regenerated is shown again with what followed it, as stored.
        if (conv == m_current) {
            m_messages->endStreaming(nullptr);
            if (regenerated != 0) m_messages->setMessages(m_store.messages(conv));
        }
        return;
    }
    // Committed now: a crash after this point loses nothing of this reply.
    StoredMessage stored;
    if (regenerated != 0) {
        // The new reply is the latest version of the one regenerated; the messages after it
        // stay with the version shown until now.
        const QList<StoredMessage> all = m_store.messages(conv);
        int position = -1;
        for (const StoredMessage& m : all)
            if (m.id == regenerated) position = m.position;
        stored = m_store.addReplyVersion(conv, position,
                                         {report.content, report.reasoning, report.toJson(), {}});
    } else {
        stored = m_store.appendMessage(conv, QStringLiteral("assistant"), report.content,
                                       report.reasoning, report.toJson());
    }
    if (stored.id == 0) {
        spdlog::error("reply not saved: {}", m_store.lastError().toStdString());
        statusBar()->showMessage(tr("The reply was not saved: %1").arg(m_store.lastError()), 10000);
    }
    if (conv == m_current) {
        m_messages->endStreaming(stored.id ? &stored : nullptr);
        // The view shows what the store holds (a regenerated reply not saved: the old one).
        if (stored.id == 0 && regenerated != 0) m_messages->setMessages(m_store.messages(conv));
    }
    refreshListRow(conv);
    m_meter->refresh();
}

bool MainWindow::replaceRegeneratedByToolRound(qint64 conv, qint64 replyId) {
    const QList<StoredMessage> all = m_store.messages(conv);
    int position = -1;
    for (const StoredMessage& m : all)
        if (m.id == replyId) position = m.position;
    if (position < 0) return true;  // deleted meanwhile (with its conversation)
    // A tool round is not a version of a reply: the round replaces it. The messages after the
    // reply are not dropped: the conversation as it was is kept as a copy first.
    if (position < all.size() - 1) {
        const auto info = m_store.conversation(conv);
        const QString title =
            tr("%1 (before regenerate)").arg(info ? info->title : tr("Conversation"));
        if (m_store.branchConversation(conv, static_cast<int>(all.size()) - 1, title) == 0) {
            statusBar()->showMessage(
                tr("Regenerate failed: the later messages could not be kept: %1")
                    .arg(m_store.lastError()),
                10000);
            return false;
        }
        reloadConversations();
        statusBar()->showMessage(
            tr("The new reply is a tool call; the messages after the old one are kept in "
               "\"%1\".")
                .arg(title),
            10000);
    }
    // The view already shows the messages before the reply and the streaming row.
    if (!m_store.truncate(conv, position)) {
        statusBar()->showMessage(tr("Regenerate failed: %1").arg(m_store.lastError()), 10000);
        return false;
    }
    return true;
}

void MainWindow::finishContinue(qint64 conv, const TurnReport& report) {
    const ChatMessage old = *std::exchange(m_continued, std::nullopt);
    if (!report.error.isEmpty())
        statusBar()->showMessage(tr("Generation failed: %1").arg(report.error), 10000);
    // The report's text is the whole reply (the part before included); nothing at all came when
    // the turn failed before it began: the reply stays as it was.
    MessageVersion v{old.content, old.reasoning, old.stats};
    if (!report.content.isEmpty() || !report.reasoning.isEmpty()) {
        v.content = report.content;
        v.reasoning = report.reasoning;
        v.stats = report.toJson();
        // The reply's token count covers both parts; the speed and first token are the new one's.
        v.stats.insert(
            QStringLiteral("tokens"),
            old.stats.value(QStringLiteral("tokens")).toInteger() + report.generatedTokens);
        v.stats.insert(QStringLiteral("continued"),
                       old.stats.value(QStringLiteral("continued")).toInt() + 1);
        if (old.stats.contains(QStringLiteral("reasoning_s")) && report.reasoningSeconds <= 0)
            v.stats.insert(QStringLiteral("reasoning_s"), old.stats.value("reasoning_s"));
    }
    QList<MessageVersion> versions = old.versions;
    int shown = old.version;
    if (versions.isEmpty()) {
        versions.push_back(v);
        shown = 0;
    } else {
        versions[shown] = v;
    }
    StoredMessage stored;
    stored.id = old.id;
    stored.conversationId = conv;
    stored.role = old.role;
    stored.content = v.content;
    stored.reasoning = v.reasoning;
    stored.stats = v.stats;
    stored.versions = versions.size() > 1 ? versions : QList<MessageVersion>{};
    stored.version = versions.size() > 1 ? shown : 0;
    if (!m_store.setMessageVersions(old.id, versions, shown)) {
        spdlog::error("continued reply not saved: {}", m_store.lastError().toStdString());
        statusBar()->showMessage(m_store.lastError(), 6000);
        // The view shows what the store holds.
        stored.content = old.content;
        stored.reasoning = old.reasoning;
        stored.stats = old.stats;
        stored.versions = old.versions;
        stored.version = old.version;
    }
    if (conv == m_current) m_messages->endStreaming(&stored);
    refreshListRow(conv);
}

void MainWindow::continueReply(int row) {
    if (m_engine->busy() || toolRunning() || row != m_messages->rowCount() - 1 || row < 0) return;
    const ChatMessage& m = m_messages->at(row);
    if (m.role != QLatin1String("assistant") || m.id == 0 ||
        m.stats.value(QStringLiteral("finish")).toString() != QLatin1String("length"))
        return;
    if (m_engine->state() != EngineHost::State::ready) {
        statusBar()->showMessage(tr("No model is ready yet."), 4000);
        return;
    }
    // The stored message stays as it is until the continuation ends (a crash keeps the cut
    // reply); the view streams on from its text.
    m_continued = m;
    m_messages->removeAt(row);
    m_input->setFocus();
    startTurn();
}

qint64 MainWindow::branchFrom(int row) {
    if (m_current == 0 || row < 0 || row >= m_messages->rowCount() || m_messages->at(row).id == 0)
        return 0;
    m_panel->flush();  // the settings as shown go with the branch
    const auto info = m_store.conversation(m_current);
    if (!info) return 0;
    const QString title = tr("%1 (branch)").arg(info->title);
    const qint64 id = m_store.branchConversation(m_current, row, title);
    if (id == 0) {
        statusBar()->showMessage(tr("Branch failed: %1").arg(m_store.lastError()), 6000);
        return 0;
    }
    reloadConversations();
    selectConversation(id);
    statusBar()->showMessage(tr("Branched into \"%1\".").arg(title), 4000);
    m_input->setFocus();
    return id;
}

void MainWindow::stopGeneration() {
    // Stop (Esc) also cancels a running tool call; unlike the card's Cancel, no turn follows
    // (Regenerate lets the model answer it later).
    if (m_toolCall) {
        m_toolStopped = true;
        m_toolCall->cancel();
        return;
    }
    m_engine->stop();
}

void MainWindow::regenerate(int row) {
    if (m_engine->busy() || toolRunning() || row < 0 || row >= m_messages->rowCount() ||
        m_messages->at(row).role != QLatin1String("assistant") || m_messages->at(row).id == 0)
        return;
    // Nothing is removed: the reply and the messages after it stay stored as they are and
    // become its earlier version once the new reply ends (addReplyVersion); the view shows the
    // conversation up to the new reply meanwhile.
    m_regenerated = m_messages->at(row).id;
    m_messages->truncate(row);
    forgetDeletions(m_current);
    // The focused Regenerate button went with the reply: the message box takes the keys.
    m_input->setFocus();
    startTurn();
}

void MainWindow::deleteMessage(int row) {
    if (m_engine->busy() || toolRunning() || row < 0 || row >= m_messages->rowCount()) return;
    // The stored state (creation time, versions) is what Undo puts back.
    const QList<StoredMessage> stored = m_store.messages(m_current);
    const std::optional<StoredMessage> deleted =
        row < stored.size() && stored.at(row).id == m_messages->at(row).id
            ? std::optional<StoredMessage>(stored.at(row))
            : std::nullopt;
    if (!m_store.deleteMessage(m_current, row)) {
        statusBar()->showMessage(m_store.lastError(), 6000);
        return;
    }
    m_messages->removeAt(row);
    m_input->setFocus();
    if (deleted) {
        m_deleted.push_back(*deleted);
        while (m_deleted.size() > kMaxUndo) m_deleted.removeFirst();
        m_undoTimer->start(kUndoMs);
    }
    refreshUndo();
}

void MainWindow::refreshUndo() {
    if (m_deleted.isEmpty()) {
        m_undoTimer->stop();
        m_undoBar->hide();
    } else {
        const StoredMessage& last = m_deleted.last();
        m_undoLabel->setText(last.role == QLatin1String("user") ? tr("Your message was deleted.")
                                                                : tr("The reply was deleted."));
        // The bar offers the latest deletion while its time runs.
        m_undoBar->setVisible(m_undoTimer->isActive());
    }
    if (m_undoAction) {
        m_undoAction->setEnabled(!m_deleted.isEmpty());
        m_undoAction->setText(m_deleted.size() > 1
                                  ? tr("&Undo delete (%1 more)").arg(m_deleted.size() - 1)
                                  : tr("&Undo delete"));
    }
}

void MainWindow::forgetDeletions(qint64 id) {
    m_deleted.removeIf([id](const StoredMessage& m) { return id == 0 || m.conversationId == id; });
    refreshUndo();
}

bool MainWindow::undoDelete() {
    if (m_deleted.isEmpty()) {
        refreshUndo();
        return false;
    }
    if (m_engine->busy() && m_deleted.last().conversationId == m_turnConversation) {
        statusBar()->showMessage(tr("A reply is being written: the message cannot be put back "
                                    "now."),
                                 6000);
        return false;
    }
    const StoredMessage m = m_deleted.takeLast();
    if (!m_store.insertMessage(m)) {
        statusBar()->showMessage(tr("Undo failed: %1").arg(m_store.lastError()), 6000);
        refreshUndo();
        return false;
    }
    // The message comes back where it is seen: its conversation is opened.
    if (m.conversationId != m_current) {
        selectConversation(m.conversationId);
    } else {
        m_messages->setMessages(m_store.messages(m_current));
    }
    m_chat->restoreScrollPosition(-1);
    refreshListRow(m.conversationId);
    // The next deletion is offered in turn.
    if (!m_deleted.isEmpty()) m_undoTimer->start(kUndoMs);
    refreshUndo();
    m_input->setFocus();
    m_meter->refresh();
    return true;
}

void MainWindow::showVersion(int row, int index) {
    if (m_engine->busy() || toolRunning() || row < 0 || row >= m_messages->rowCount()) return;
    const ChatMessage& m = m_messages->at(row);
    if (index < 0 || index >= m.versions.size() || index == m.version) return;
    // The last reply flipping between versions with nothing after them: only its row changes.
    const bool alone = row == m_messages->rowCount() - 1 && m.role != QLatin1String("user") &&
                       m.versions[index].following.isEmpty();
    if (!m_store.showVersion(m_current, row, index)) {
        statusBar()->showMessage(m_store.lastError(), 6000);
        return;
    }
    forgetDeletions(m_current);
    if (alone) {
        StoredMessage s;
        s.id = m.id;
        s.conversationId = m_current;
        s.position = row;
        s.role = m.role;
        s.content = m.versions[index].content;
        s.reasoning = m.versions[index].reasoning;
        s.stats = m.versions[index].stats;
        s.versions = m.versions;
        s.version = index;
        m_messages->replace(row, s);
    } else {
        m_messages->setMessages(m_store.messages(m_current));
    }
    m_meter->refresh();
}

void MainWindow::editMessage(int row, const QString& newText) {
    if (m_engine->busy() || toolRunning() || row < 0 || row >= m_messages->rowCount() ||
        m_messages->at(row).role != QLatin1String("user"))
        return;
    // The chat view edits the typed text in place and sends it here; the files attached to the
    // message stay with it.
    const ChatMessage& old = m_messages->at(row);
    QJsonObject stats;
    const QString typed = newText.trimmed();
    const QString text = attachments::editMessage(old.content, old.stats, typed, &stats);
    if (text.trimmed().isEmpty()) return;
    // A title made from the first message follows its edit; a title the user chose stays.
    const auto info = m_store.conversation(m_current);
    const QString oldTyped = attachments::shown(old.content, old.stats).text;
    if (row == 0 && info && !typed.isEmpty() &&
        (info->title == titleFrom(oldTyped) || info->title == titleFrom(old.content)))
        m_store.renameConversation(m_current, titleFrom(typed));
    // The old text and the messages after it stay as the message's earlier version.
    const StoredMessage stored = m_store.editUserMessage(m_current, row, text, stats);
    if (stored.id == 0) {
        statusBar()->showMessage(tr("Edit failed: %1").arg(m_store.lastError()), 6000);
        return;
    }
    forgetDeletions(m_current);
    m_messages->truncate(row + 1);
    m_messages->replace(row, stored);
    refreshListRow(m_current);
    m_input->setFocus();
    startTurn();
}

bool MainWindow::exportConversation(const QString& path, bool json) {
    if (m_current == 0) return false;
    const QByteArray bytes =
        json ? m_store.exportJson(m_current) : m_store.exportMarkdown(m_current).toUtf8();
    QString refused;
    const QString target = neural::gui::checkedOutputPath(path, &refused);
    if (target.isEmpty()) {
        showWarning(this, tr("Export"), refused);
        return false;
    }
    QSaveFile f(target);
    if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size() || !f.commit()) {
        showWarning(this, tr("Export"), tr("Cannot write %1: %2").arg(path, f.errorString()));
        return false;
    }
    statusBar()->showMessage(tr("Exported to %1").arg(path), 4000);
    return true;
}

void MainWindow::updateEngineState() {
    const EngineHost::State s = m_engine->state();
    QString text = m_engine->stateText();
    const QString warning = s == EngineHost::State::ready ? engineWarning() : QString();
    if (!warning.isEmpty()) text = tr("Ready with a warning: %1").arg(m_engine->modelSummary());
    if (m_engine->busy()) text = tr("Generating ... (Esc stops)");
    m_engineLabel->setText(warning.isEmpty() ? text : text + QStringLiteral(" - ") + warning);
    m_engineLabel->setToolTip(warning.isEmpty() ? text : text + QStringLiteral("\n") + warning);
    m_engineLabel->setStyleSheet(warning.isEmpty() ? QString()
                                                   : QStringLiteral("QLabel { color: #b9770e; }"));
    // Loading: how far (LoadOptions::on_progress); generating: busy without an end.
    const int percent = m_engine->loadPercent();
    if (percent >= 0) {
        m_busy->setRange(0, 100);
        m_busy->setValue(percent);
        m_busy->setFormat(QStringLiteral("%p%"));
    } else {
        m_busy->setRange(0, 0);
    }
    m_busy->setAccessibleDescription(percent >= 0 ? text : QString());
    m_busy->setVisible(s == EngineHost::State::loading || m_engine->busy());
    m_banner->setVisible(s == EngineHost::State::ready && m_engine->isDemo());
    const bool ready = s == EngineHost::State::ready;
    m_send->setEnabled(ready && !m_engine->busy());
    m_stop->setEnabled(m_engine->busy());
}

QString MainWindow::engineWarning() const {
    const std::shared_ptr<const Model> model = m_engine->model();
    // The team the options ask for (a profile's "0" is set and false: no persistent team asked).
    if (!model || !options::persistent_team(m_loadOptions, false) || m_loadOptions.store.empty() ||
        m_loadOptions.kernel == "reference" || std::string(model->backend_name()) != "cpu")
        return {};
    const cpu::StoreMoe* moe = model->cpu().store_moe();
    if (!moe || moe->describe().find("persistent team") != std::string::npos) return {};
    // The profile asked for the persistent team and the OpenMP team runs instead: slower than
    // chosen, so it stays in view rather than only in the log.
    cpu::TeamOptions team;
    team.persistent = true;
    team.library = m_loadOptions.kdll;
    const QString library =
        QString::fromStdString(cpu::PersistentTeam::resolve_library(team).string());
    return tr("the persistent CPU team is not used (its library %1 could not be loaded; the log "
              "says why): the OpenMP team runs instead")
        .arg(library);
}

void MainWindow::updateServerState(bool running, const QString& url) {
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

void MainWindow::toggleServer() {
    if (m_server->isRunning()) {
        m_server->stop();
        return;
    }
    const quint16 port =
        static_cast<quint16>(appSettings()->value(QStringLiteral("server/port"), 8080).toInt());
    if (!m_server->start(port)) showWarning(this, tr("API server"), m_server->lastError());
}

void MainWindow::loadActiveProfile() {
    m_loadOptions = {};
    m_unloaded = false;
    if (m_options.demo && m_options.modelDir.isEmpty()) {
        m_engine->loadDemo(demoModelDir(), demoTokenizerPath());
        return;
    }
    Profile p = m_profiles.active();
    if (!m_options.modelDir.isEmpty()) {
        // Another model (--model, the switcher) with this profile's engine settings: the
        // profile's store belongs to its own model; the switcher names the store to use.
        const bool ownModel = p.modelDir == m_options.modelDir;
        p.modelDir = m_options.modelDir;
        if (m_modelStore)
            p.store = *m_modelStore;
        else if (!ownModel)
            p.store.clear();
        if (p.store.isEmpty()) {
            // The RAM levers act on a store's records (Profile::toLoadOptions refuses them
            // without one).
            for (const char* lever : {"warmup-ram", "lock-ram", "release-resident"})
                p.values.remove(QLatin1String(lever));
        }
    }
    LoadOptions o;
    try {
        o = p.toLoadOptions();
    } catch (const std::exception& e) {  // a setting the profile's backend refuses
        onLoadFailed(QString::fromUtf8(e.what()));
        return;
    }
    const QString dir = p.modelDir;
    if (!dir.isEmpty()) {
        m_loadOptions = o;
        m_engine->load(dir, o);
        return;
    }
    if (QFileInfo::exists(demoModelDir() + QStringLiteral("/config.json")) ||
        !m_options.askFirstRun) {
        m_engine->loadDemo(demoModelDir(), demoTokenizerPath());
        return;
    }
    QTimer::singleShot(0, this, &MainWindow::firstRun);
}

void MainWindow::onLoadFailed(const QString& error) {
    // Window-modal but not blocking (open(), not exec()): the app keeps running meanwhile.
    auto* box =
        new QMessageBox(QMessageBox::Warning, tr("Model not loaded"),
                        tr("The model in %1 could not be loaded.").arg(m_engine->modelDir()),
                        QMessageBox::Close, this);
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->setInformativeText(error);
    QPushButton* wizard = box->addButton(tr("Set up a model..."), QMessageBox::AcceptRole);
    QPushButton* demo = box->addButton(tr("Use the demo model"), QMessageBox::ActionRole);
    connect(box, &QMessageBox::buttonClicked, this, [this, wizard, demo](QAbstractButton* b) {
        if (b == wizard)
            openWizard();
        else if (b == demo)
            useDemoModel();
    });
    box->open();
}

void MainWindow::firstRun() {
    QMessageBox box(this);
    box.setWindowTitle(tr("Welcome to Neural"));
    box.setText(tr("No model is set up yet."));
    box.setInformativeText(
        tr("Set up a gpt-oss checkpoint you downloaded, or try the app with "
           "the built-in demo model (random weights: its replies are "
           "nonsense)."));
    // A gpt-oss model another app already downloaded (app/discovery.h) is offered first: used
    // where it lies, nothing copied.
    std::optional<FoundModel> found;
    QStringList lines;
    for (const FoundModel& f : discoverModels(m_discoveryRoots)) {
        lines << QStringLiteral("- ") + f.description();
        if (!found && f.usable()) found = f;
    }
    if (!lines.isEmpty())
        box.setDetailedText(tr("gpt-oss models found on this PC:\n%1").arg(lines.join('\n')));
    QPushButton* use = nullptr;
    if (found) {
        box.setText(tr("No model is set up yet, but %1 (from %2) is on this PC.")
                        .arg(found->name, found->source));
        use = box.addButton(tr("Use %1").arg(found->name), QMessageBox::ActionRole);
    }
    QPushButton* wizard = box.addButton(tr("Set up a model..."), QMessageBox::AcceptRole);
    box.addButton(tr("Use the demo model"), QMessageBox::RejectRole);
    box.exec();
    if (use && box.clickedButton() == use)
        loadModel(found->path, {});
    else if (box.clickedButton() == wizard)
        openWizard();
    else
        useDemoModel();
}

void MainWindow::openGuide() {
    if (m_guide) {
        m_guide->raise();
        m_guide->activateWindow();
        return;
    }
    m_guide = new GuideViewer(QStringLiteral("DESKTOP.md"), this);
    m_guide->setAttribute(Qt::WA_DeleteOnClose);
    m_guide->show();
}

void MainWindow::setTextZoom(int points) {
    m_zoom = std::clamp(points, -6, 24);
    appSettings()->setValue(settingsKey::textZoom, m_zoom);
    QFont f = QApplication::font();
    f.setPointSizeF(std::max(6.0, f.pointSizeF() + m_zoom));
    m_chat->setFont(f);
    m_input->setFont(f);
    if (m_zoom != 0) statusBar()->showMessage(tr("Text size %1 pt").arg(f.pointSizeF()), 2000);
}

void MainWindow::unloadModel() {
    if (m_engine->busy()) m_engine->stop();
    if (!m_engine->unloadModel()) {
        statusBar()->showMessage(tr("The model is still loading; unload it once it is ready."),
                                 5000);
        fillModelSwitcher();
        return;
    }
    m_unloaded = true;
    m_telemetry->setModel(nullptr);
    if (m_tray) m_tray->setToolTip(tr("Neural - no model loaded"));
    fillModelSwitcher();
    updateEngineState();
}

void MainWindow::useDemoModel() {
    // Remembered as the model in use (as --demo), so what reloads the chat model (after a
    // benchmark, a profile's Apply) brings the demo model back, not the active profile's.
    m_options.demo = true;
    m_options.modelDir.clear();
    m_modelStore.reset();
    loadActiveProfile();
    fillModelSwitcher();
}

void MainWindow::openWizard() {
    auto* wizard = new SetupWizard(this);
    wizard->setAttribute(Qt::WA_DeleteOnClose);
    connect(wizard, &QWizard::accepted, this, [this, wizard] {
        const Profile p = wizard->profile();
        // The built-in Optimized follows this PC's fit for the model just set up (unless edited).
        if (wizard->hasPlan()) m_profiles.followFit(wizard->plan());
        m_profiles.upsert(p);
        m_profiles.setActive(p.name);
        QString error;
        if (!m_profiles.save(m_options.profilesPath, &error))
            showWarning(this, tr("Profiles"), error);
        m_options.modelDir.clear();
        m_modelStore.reset();
        fillModelSwitcher();
        loadActiveProfile();
    });
    wizard->open();
}

void MainWindow::openProfiles() {
    auto* dialog = new ProfileDialog(&m_profiles, m_options.profilesPath, this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &ProfileDialog::applied, this, [this](const Profile&) {
        m_options.modelDir.clear();  // the profile's model from now on
        m_modelStore.reset();
        fillModelSwitcher();
        loadActiveProfile();
    });
    dialog->open();
}

void MainWindow::openBenchmark() {
    if (m_benchmark) {
        m_benchmark->raise();
        m_benchmark->activateWindow();
        return;
    }
    auto* dialog = new BenchmarkDialog(&m_profiles, m_engine, this);
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

void MainWindow::openSettings() {
    auto* dialog = new AppSettingsDialog(this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    connect(dialog, &AppSettingsDialog::themeChanged, this,
            [](const QString& theme) { applyTheme(theme); });
    dialog->open();
}

}  // namespace neural::gui
