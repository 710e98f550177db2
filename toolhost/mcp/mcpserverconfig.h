// One MCP server as the user configures it (docs/TOOLS.md "MCP servers"), and the `mcpServers`
// JSON file format that Claude Desktop, LM Studio and Jan share, for import and export.
#pragma once

#include <QByteArray>
#include <QJsonObject>
#include <QList>
#include <QMap>
#include <QString>
#include <QStringList>
#include <QUrl>

namespace neural::toolhost {

struct McpServerConfig {
    QString name;  // the key in "mcpServers"; the namespace is mcpNamespaceName(name)
    enum class Transport { stdio, http } transport = Transport::stdio;
    // stdio: a command line started as a child process, talking newline-delimited JSON-RPC.
    QString command;
    QStringList args;
    QMap<QString, QString> env;  // added to (or replacing entries of) the system's environment
    QString workingDirectory;    // empty: the app's
    // http: a Streamable HTTP endpoint.
    QUrl url;
    QMap<QString, QString> headers;  // sent with every request (e.g. Authorization)
    bool enabled = true;
};

// Reads the `mcpServers` file format: {"mcpServers": {NAME: {...}}} or the bare inner object
// {NAME: {...}}. A stdio server has "command" (string), optional "args" (array of strings),
// "env" (object of strings) and "cwd" (string); an HTTP server has "url" (http or https) and
// optional "headers" (object of strings) and "type" ("http" or "streamable-http"; "sse", the
// older transport, is refused with a message). An optional "disabled": true (Claude Desktop's
// spelling) or "enabled": false is kept. Returns the servers in file order; on any error returns
// an empty list and sets *error to a message naming the server and the field.
QList<McpServerConfig> parseMcpServersJson(const QByteArray& json, QString* error);

// The same format back ({"mcpServers": {...}}): parseMcpServersJson(mcpServersJson(x)) == x.
QJsonObject mcpServersJson(const QList<McpServerConfig>& servers);

// The harmony namespace a server's tools live in: ASCII letters, digits and underscores (every
// other character becomes an underscore, runs collapsed), not starting with a digit, at most 64
// characters, never empty ("mcp") and never one of the names the format reserves ("functions",
// "python", "browser", ...; those get a "_mcp" suffix).
QString mcpNamespaceName(const QString& serverName);

bool operator==(const McpServerConfig& a, const McpServerConfig& b);

}  // namespace neural::toolhost
