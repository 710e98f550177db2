// The main window: conversation list (new, rename, delete, search) on the left, the chat in the
// middle (demo banner, messages, input with Send / Stop), the conversation settings panel
// (sampling, seed, token limit, reasoning effort, system prompt; a dock), telemetry and logs
// docks, the API server controls (tray menu, or the status bar when there is no system tray),
// the status bar's model switcher (profiles, models found on disk, recent models, the demo) and
// load progress, and the menus for export, chat actions, profiles, setup wizard and panels.
// Every action has a shortcut or a menu entry (docs/DESKTOP.md "Keyboard").
//
// GUI thread only. It owns the ConversationStore and both list models and is the only code that
// changes them; the engine's results arrive through EngineHost's queued signals.
//
// A New conversation is a draft until its first message: only then is it stored. The layout
// (geometry, docks, splitter), the open conversation and its scroll position and whether the
// API server runs are saved in appSettings() when the window closes and restored at start.
#pragma once

#include <QMainWindow>
#include <QPointer>

#include "app/discovery.h"
#include "app/guideviewer.h"
#include "conversation/attachments.h"
#include "conversation/conversationmodel.h"
#include "conversation/conversationstore.h"
#include "conversation/enginehost.h"
#include "conversation/messagemodel.h"
#include "settings/profile.h"
#include "tools/conversationtools.h"

#include <optional>

class QComboBox;
class QDockWidget;
class QSplitter;
class QLabel;
class QLineEdit;
class QListView;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSystemTrayIcon;
class QAction;
class QTimer;
class QToolButton;
namespace neural::toolhost {
class ToolCall;
struct ToolOutcome;
}  // namespace neural::toolhost

namespace neural::gui {

class BenchmarkDialog;
class ChatInput;
class ChatView;
class ContextMeter;
class ServerControl;
class SettingsPanel;
class TelemetryDock;
class ToolManager;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    struct Options {
        QString modelDir;         // --model: overrides the profile's model
        bool demo = false;        // --demo: the built-in demo model, whatever the profile says
        QString dbPath;           // conversations file (default: conversationsPath())
        QString profilesPath;     // default: profilesPath()
        bool askFirstRun = true;  // no model anywhere: ask (wizard / demo) instead of the demo
        bool useTray = true;      // false: server controls in the window even with a tray
    };

    // The model switcher's item roles (modelSwitcher()).
    enum SwitcherRole { kSwitchKindRole = Qt::UserRole + 1, kSwitchStoreRole };
    // How long "Undo" is offered under the messages after a message is deleted, and how many
    // deletions Ctrl+Z (Edit > Undo delete) can take back, newest first.
    static constexpr int kUndoMs = 10000;
    static constexpr int kMaxUndo = 20;

    explicit MainWindow(Options options, QWidget* parent = nullptr);
    ~MainWindow() override;

