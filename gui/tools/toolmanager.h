// The app's tools (docs/DESKTOP.md "Tools"): the MCP servers of Settings > Tools, shared by every
// conversation, and gpt-oss's built-in python and browser, one of each per conversation (python
// keeps a session and a scratch folder per conversation). It answers which namespaces a turn
// offers the model (ConversationTools says which are on) and which provider takes a call.
//
// GUI thread only. Providers are owned here; tests add their own with addProvider.
#pragma once

#include <QHash>
#include <QList>
#include <QObject>
#include <QPointer>
#include <QString>

#include <functional>
#include <vector>

#include "chat/message.h"
#include "tool.h"
#include "tools/conversationtools.h"
#include "tools/toolsettings.h"

namespace neural::gui {

class ToolManager : public QObject {
    Q_OBJECT
public:
    // Consecutive tool rounds for one message of yours: the next call is not run and the
    // conversation waits for the user (docs/DESKTOP.md "Tools").
    static constexpr int kMaxToolRounds = 8;

    explicit ToolManager(QObject* parent = nullptr);
    ~ToolManager() override;

    // Settings > Tools: starts the enabled MCP servers that are new, changed or not running (a
    // crashed one), stops those removed, changed or disabled; the built-ins are made again with
    // the new settings.
    void applySettings(const ToolSettings& settings);
    const ToolSettings& settings() const { return m_settings; }

    // Providers shared by every conversation (the MCP servers; tests add theirs). Takes
    // ownership; a provider of the same name is replaced.
    void addProvider(toolhost::ToolProvider* provider);
    void removeProvider(const QString& name);
    QList<toolhost::ToolProvider*> sharedProviders() const;

    // Makes the built-in `name` ("python", "browser") of a conversation; null when the built-in
    // is not available (turned off in Settings > Tools). The default makes the real ones
    // (toolhost/builtin) from settings(); tests replace it.
    using BuiltinFactory =
        std::function<toolhost::ToolProvider*(const QString& name, qint64 conversation)>;
    void setBuiltinFactory(BuiltinFactory factory);
    // The conversation's built-in (made on first use); null when not available.
    toolhost::ToolProvider* builtin(const QString& name, qint64 conversation);
    // Forgets a conversation's built-ins (the conversation was deleted, python restarted).
    void dropBuiltins(qint64 conversation);

    // The provider answering namespace `ns` in `conversation`, or null.
    toolhost::ToolProvider* provider(const QString& ns, qint64 conversation);
    // The namespaces the conversation offers, all of them (for the Tools menu): shared ones in
    // their order, then python and browser.
    QStringList namespaces() const;

    // The namespaces a turn of `conversation` renders: the enabled built-ins into the system
    // message, the enabled and ready servers into the developer message.
    void turnNamespaces(const ConversationTools& tools, qint64 conversation,
                        std::vector<chat::ToolNamespace>& system,
                        std::vector<chat::ToolNamespace>& developer);

    // Limits of every call (time, result size).
    toolhost::CallLimits limits() const { return m_limits; }
    void setLimits(const toolhost::CallLimits& limits) { m_limits = limits; }

    // The per-conversation scratch folder of python (LocalData/tools/python/ID).
    static QString scratchFolder(qint64 conversation);

signals:
    // A provider was added, removed, or changed its state (ready, tools, problem).
    void changed();

private:
    ToolSettings m_settings;
    QList<QPointer<toolhost::ToolProvider>> m_shared;
    QHash<QString, QPointer<toolhost::ToolProvider>> m_builtins;  // "python/ID"
    BuiltinFactory m_factory;
    toolhost::CallLimits m_limits;
};

}  // namespace neural::gui
