#include "settings/toolsettingsdialog.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDesktopServices>
#include <QDialogButtonBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QProcess>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QUrl>
#include <QVBoxLayout>

#include "common/paths.h"
#include "builtin/pythontool.h"
#include "mcpprovider.h"
#include "tool.h"
#include "tools/toolmanager.h"

namespace neural::gui {

namespace {
// "KEY=VALUE" (env) or "Name: value" (headers) lines <-> a map; `sep` splits at its first
// occurrence. A line without it is an error naming the line.
QMap<QString, QString> parseLines(const QString& text, QChar sep, QString* error) {
    QMap<QString, QString> out;
    const QStringList lines = text.split(QLatin1Char('\n'));
    for (int i = 0; i < lines.size(); ++i) {
        const QString line = lines[i].trimmed();
        if (line.isEmpty()) continue;
        const qsizetype at = line.indexOf(sep);
        if (at <= 0) {
            *error = McpServerDialog::tr("line %1 (\"%2\") has no \"%3\"")
                         .arg(i + 1)
                         .arg(line.left(40), QString(sep));
            return {};
        }
        out.insert(line.left(at).trimmed(), line.mid(at + 1).trimmed());
    }
    return out;
}

QString joinLines(const QMap<QString, QString>& map, const QString& sep) {
    QStringList lines;
    for (auto it = map.begin(); it != map.end(); ++it) lines << it.key() + sep + it.value();
    return lines.join(QLatin1Char('\n'));
}

// Arguments as one line; those with spaces or quotes in double quotes (QProcess::splitCommand
// reads it back).
QString joinArgs(const QStringList& args) {
    QStringList out;
    for (QString a : args) {
        if (a.isEmpty() || a.contains(QLatin1Char(' ')) || a.contains(QLatin1Char('"'))) {
            a.replace(QLatin1Char('"'), QStringLiteral("\"\"\""));
            a = QLatin1Char('"') + a + QLatin1Char('"');
        }
        out << a;
    }
    return out.join(QLatin1Char(' '));
}

QLabel* warningLabel(const QString& text, QWidget* parent) {
    auto* l = new QLabel(text, parent);
    l->setWordWrap(true);
    l->setStyleSheet(QStringLiteral("QLabel { color: #b9770e; }"));
    return l;
}
}  // namespace

// ---- one server ----------------------------------------------------------------------------

McpServerDialog::McpServerDialog(const toolhost::McpServerConfig& c, QStringList taken,
                                 QWidget* parent)
    : QDialog(parent), m_taken(std::move(taken)) {
    setWindowTitle(c.name.isEmpty() ? tr("Add an MCP server") : tr("Edit %1").arg(c.name));
    auto* form = new QFormLayout;
    m_name = new QLineEdit(c.name, this);
    m_name->setAccessibleName(tr("Server name"));
    m_name->setToolTip(tr("The model sees its tools under this name"));
    form->addRow(tr("&Name:"), m_name);
    m_transport = new QComboBox(this);
    m_transport->addItem(tr("Command on this PC (stdio)"));
    m_transport->addItem(tr("Streamable HTTP URL"));
    m_transport->setAccessibleName(tr("Transport"));
    m_transport->setCurrentIndex(c.transport == toolhost::McpServerConfig::Transport::http);
    form->addRow(tr("&Type:"), m_transport);
    m_command = new QLineEdit(c.command, this);
    m_command->setPlaceholderText(tr("e.g. npx"));
    m_command->setAccessibleName(tr("Command"));
    m_args = new QLineEdit(joinArgs(c.args), this);
    m_args->setPlaceholderText(tr("e.g. -y @modelcontextprotocol/server-filesystem C:\\Notes"));
    m_args->setAccessibleName(tr("Arguments"));
    m_env = new QPlainTextEdit(joinLines(c.env, QStringLiteral("=")), this);
    m_env->setPlaceholderText(tr("KEY=VALUE, one a line"));
    m_env->setAccessibleName(tr("Environment"));
    m_env->setMaximumHeight(70);
    m_cwd = new QLineEdit(c.workingDirectory, this);
    m_cwd->setPlaceholderText(tr("the app's"));
    m_cwd->setAccessibleName(tr("Working folder"));
    m_url = new QLineEdit(c.url.toString(), this);
    m_url->setPlaceholderText(tr("https://example.com/mcp"));
    m_url->setAccessibleName(tr("Server URL"));
    m_headers = new QPlainTextEdit(joinLines(c.headers, QStringLiteral(": ")), this);
    m_headers->setPlaceholderText(tr("Name: value, one a line (e.g. Authorization: Bearer ...)"));
    m_headers->setAccessibleName(tr("HTTP headers"));
    m_headers->setMaximumHeight(70);
    form->addRow(tr("&Command:"), m_command);
    form->addRow(tr("&Arguments:"), m_args);
    form->addRow(tr("&Environment:"), m_env);
    form->addRow(tr("&Working folder:"), m_cwd);
    form->addRow(tr("&URL:"), m_url);
    form->addRow(tr("&Headers:"), m_headers);
    m_stdioRows = {m_command, m_args, m_env, m_cwd};
    m_httpRows = {m_url, m_headers};
    m_enabled = new QCheckBox(tr("Start this server"), this);
    m_enabled->setChecked(c.enabled);
    m_enabled->setAccessibleName(tr("Server enabled"));
    form->addRow(QString(), m_enabled);
    m_error = new QLabel(this);
    m_error->setWordWrap(true);
    m_error->setStyleSheet(QStringLiteral("QLabel { color: #c0392b; }"));
    m_error->setAccessibleName(tr("Server error"));
    m_error->hide();
    auto* box = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    connect(box, &QDialogButtonBox::accepted, this, &McpServerDialog::accept);
    connect(box, &QDialogButtonBox::rejected, this, &QDialog::reject);
    auto* v = new QVBoxLayout(this);
    v->addLayout(form);
    v->addWidget(m_error);
    v->addWidget(box);
    connect(m_transport, &QComboBox::currentIndexChanged, this, &McpServerDialog::updateTransport);
    updateTransport();
}

void McpServerDialog::updateTransport() {
    const bool http = m_transport->currentIndex() == 1;
    auto* form = qobject_cast<QFormLayout*>(layout()->itemAt(0)->layout());
    for (QWidget* w : m_stdioRows) {
        w->setVisible(!http);
        if (QWidget* l = form ? form->labelForField(w) : nullptr) l->setVisible(!http);
    }
    for (QWidget* w : m_httpRows) {
        w->setVisible(http);
        if (QWidget* l = form ? form->labelForField(w) : nullptr) l->setVisible(http);
    }
}

toolhost::McpServerConfig McpServerDialog::config(QString* error) const {
    toolhost::McpServerConfig c;
    error->clear();
    c.name = m_name->text().trimmed();
    c.enabled = m_enabled->isChecked();
    if (c.name.isEmpty()) {
        *error = tr("The server needs a name.");
        return c;
    }
    if (m_taken.contains(c.name)) {
        *error = tr("There is already a server named \"%1\".").arg(c.name);
        return c;
    }
    if (m_transport->currentIndex() == 1) {
        c.transport = toolhost::McpServerConfig::Transport::http;
        c.url = QUrl(m_url->text().trimmed());
        if (!c.url.isValid() ||
            (c.url.scheme() != QLatin1String("http") && c.url.scheme() != QLatin1String("https"))) {
            *error = tr("The URL must be an http:// or https:// address.");
            return c;
        }
        QString why;
        c.headers = parseLines(m_headers->toPlainText(), QLatin1Char(':'), &why);
        if (!why.isEmpty()) *error = tr("Headers: %1").arg(why);
        return c;
    }
    c.command = m_command->text().trimmed();
    if (c.command.isEmpty()) {
        *error = tr("The server needs a command.");
        return c;
    }
    c.args = QProcess::splitCommand(m_args->text());
    c.workingDirectory = m_cwd->text().trimmed();
    QString why;
    c.env = parseLines(m_env->toPlainText(), QLatin1Char('='), &why);
    if (!why.isEmpty()) *error = tr("Environment: %1").arg(why);
    return c;
}

void McpServerDialog::accept() {
    QString error;
    config(&error);
    m_error->setText(error);
    m_error->setVisible(!error.isEmpty());
    if (error.isEmpty()) QDialog::accept();
}

// ---- the page ------------------------------------------------------------------------------

ToolSettingsDialog::ToolSettingsDialog(ToolManager* tools, QWidget* parent)
    : QDialog(parent), m_tools(tools) {
    setWindowTitle(tr("Tools"));
    setAccessibleName(tr("Tool settings"));
    const ToolSettings s = tools->settings();
    m_servers = s.servers;
    auto* v = new QVBoxLayout(this);

    auto* mcp = new QGroupBox(tr("MCP servers"), this);
    auto* mv = new QVBoxLayout(mcp);
    auto* intro = new QLabel(tr("Each server's tools are offered to the model under the server's "
                                "name; every call waits for your Run in the conversation."),
                             mcp);
    intro->setWordWrap(true);
    mv->addWidget(intro);
    m_list = new QListWidget(mcp);
    m_list->setAccessibleName(tr("MCP servers"));
    mv->addWidget(m_list);
    auto* row = new QHBoxLayout;
    auto* add = new QPushButton(tr("Add..."), mcp);
    auto* edit = new QPushButton(tr("Edit..."), mcp);
    auto* remove = new QPushButton(tr("Remove"), mcp);
    auto* import = new QPushButton(tr("Import from JSON..."), mcp);
    import->setToolTip(
        tr("The mcpServers JSON of Claude Desktop, LM Studio or Jan: a file or "
           "pasted text"));
    add->setAccessibleName(tr("Add an MCP server"));
    edit->setAccessibleName(tr("Edit the MCP server"));
    remove->setAccessibleName(tr("Remove the MCP server"));
    import->setAccessibleName(tr("Import MCP servers from JSON"));
    for (QPushButton* b : {add, edit, remove, import}) row->addWidget(b);
    row->addStretch(1);
    mv->addLayout(row);
    m_importError = new QLabel(mcp);
    m_importError->setWordWrap(true);
    m_importError->setStyleSheet(QStringLiteral("QLabel { color: #c0392b; }"));
    m_importError->setAccessibleName(tr("Import error"));
    m_importError->hide();
    mv->addWidget(m_importError);
    v->addWidget(mcp);
    connect(add, &QPushButton::clicked, this, [this] { editServer(-1); });
    connect(edit, &QPushButton::clicked, this, [this] { editServer(m_list->currentRow()); });
    connect(m_list, &QListWidget::itemDoubleClicked, this,
            [this] { editServer(m_list->currentRow()); });
    connect(remove, &QPushButton::clicked, this, [this] { removeServer(m_list->currentRow()); });
    connect(import, &QPushButton::clicked, this, &ToolSettingsDialog::openImport);

    auto* py = new QGroupBox(tr("Python (gpt-oss's built-in tool)"), this);
    auto* pf = new QFormLayout(py);
    m_python = new QCheckBox(tr("Let conversations use python"), py);
    m_python->setChecked(s.pythonEnabled);
    m_python->setAccessibleName(tr("Python available"));
    pf->addRow(m_python);
    pf->addRow(warningLabel(
        tr("Code that the model writes runs on this PC, as you: in a separate process with the "
           "time and memory limits below, without network where the system allows it, in a "
           "scratch folder per conversation. Each conversation turns python on for itself, and "
           "every call waits for your Run."),
        py));
    m_interpreter = new QLineEdit(s.pythonInterpreter, py);
    m_interpreter->setPlaceholderText(tr("found on PATH"));
    m_interpreter->setAccessibleName(tr("Python interpreter"));
    pf->addRow(tr("&Interpreter:"), m_interpreter);
    m_pythonFound = new QLabel(py);
    m_pythonFound->setWordWrap(true);
    m_pythonFound->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_pythonFound->setAccessibleName(tr("Python found"));
    pf->addRow(QString(), m_pythonFound);
    m_pythonTimeout = new QSpinBox(py);
    m_pythonTimeout->setRange(1, 3600);
    m_pythonTimeout->setSuffix(tr(" s"));
    m_pythonTimeout->setValue(s.pythonTimeoutS);
    m_pythonTimeout->setAccessibleName(tr("Python time limit"));
    pf->addRow(tr("&Time limit per call:"), m_pythonTimeout);
    m_pythonMemory = new QSpinBox(py);
    m_pythonMemory->setRange(64, 65536);
    m_pythonMemory->setSuffix(tr(" MiB"));
    m_pythonMemory->setValue(s.pythonMemoryMiB);
    m_pythonMemory->setAccessibleName(tr("Python memory limit"));
    pf->addRow(tr("&Memory limit:"), m_pythonMemory);
    auto* scratch = new QPushButton(tr("Open the scratch folders"), py);
    scratch->setAccessibleName(tr("Open python's scratch folders"));
    pf->addRow(QString(), scratch);
    connect(scratch, &QPushButton::clicked, this, [] {
        const QString dir = QDir(appDataDir()).filePath(QStringLiteral("tools/python"));
        QDir().mkpath(dir);
        QDesktopServices::openUrl(QUrl::fromLocalFile(dir));
    });
    connect(m_interpreter, &QLineEdit::editingFinished, this,
            &ToolSettingsDialog::checkInterpreter);
    connect(m_python, &QCheckBox::toggled, this, &ToolSettingsDialog::checkInterpreter);
    v->addWidget(py);

    auto* br = new QGroupBox(tr("Browser (gpt-oss's built-in tool)"), this);
    auto* bf = new QFormLayout(br);
    m_browser = new QCheckBox(tr("Let conversations use the browser (search, open, find)"), br);
    m_browser->setChecked(s.browserEnabled);
    m_browser->setAccessibleName(tr("Browser available"));
    bf->addRow(m_browser);
    m_searchWith = new QComboBox(br);
    m_searchWith->addItems({tr("SearXNG"), tr("A search tool of an MCP server")});
    m_searchWith->setAccessibleName(tr("Search with"));
    m_searchWith->setCurrentIndex(s.searchServer.isEmpty() ? 0 : 1);
    bf->addRow(tr("Search &with:"), m_searchWith);
    m_searxng = new QLineEdit(s.searxngUrl.toString(), br);
    m_searxng->setPlaceholderText(tr("e.g. http://127.0.0.1:8888 (without one, search is off)"));
    m_searxng->setAccessibleName(tr("SearXNG URL"));
    bf->addRow(tr("&SearXNG URL:"), m_searxng);
    m_searchServer = new QComboBox(br);
    m_searchServer->setAccessibleName(tr("Search server"));
    m_searchServer->setToolTip(tr("One of the MCP servers above"));
    bf->addRow(tr("Search se&rver:"), m_searchServer);
    m_searchTool = new QLineEdit(s.searchTool, br);
    m_searchTool->setPlaceholderText(tr("the server's search tool, e.g. web_search"));
    m_searchTool->setAccessibleName(tr("Search tool"));
    bf->addRow(tr("Search &tool:"), m_searchTool);
    m_searchTools = new QLabel(br);
    m_searchTools->setWordWrap(true);
    m_searchTools->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_searchTools->setAccessibleName(tr("The search server's tools"));
    bf->addRow(QString(), m_searchTools);
    m_searchServer->addItem(s.searchServer);  // refreshList fills in the others
    connect(m_searchWith, &QComboBox::currentIndexChanged, this,
            &ToolSettingsDialog::updateSearchRows);
    connect(m_searchServer, &QComboBox::currentIndexChanged, this,
            &ToolSettingsDialog::updateSearchRows);
    v->addWidget(br);

    auto* lim = new QGroupBox(tr("Every call"), this);
    auto* lf = new QFormLayout(lim);
    m_callTimeout = new QSpinBox(lim);
    m_callTimeout->setRange(1, 3600);
    m_callTimeout->setSuffix(tr(" s"));
    m_callTimeout->setValue(s.callTimeoutS);
    m_callTimeout->setAccessibleName(tr("Call time limit"));
    lf->addRow(tr("Time &limit:"), m_callTimeout);
    m_maxResult = new QSpinBox(lim);
    m_maxResult->setRange(1, 4096);
    m_maxResult->setSuffix(tr(" KiB"));
    m_maxResult->setValue(s.maxResultKiB);
    m_maxResult->setAccessibleName(tr("Largest result"));
    m_maxResult->setToolTip(tr("A longer result is cut, with a note to the model"));
    lf->addRow(tr("Largest &result:"), m_maxResult);
    v->addWidget(lim);

    m_error = new QLabel(this);
    m_error->setStyleSheet(QStringLiteral("QLabel { color: #c0392b; }"));
    m_error->setAccessibleName(tr("Settings error"));
    m_error->hide();
    v->addWidget(m_error);
    auto* box = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    connect(box, &QDialogButtonBox::accepted, this, &ToolSettingsDialog::accept);
    connect(box, &QDialogButtonBox::rejected, this, &QDialog::reject);
    v->addWidget(box);

    connect(m_tools, &ToolManager::changed, this, &ToolSettingsDialog::refreshList);
    refreshList();
    updateSearchRows();
    checkInterpreter();
}

QString ToolSettingsDialog::serverState(int row) const {
    if (row < 0 || row >= m_servers.size()) return {};
    const toolhost::McpServerConfig& c = m_servers[row];
    if (!c.enabled) return tr("off");
    toolhost::ToolProvider* p = m_tools->provider(toolhost::mcpNamespaceName(c.name), 0);
    auto* mcp = qobject_cast<toolhost::McpProvider*>(p);
    if (!mcp || !(mcp->config() == c)) return tr("starts when you press OK");
    if (mcp->ready())
        return tr("running: %n tool(s)", nullptr, static_cast<int>(mcp->toolNames().size()));
    return tr("problem: %1").arg(mcp->problem());
}

void ToolSettingsDialog::refreshList() {
    const int current = m_list->currentRow();
    m_list->clear();
    for (int i = 0; i < m_servers.size(); ++i) {
        const toolhost::McpServerConfig& c = m_servers[i];
        const QString what = c.transport == toolhost::McpServerConfig::Transport::http
                                 ? c.url.toString()
                                 : (QStringList{c.command} + c.args).join(QLatin1Char(' '));
        m_list->addItem(tr("%1 \u2014 %2\n    %3").arg(c.name, serverState(i), what));
    }
    m_list->setCurrentRow(std::min(current, static_cast<int>(m_servers.size()) - 1));
    // The browser's search server: one of these.
    const QString chosen = m_searchServer->currentText();
    const QSignalBlocker block(m_searchServer);
    m_searchServer->clear();
    for (const toolhost::McpServerConfig& c : std::as_const(m_servers))
        m_searchServer->addItem(c.name);
    m_searchServer->setCurrentIndex(m_searchServer->findText(chosen));
    updateSearchRows();
}

void ToolSettingsDialog::updateSearchRows() {
    const bool mcp = m_searchWith->currentIndex() == 1;
    auto* form = qobject_cast<QFormLayout*>(m_searxng->parentWidget()->layout());
    const auto show = [form](QWidget* w, bool visible) {
        w->setVisible(visible);
        if (QWidget* l = form ? form->labelForField(w) : nullptr) l->setVisible(visible);
    };
    show(m_searxng, !mcp);
    show(m_searchServer, mcp);
    show(m_searchTool, mcp);
    show(m_searchTools, mcp);
    if (!mcp) return;
    // The chosen server's tools, when it runs, so the user can pick the search tool's name.
    const QString server = m_searchServer->currentText();
    auto* running = qobject_cast<toolhost::McpProvider*>(
        m_tools->provider(toolhost::mcpNamespaceName(server), 0));
    if (m_servers.isEmpty())
        m_searchTools->setText(tr("Add the MCP search server above first."));
    else if (server.isEmpty())
        m_searchTools->setText(tr("Choose the server."));
    else if (running && running->ready())
        m_searchTools->setText(
            tr("Its tools: %1").arg(running->toolNames().join(QStringLiteral(", "))));
    else
        m_searchTools->setText(tr("Its tools show here once it runs (press OK to start it)."));
}

void ToolSettingsDialog::checkInterpreter() {
    if (!m_python->isChecked()) {
        m_pythonFound->setText(tr("Off: no conversation can run python."));
        return;
    }
    QString why;
    const QString found =
        toolhost::PythonProvider::findInterpreter(m_interpreter->text().trimmed(), &why);
    m_pythonFound->setText(found.isEmpty() ? tr("No Python found: %1").arg(why)
                                           : tr("Uses %1").arg(QDir::toNativeSeparators(found)));
}

void ToolSettingsDialog::putServer(const toolhost::McpServerConfig& config) {
    for (toolhost::McpServerConfig& c : m_servers) {
        if (c.name == config.name) {
            c = config;
            refreshList();
            return;
        }
    }
    m_servers.push_back(config);
    refreshList();
}

void ToolSettingsDialog::removeServer(int row) {
    if (row < 0 || row >= m_servers.size()) return;
    m_servers.removeAt(row);
    refreshList();
}

void ToolSettingsDialog::editServer(int row) {
    const bool adding = row < 0 || row >= m_servers.size();
    QStringList taken;
    for (int i = 0; i < m_servers.size(); ++i)
        if (i != row || adding) taken << m_servers[i].name;
    McpServerDialog d(adding ? toolhost::McpServerConfig{} : m_servers[row], taken, this);
    if (d.exec() != QDialog::Accepted) return;
    QString error;
    const toolhost::McpServerConfig c = d.config(&error);
    if (!error.isEmpty()) return;
    if (adding)
        m_servers.push_back(c);
    else
        m_servers[row] = c;
    refreshList();
}

bool ToolSettingsDialog::importServers(const QString& text) {
    QByteArray json = text.trimmed().toUtf8();
    QString source = tr("the pasted text");
    if (!json.startsWith('{')) {
        // A path (a file dropped in, or chosen with Open file...).
        QFile f(text.trimmed());
        source = QDir::toNativeSeparators(text.trimmed());
        if (!f.open(QIODevice::ReadOnly)) {
            m_importError->setText(tr("Cannot read %1: %2").arg(source, f.errorString()));
            m_importError->show();
            return false;
        }
        json = f.read(4 << 20);
    }
    QString error;
    const QList<toolhost::McpServerConfig> servers = toolhost::parseMcpServersJson(json, &error);
    if (!error.isEmpty() || servers.isEmpty()) {
        m_importError->setText(
            tr("Nothing imported from %1: %2")
                .arg(source, error.isEmpty() ? tr("it names no server") : error));
        m_importError->show();
        return false;
    }
    for (const toolhost::McpServerConfig& c : servers) putServer(c);
    m_importError->hide();
    return true;
}

void ToolSettingsDialog::openImport() {
    QDialog d(this);
    d.setWindowTitle(tr("Import MCP servers"));
    auto* v = new QVBoxLayout(&d);
    auto* hint = new QLabel(tr("Paste the JSON (a file with \"mcpServers\", as Claude Desktop, LM "
                               "Studio and Jan write it), or open the file."),
                            &d);
    hint->setWordWrap(true);
    auto* text = new QPlainTextEdit(&d);
    text->setAccessibleName(tr("MCP servers JSON"));
    auto* open = new QPushButton(tr("Open file..."), &d);
    auto* box = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, &d);
    box->button(QDialogButtonBox::Ok)->setText(tr("Import"));
    v->addWidget(hint);
    v->addWidget(text);
    v->addWidget(open);
    v->addWidget(box);
    QString path;
    connect(open, &QPushButton::clicked, &d, [&] {
        path = QFileDialog::getOpenFileName(&d, tr("MCP servers JSON"), QString(),
                                            tr("JSON (*.json);;All files (*)"));
        if (!path.isEmpty()) d.accept();
    });
    connect(box, &QDialogButtonBox::accepted, &d, &QDialog::accept);
    connect(box, &QDialogButtonBox::rejected, &d, &QDialog::reject);
    if (d.exec() != QDialog::Accepted) return;
    importServers(path.isEmpty() ? text->toPlainText() : path);
}

