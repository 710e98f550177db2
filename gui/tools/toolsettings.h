// Settings > Tools as stored in appSettings() (settings.ini, group "tools"): the MCP servers (the
// mcpServers JSON format, toolhost/mcp/mcpserverconfig.h), python (off by default; interpreter,
// time and memory limits) and browser (off by default; its search provider: a SearXNG URL or a
// search tool of one of the MCP servers), and the limits of every
// call. Python and browser being on here makes them available; each conversation still turns
// them on for itself (ConversationTools).
#pragma once

#include <QList>
#include <QString>
#include <QUrl>

#include "mcpserverconfig.h"
#include "tool.h"

namespace neural::gui {

struct ToolSettings {
    QList<toolhost::McpServerConfig> servers;
    bool pythonEnabled = false;
    QString pythonInterpreter;  // empty: found on PATH
    int pythonTimeoutS = 30;
    int pythonMemoryMiB = 1024;
    bool browserEnabled = false;
    QUrl searxngUrl;
    // Set: search goes to this MCP server's (by its name here) tool instead of SearXNG.
    QString searchServer;
    QString searchTool;
    int callTimeoutS = 60;  // every call (an MCP server's too)
    int maxResultKiB = 64;  // what the model reads of a result; the rest is cut with a note

    toolhost::CallLimits limits() const;
    // Reads appSettings(); a damaged server list reads as none (and logs why).
    static ToolSettings load();
    void save() const;
};

}  // namespace neural::gui
