// The tools of one conversation (stored with it, ConversationStore's `tools` column): which
// namespaces are on and which calls run without asking. MCP servers are on unless turned off
// here; the built-ins (python, browser) are off unless turned on here (docs/DESKTOP.md "Tools").
#pragma once

#include <QJsonObject>
#include <QString>
#include <QStringList>

namespace neural::gui {

struct ConversationTools {
    QStringList serversOff;   // MCP servers' namespaces turned off in this conversation
    QStringList builtinsOn;   // "python", "browser" turned on in this conversation
    QStringList alwaysAllow;  // recipients ("filesystem.read_file", "python") run without asking

    static bool isBuiltin(const QString& ns) {
        return ns == QLatin1String("python") || ns == QLatin1String("browser");
    }
    bool enabled(const QString& ns) const {
        return isBuiltin(ns) ? builtinsOn.contains(ns) : !serversOff.contains(ns);
    }
    void setEnabled(const QString& ns, bool on);
    bool allowed(const QString& recipient) const { return alwaysAllow.contains(recipient); }

    // {"servers_off": [...], "builtins_on": [...], "always_allow": [...]}; anything else (a
    // damaged value) reads as the defaults.
    static ConversationTools fromJson(const QJsonObject& o);
    QJsonObject toJson() const;
    bool operator==(const ConversationTools&) const = default;
};

// A recipient split into its namespace and tool: "filesystem.read_file" -> filesystem,
// read_file; "python" -> python, "" ; "browser.search" -> browser, search.
struct ToolAddress {
    QString ns;
    QString tool;
};
ToolAddress splitRecipient(const QString& recipient);

}  // namespace neural::gui
