// Settings > Tools (docs/DESKTOP.md "Tools"): the MCP servers (add, edit, remove; a stdio command
// with arguments and environment, or a Streamable HTTP URL with headers; "Import from JSON..."
// reads the mcpServers format of Claude Desktop, LM Studio and Jan from a file or pasted text)
// with each server's state (running and its tool count, starting, or its problem); python (off
// by default: interpreter, time and memory limits, the warning that code runs on this PC, the
// scratch folders); browser (off by default: search with a SearXNG URL, or with a search tool
// of one of the MCP servers); the limits of every call. OK
// saves (ToolSettings) and applies them (ToolManager::applySettings).
#pragma once

#include <QDialog>
#include <QList>

#include "mcpserverconfig.h"
#include "tools/toolsettings.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace neural::gui {

class ToolManager;

// One MCP server's fields (Add / Edit).
class McpServerDialog : public QDialog {
    Q_OBJECT
public:
    // `taken`: the names of the other servers (a name must be unique).
    McpServerDialog(const toolhost::McpServerConfig& config, QStringList taken,
                    QWidget* parent = nullptr);
    // The fields as a server; empty *error when they make one.
    toolhost::McpServerConfig config(QString* error) const;

    QLineEdit* nameEdit() const { return m_name; }
    QComboBox* transportBox() const { return m_transport; }
    QLineEdit* commandEdit() const { return m_command; }
    QLineEdit* argsEdit() const { return m_args; }
    QPlainTextEdit* envEdit() const { return m_env; }
    QLineEdit* urlEdit() const { return m_url; }
    QPlainTextEdit* headersEdit() const { return m_headers; }
    QLabel* errorLabel() const { return m_error; }

    void accept() override;

private:
    void updateTransport();
    QStringList m_taken;
    QLineEdit* m_name;
    QComboBox* m_transport;
    QLineEdit* m_command;
    QLineEdit* m_args;
    QPlainTextEdit* m_env;
    QLineEdit* m_cwd;
    QLineEdit* m_url;
    QPlainTextEdit* m_headers;
    QCheckBox* m_enabled;
    QLabel* m_error;
    QList<QWidget*> m_stdioRows, m_httpRows;
};

class ToolSettingsDialog : public QDialog {
    Q_OBJECT
public:
    explicit ToolSettingsDialog(ToolManager* tools, QWidget* parent = nullptr);

    // The settings as the page shows them.
    ToolSettings settings() const;
    const QList<toolhost::McpServerConfig>& servers() const { return m_servers; }
    // Adds the servers of an mcpServers JSON text, or of the file `text` names when it does not
    // start with "{" (a server of the same name is replaced). False with the reason in
    // importError() (a file that cannot be read, invalid JSON, a field of the wrong type).
    bool importServers(const QString& text);
    // Adds or replaces (same name) a server.
    void putServer(const toolhost::McpServerConfig& config);
    void removeServer(int row);
    // Saves and applies (OK does this, then accepts).
    void save();

    QListWidget* serverList() const { return m_list; }
    QLabel* importError() const { return m_importError; }
    QCheckBox* pythonBox() const { return m_python; }
    QLabel* pythonFound() const { return m_pythonFound; }
    QLineEdit* interpreterEdit() const { return m_interpreter; }
    QCheckBox* browserBox() const { return m_browser; }
    QLineEdit* searxngEdit() const { return m_searxng; }
    // Search with: 0 SearXNG, 1 an MCP server's tool (the server and the tool's name).
    QComboBox* searchWithBox() const { return m_searchWith; }
    QComboBox* searchServerBox() const { return m_searchServer; }
    QLineEdit* searchToolEdit() const { return m_searchTool; }
    QLabel* searchToolsLabel() const { return m_searchTools; }  // the chosen server's tools
    QLabel* errorLabel() const { return m_error; }
    // The state line of each server ("running: 11 tools", "problem: ...", "off").
    QString serverState(int row) const;

    void accept() override;

private:
    void refreshList();
    void checkInterpreter();
    void editServer(int row);
    void openImport();
    void updateSearchRows();

    ToolManager* m_tools;
    QList<toolhost::McpServerConfig> m_servers;
    QListWidget* m_list;
    QLabel* m_importError;
    QCheckBox* m_python;
    QLineEdit* m_interpreter;
    QLabel* m_pythonFound;
    QSpinBox* m_pythonTimeout;
    QSpinBox* m_pythonMemory;
    QCheckBox* m_browser;
    QLineEdit* m_searxng;
    QComboBox* m_searchWith;
    QComboBox* m_searchServer;
    QLineEdit* m_searchTool;
    QLabel* m_searchTools;
    QSpinBox* m_callTimeout;
    QSpinBox* m_maxResult;
    QLabel* m_error;
};

}  // namespace neural::gui
