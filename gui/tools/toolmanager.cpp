#include "tools/toolmanager.h"

#include <QDir>

#include "app/paths.h"

namespace neural::gui {

namespace {
QString builtinKey(const QString& name, qint64 conversation) {
    return QStringLiteral("%1/%2").arg(name).arg(conversation);
}
}  // namespace

ToolManager::ToolManager(QObject* parent) : QObject(parent) {}

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