    EngineHost* engine() const { return m_engine; }
    ConversationStore& store() { return m_store; }
    MessageModel* messages() const { return m_messages; }
    ConversationModel* conversations() const { return m_conversations; }
    ChatInput* input() const { return m_input; }
    ChatView* chatView() const { return m_chat; }
    ContextMeter* contextMeter() const { return m_meter; }
    // Attachments of the message being written (the Attach button, files dropped on the
    // window): each file read as text (conversation/attachments.h), shown as a chip above the
    // message box. Returns the reasons for the files refused (also shown under the chips).
    QStringList attachFiles(const QStringList& paths);
    void removeAttachment(int index);
    const QList<Attachment>& pendingAttachments() const { return m_attachments; }
    QPushButton* attachButton() const { return m_attach; }
    QWidget* attachmentChips() const { return m_chips; }
    QLabel* attachmentNote() const { return m_attachNote; }
    // What the next turn sends: the open conversation, its settings and the reply's limit;
    // with `typed`, the message being typed (with its attachments) as the last turn.
    TurnRequest turnRequest(bool typed) const;
    ServerControl* server() const { return m_server; }
    TelemetryDock* telemetry() const { return m_telemetry; }
    qint64 currentConversation() const { return m_current; }
    QLabel* banner() const { return m_banner; }
    QPushButton* serverButton() const { return m_serverButton; }
    // The Benchmark panel while it is open (Tools > Benchmark...), else null.
    BenchmarkDialog* benchmark() const { return m_benchmark; }

public slots:
    void newConversation();
    void sendMessage();  // the input's text
    // File > Quit, the tray's Quit, Ctrl+Q: ends the app (the API server with it), also when
    // the window is hidden in the tray.
    void quitApplication();
    // Caps every reply at n tokens this session (0: the setting alone); the screenshot mode's
    // exchange uses it so a random-weight model's reply stays short.
    void setTurnTokenLimit(int n) { m_turnTokenLimit = n; }
    void stopGeneration();
    // A new reply in place of the one at `row`; the reply and the messages after it stay as
    // its earlier version (the chat view's < 1/2 >).
    void regenerate(int row);
    // Continue: the last reply, cut by the token limit (finish reason "length"), goes on from
    // where it stopped (the engine reuses the cut reply's K/V) and stays the same message.
    void continueReply(int row);
    // Branch: a new conversation named after this one with the messages up to and including
    // `row` and the same settings; it is opened. Returns its id (0: not done).
    qint64 branchFrom(int row);
    void editMessage(int row, const QString& newText = {});
    // Deletes the message at once; "Undo" under the messages offers it back for kUndoMs, and
    // it goes onto the undo stack (kMaxUndo deletions, newest first).
    void deleteMessage(int row);
    // Puts the latest deletion back (the Undo button, Ctrl+Z, Edit > Undo delete), opening its
    // conversation; false when there is none. A conversation's deletions leave the stack when
    // it changes otherwise (a message sent, edited, regenerated; it is deleted).
    bool undoDelete();
    int undoCount() const { return static_cast<int>(m_deleted.size()); }
    QPushButton* undoButton() const { return m_undo; }
    QAction* undoAction() const { return m_undoAction; }
    // Shows version `index` of a regenerated reply or of an edited message of yours (the chat
    // view's < 2/3 >), with the messages that followed that version.
    void showVersion(int row, int index);
    void selectConversation(qint64 id);
    void toggleServer();
    bool exportConversation(const QString& path, bool json);
    // Tools > Benchmark...: the A/B panel (window-modal; one at a time).
    void openBenchmark();
    // Settings > Settings...: the app's settings page (API, tray, theme, reply limit).
    void openSettings();
    // Deletes the conversation after asking (Delete key, the list's context menu); refused for
    // the one a reply streams into.
    void deleteConversation(qint64 id);
    // Help > About: version, build type, CUDA in this build, the loaded backend (and GPU).
    QString aboutText() const;
    // Writes the layout, the open conversation, its scroll position and the API state into
    // appSettings() (also done when the window closes).
    void saveWindowState();
    QListView* conversationList() const { return m_list; }
    QSplitter* splitter() const { return m_split; }
    QLabel* engineLabel() const { return m_engineLabel; }
    // The status bar's quick model switcher: the profiles, the models found in the models
    // folders (app/modelcatalog.h), the recently loaded ones, then the demo model. Each item's
    // Qt::UserRole is the profile name ("" for the demo) or the model path, kSwitchKindRole its
    // kind and kSwitchStoreRole a model's store.
    QComboBox* modelSwitcher() const { return m_modelSwitch; }
    // Rescans the models folders, the recent list and the other apps' models (app/discovery.h)
    // into the switcher.
    void fillModelSwitcher();
    // Where the switcher looks for other apps' models (tests: fake folder layouts).
    void setDiscoveryRoots(const DiscoveryRoots& roots) {
        m_discoveryRoots = roots;
        fillModelSwitcher();
    }
    // Loads a checkpoint (and store) with the active profile's engine settings.
    void loadModel(const QString& model, const QString& store);
    // Loads the built-in demo model and keeps it as the model in use (File > Use the demo
    // model, the switcher's Demo model).
    void useDemoModel();
    // The switcher's "Unload the model": frees its RAM and VRAM (a reply is stopped, the API
    // server stops with it); choosing a model loads one again.
    void unloadModel();
    // View > Zoom in / out / Reset (Ctrl+= / Ctrl+- / Ctrl+0): the conversation's and the
    // message box's text size, `points` above the app's font (kept in the settings).
    void setTextZoom(int points);
    int textZoom() const { return m_zoom; }
    // Help > User guide (F1): the guide in the app's own viewer (non-modal, one at a time).
    void openGuide();
    GuideViewer* guide() const { return m_guide; }
    // The conversation settings panel and its dock (View > Conversation settings).
    SettingsPanel* settingsPanel() const { return m_panel; }
    QDockWidget* settingsDock() const { return m_panelDock; }
    QProgressBar* busyBar() const { return m_busy; }
    // Tools (docs/DESKTOP.md "Tools", mainwindow_tools.cpp). A reply that ends in a tool call
    // becomes a tool message (role "tool") shown as a card: Run, Deny or Always allow, then its
    // outcome goes into the history and the next turn starts by itself.
    ToolManager* tools() const { return m_tools; }
    // The open conversation's tools (a New conversation's until its first message stores it).
    const ConversationTools& conversationTools() const { return m_convTools; }
    void setConversationTools(const ConversationTools& tools);
    // A card's button: ToolAction (chatview.h) on the tool message at `row`.
    void toolAction(int row, int action);
    // True while a tool call runs.
    bool toolRunning() const;
    // The Tools button beside the message box (its menu: each namespace on or off in this
    // conversation, python's scratch folder and restart, Settings > Tools).
    QToolButton* toolsButton() const { return m_toolsButton; }
    // Rebuilds the Tools menu (done before it opens).
    void fillToolsMenu();
    // Settings > Tools...: MCP servers, python, browser.
    void openToolSettings();
    // Chat > Regenerate / Copy / Edit / Delete act on the last reply or message of yours.
    void regenerateLast();
    void copyLastReply();
    void editLastMessage();
    void deleteLastMessage();

protected:
    void closeEvent(QCloseEvent* event) override;
    // Ctrl+Z in the message box: its own typing first, then the deletions (Edit > Undo delete).
    bool eventFilter(QObject* watched, QEvent* event) override;
    // Files dropped anywhere on the window are attached to the message being written.
    void dragEnterEvent(QDragEnterEvent* event) override;
    void dropEvent(QDropEvent* event) override;

private:
    void buildUi();
    void buildMenus();
    void buildTray();
    void reloadConversations();
    void startTurn();
    void onTurnFinished(const TurnReport& report);
    void finishContinue(qint64 conv, const TurnReport& report);
    void refreshAttachmentChips();
    // Drops the deletions of conversation `id` from the undo stack (it changed, so they would
    // land in the wrong place); 0: all of them. Updates the Undo bar and action.
    void forgetDeletions(qint64 id);
    void refreshUndo();
    // A regenerated reply that ended in a tool call: the round replaces the stored reply
    // `replyId`; what followed the reply is first kept in a copy of the conversation. False
    // (nothing changed) when that copy or the removal failed.
    bool replaceRegeneratedByToolRound(qint64 conv, qint64 replyId);
    void updateEngineState();
    void updateServerState(bool running, const QString& url);
    void loadActiveProfile();
    void firstRun();
    void onLoadFailed(const QString& error);
    void openWizard();
    void openProfiles();
    void restoreWindowState();
    void onTurnDelta(const QString& reasoning, const QString& content);
    void refreshListRow(qint64 id);
    // Why the engine runs otherwise than the loaded profile asked (the persistent CPU team not
    // loadable); "" when it runs as asked.
    QString engineWarning() const;
    void onSettingsPanelChanged();
    int lastRowOf(const QString& role) const;
    // Tools (mainwindow_tools.cpp).
    void buildToolsUi(QWidget* parent);
    // The reply ended in a tool call: stores the tool message, runs it when allowed.
    void onToolCallReply(qint64 conv, const TurnReport& report);
    void runTool(int row, bool automatic);
    // The card of the running call shows it running (also after its conversation is reopened).
    void showToolRunning(int row);
    void answerTool(int row, const QString& status, const QString& text, const QString& detail,
                    bool continueTurn);
    void onToolFinished(const neural::toolhost::ToolOutcome& outcome);
    // A card still waiting for Run / Deny when the user writes on: answered as not run.
    void settlePendingTool();
    // The tool messages after the last message of yours in `conv`.
    int toolRoundsSinceUser(qint64 conv);
    ConversationTools toolsOf(qint64 conv);
    int rowOfMessage(qint64 id) const;