ToolSettings ToolSettingsDialog::settings() const {
    ToolSettings s;
    s.servers = m_servers;
    s.pythonEnabled = m_python->isChecked();
    s.pythonInterpreter = m_interpreter->text().trimmed();
    s.pythonTimeoutS = m_pythonTimeout->value();
    s.pythonMemoryMiB = m_pythonMemory->value();
    s.browserEnabled = m_browser->isChecked();
    s.searxngUrl = QUrl(m_searxng->text().trimmed());
    if (m_searchWith->currentIndex() == 1) {
        s.searchServer = m_searchServer->currentText();
        s.searchTool = m_searchTool->text().trimmed();
    }
    s.callTimeoutS = m_callTimeout->value();
    s.maxResultKiB = m_maxResult->value();
    return s;
}

void ToolSettingsDialog::save() {
    const ToolSettings s = settings();
    s.save();
    m_tools->applySettings(s);
}

void ToolSettingsDialog::accept() {
    const QUrl url(m_searxng->text().trimmed());
    if (!m_searxng->text().trimmed().isEmpty() &&
        (!url.isValid() ||
         (url.scheme() != QLatin1String("http") && url.scheme() != QLatin1String("https")))) {
        m_error->setText(tr("The SearXNG URL must be an http:// or https:// address."));
        m_error->show();
        return;
    }
    if (m_searchWith->currentIndex() == 1 &&
        (m_searchServer->currentText().isEmpty() || m_searchTool->text().trimmed().isEmpty())) {
        m_error->setText(
            tr("The browser searches with an MCP server: choose the server and "
               "name its search tool."));
        m_error->show();
        return;
    }
    m_error->hide();
    save();
    QDialog::accept();
}

}  // namespace neural::gui
