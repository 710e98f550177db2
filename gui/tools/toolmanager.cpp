#include "tools/toolmanager.h"

#include <QDir>

#include <algorithm>

#include "common/paths.h"
#include "builtin/browsertool.h"
#include "builtin/pythontool.h"
#include "mcpprovider.h"

namespace neural::gui {

namespace {
QString builtinKey(const QString& name, qint64 conversation) {
    return QStringLiteral("%1/%2").arg(name).arg(conversation);
}
}  // namespace

ToolManager::ToolManager(QObject* parent) : QObject(parent) {
    m_factory = [this](const QString& name, qint64 conversation) -> toolhost::ToolProvider* {
        if (name == QLatin1String("python") && m_settings.pythonEnabled) {
            toolhost::PythonToolSettings p;
            p.interpreter = m_settings.pythonInterpreter;
            p.workDir = scratchFolder(conversation);
            p.timeoutMs = m_settings.pythonTimeoutS * 1000;
            p.memoryBytes = static_cast<qint64>(m_settings.pythonMemoryMiB) << 20;
            return new toolhost::PythonProvider(p);
        }
        if (name == QLatin1String("browser") && m_settings.browserEnabled) {
            toolhost::BrowserToolSettings b;
            b.searxngUrl = m_settings.searxngUrl;
            b.searchServer = m_settings.searchServer;
            b.searchTool = m_settings.searchTool;
            // The server as it runs at each search (applySettings may have replaced it).
            b.findServer = [this](const QString& server) -> toolhost::ToolProvider* {
                for (toolhost::ToolProvider* p : sharedProviders())
                    if (auto* mcp = qobject_cast<toolhost::McpProvider*>(p);
                        mcp && mcp->config().name == server)
                        return mcp;
                return nullptr;
            };
            return new toolhost::BrowserProvider(b);
        }
        return nullptr;
    };
}

void ToolManager::applySettings(const ToolSettings& settings) {
    m_settings = settings;
    m_limits = settings.limits();
    // Servers no longer configured as they run: stopped.
    for (toolhost::ToolProvider* p : sharedProviders()) {
        auto* mcp = qobject_cast<toolhost::McpProvider*>(p);
        if (!mcp) continue;
        const bool kept = std::any_of(
            settings.servers.begin(), settings.servers.end(),
            [mcp](const toolhost::McpServerConfig& c) { return c.enabled && c == mcp->config(); });
        if (!kept) {
            mcp->stop();
            removeProvider(mcp->name());
        }
    }
    // New or changed ones: started (changed() follows as each becomes ready or fails).
    for (const toolhost::McpServerConfig& c : settings.servers) {
        if (!c.enabled) continue;
        const QString ns = toolhost::mcpNamespaceName(c.name);
        if (auto* running = qobject_cast<toolhost::McpProvider*>(provider(ns, 0));
            running && running->config() == c) {
            // Unchanged: kept as it runs; one that is not running (it crashed, or failed to
            // start) is started again.
            if (!running->ready()) running->start();
            continue;
        }
        auto* mcp = new toolhost::McpProvider(c);
        addProvider(mcp);
        mcp->start();
    }
    // The built-ins are made again, with these settings, on their next use.
    for (const auto& p : std::as_const(m_builtins))
        if (p) p->deleteLater();
    m_builtins.clear();
    emit changed();
}

ToolManager::~ToolManager() = default;

void ToolManager::addProvider(toolhost::ToolProvider* provider) {
    if (!provider) return;
    removeProvider(provider->name());
    provider->setParent(this);
    m_shared.push_back(provider);
    connect(provider, &toolhost::ToolProvider::changed, this, &ToolManager::changed);
    emit changed();
}

void ToolManager::removeProvider(const QString& name) {
    for (qsizetype i = 0; i < m_shared.size(); ++i) {
        if (m_shared[i] && m_shared[i]->name() == name) {
            // Later: a running call's finished() may still be on its way out of it.
            m_shared[i]->disconnect(this);
            m_shared[i]->deleteLater();
            m_shared.removeAt(i);
            emit changed();
            return;
        }
    }
}

QList<toolhost::ToolProvider*> ToolManager::sharedProviders() const {
    QList<toolhost::ToolProvider*> out;
    for (const auto& p : m_shared)
        if (p) out.push_back(p);
    return out;
}

void ToolManager::setBuiltinFactory(BuiltinFactory factory) {
    m_factory = std::move(factory);
    for (const auto& p : std::as_const(m_builtins))
        if (p) p->deleteLater();
    m_builtins.clear();
    emit changed();
}

toolhost::ToolProvider* ToolManager::builtin(const QString& name, qint64 conversation) {
    const QString key = builtinKey(name, conversation);
    if (auto p = m_builtins.value(key)) return p;
    if (!m_factory) return nullptr;
    toolhost::ToolProvider* p = m_factory(name, conversation);
    if (!p) return nullptr;
    p->setParent(this);
    m_builtins.insert(key, p);
    connect(p, &toolhost::ToolProvider::changed, this, &ToolManager::changed);
    return p;
}

void ToolManager::dropBuiltins(qint64 conversation) {
    for (const QString& name : {QStringLiteral("python"), QStringLiteral("browser")}) {
        if (auto p = m_builtins.take(builtinKey(name, conversation))) {
            p->disconnect(this);
            p->deleteLater();
        }
    }
}

toolhost::ToolProvider* ToolManager::provider(const QString& ns, qint64 conversation) {
    if (ConversationTools::isBuiltin(ns)) return builtin(ns, conversation);
    for (const auto& p : std::as_const(m_shared))
        if (p && p->name() == ns) return p;
    return nullptr;
}

QStringList ToolManager::namespaces() const {
    QStringList out;
    for (const auto& p : m_shared)
        if (p) out.push_back(p->name());
    out << QStringLiteral("python") << QStringLiteral("browser");
    return out;
}

void ToolManager::turnNamespaces(const ConversationTools& tools, qint64 conversation,
                                 std::vector<chat::ToolNamespace>& system,
                                 std::vector<chat::ToolNamespace>& developer) {
    // harmony's order of the built-ins: browser, then python.
    for (const QString& name : {QStringLiteral("browser"), QStringLiteral("python")}) {
        if (!tools.enabled(name)) continue;
        toolhost::ToolProvider* p = builtin(name, conversation);
        if (p && p->ready()) system.push_back(p->toolNamespace());
    }
    for (const auto& p : std::as_const(m_shared)) {
        if (!p || !tools.enabled(p->name()) || !p->ready()) continue;
        chat::ToolNamespace ns = p->toolNamespace();
        if (!ns.tools.empty()) developer.push_back(std::move(ns));
    }
}

QString ToolManager::scratchFolder(qint64 conversation) {
    return QDir(appDataDir()).filePath(QStringLiteral("tools/python/%1").arg(conversation));
}

}  // namespace neural::gui