    Options m_options;
    ConversationStore m_store;
    ProfileStore m_profiles;
    EngineHost* m_engine;
    ServerControl* m_server;
    ConversationModel* m_conversations;
    MessageModel* m_messages;
    qint64 m_current = 0;
    qint64 m_turnConversation = 0;
    // The reply streaming into m_turnConversation so far, to show it again when that
    // conversation is reopened while it streams.
    QString m_streamReasoning, m_streamContent;
    int m_pendingScroll = -1;   // restored scroll position, applied once the view is laid out
    LoadOptions m_loadOptions;  // what the running model was loaded with
    // The store chosen with a model in the switcher (replaces the profile's); unset for --model.
    std::optional<QString> m_modelStore;

    QSplitter* m_split = nullptr;
    QLineEdit* m_search = nullptr;
    QListView* m_list = nullptr;
    QLabel* m_banner = nullptr;
    ChatView* m_chat = nullptr;
    ChatInput* m_input = nullptr;
    ContextMeter* m_meter = nullptr;
    QPushButton* m_attach = nullptr;
    QWidget* m_chips = nullptr;
    QLabel* m_attachNote = nullptr;
    QList<Attachment> m_attachments;
    // The deleted messages Undo can put back, oldest first (at most kMaxUndo).
    QList<StoredMessage> m_deleted;
    QAction* m_undoAction = nullptr;
    QWidget* m_undoBar = nullptr;
    QLabel* m_undoLabel = nullptr;
    QPushButton* m_undo = nullptr;
    QTimer* m_undoTimer = nullptr;
    QPushButton* m_send = nullptr;
    QPushButton* m_stop = nullptr;
    SettingsPanel* m_panel = nullptr;
    QDockWidget* m_panelDock = nullptr;
    QLabel* m_engineLabel = nullptr;
    QComboBox* m_modelSwitch = nullptr;
    QProgressBar* m_busy = nullptr;
    QLabel* m_serverLabel = nullptr;
    QPushButton* m_serverButton = nullptr;
    QPushButton* m_copyUrl = nullptr;
    QAction* m_serverAction = nullptr;
    QAction* m_copyUrlAction = nullptr;
    QSystemTrayIcon* m_tray = nullptr;
    TelemetryDock* m_telemetry = nullptr;
    QPlainTextEdit* m_logs = nullptr;
    BenchmarkDialog* m_benchmark = nullptr;  // reset when it is destroyed
    QPointer<GuideViewer> m_guide;
    int m_zoom = 0;
    bool m_unloaded = false;  // the user unloaded the model (the switcher shows none)
    DiscoveryRoots m_discoveryRoots = DiscoveryRoots::defaults();
    bool m_quitting = false;
    int m_turnTokenLimit = 0;
    // The reply being regenerated (its id; 0: none). It and the messages after it stay stored
    // as they are until the new reply ends (a crash loses nothing); then the new reply becomes
    // its latest version and they are kept with the version shown until then.
    qint64 m_regenerated = 0;
    // The reply being continued (its stored state), while its continuation streams.
    std::optional<ChatMessage> m_continued;
    ToolManager* m_tools = nullptr;
    ConversationTools m_convTools;
    QToolButton* m_toolsButton = nullptr;
    QMenu* m_toolsMenu = nullptr;
    // The running tool call, the tool message it answers and its conversation.
    QPointer<neural::toolhost::ToolCall> m_toolCall;
    qint64 m_toolMessage = 0;
    qint64 m_toolConversation = 0;
    qint64 m_toolStartMs = 0;
    bool m_toolAutomatic = false;  // the running call was always allowed
    bool m_toolStopped = false;    // Stop cancelled it: no turn follows
};

}  // namespace neural::gui
