#include "mcpserverconfig.h"

#include <QJsonArray>

#include <nlohmann/json.hpp>

namespace neural::toolhost {

namespace {

using ojson = nlohmann::ordered_json;

QString q(const std::string& s) { return QString::fromStdString(s); }

const char* typeName(const ojson& v) { return v.type_name(); }

// Reads an optional object of strings ("env", "headers") into `out`.
bool readStringMap(const ojson& server, const char* field, const QString& name,
                   QMap<QString, QString>* out, QString* error) {
    const auto it = server.find(field);
    if (it == server.end() || it->is_null()) return true;
    if (!it->is_object()) {
        *error = QStringLiteral("server \"%1\": \"%2\" must be an object of strings, not %3")
                     .arg(name, QLatin1String(field), QLatin1String(typeName(*it)));
        return false;
    }
    for (const auto& [key, value] : it->items()) {
        if (!value.is_string()) {
            *error = QStringLiteral("server \"%1\": \"%2\".\"%3\" must be a string, not %4")
                         .arg(name, QLatin1String(field), q(key), QLatin1String(typeName(value)));
            return false;
        }
        out->insert(q(key), q(value.get<std::string>()));
    }
    return true;
}

bool readServer(const std::string& key, const ojson& server, McpServerConfig* out, QString* error) {
    const QString name = q(key);
    if (name.trimmed().isEmpty()) {
        *error = QStringLiteral("a server has an empty name");
        return false;
    }
    if (!server.is_object()) {
        *error = QStringLiteral("server \"%1\": must be an object, not %2")
                     .arg(name, QLatin1String(typeName(server)));
        return false;
    }
    McpServerConfig c;
    c.name = name;
    const auto str = [&](const char* field, QString* value) {
        const auto it = server.find(field);
        if (it == server.end() || it->is_null()) return true;
        if (!it->is_string()) {
            *error = QStringLiteral("server \"%1\": \"%2\" must be a string, not %3")
                         .arg(name, QLatin1String(field), QLatin1String(typeName(*it)));
            return false;
        }
        *value = q(it->get<std::string>());
        return true;
    };
    QString type, url;
    if (!str("type", &type) || !str("command", &c.command) || !str("url", &url) ||
        !str("cwd", &c.workingDirectory))
        return false;
    if (const auto it = server.find("disabled"); it != server.end() && !it->is_null()) {
        if (!it->is_boolean()) {
            *error = QStringLiteral("server \"%1\": \"disabled\" must be true or false").arg(name);
            return false;
        }
        c.enabled = !it->get<bool>();
    }
    if (const auto it = server.find("enabled"); it != server.end() && !it->is_null()) {
        if (!it->is_boolean()) {
            *error = QStringLiteral("server \"%1\": \"enabled\" must be true or false").arg(name);
            return false;
        }
        c.enabled = it->get<bool>();
    }
    if (type == QLatin1String("sse")) {
        *error = QStringLiteral(
                     "server \"%1\": the \"sse\" transport (HTTP+SSE, MCP 2024-11-05) is not "
                     "supported; use the server's Streamable HTTP endpoint (\"type\": \"http\")")
                     .arg(name);
        return false;
    }
    if (!type.isEmpty() && type != QLatin1String("http") &&
        type != QLatin1String("streamable-http") && type != QLatin1String("streamableHttp") &&
        type != QLatin1String("stdio")) {
        *error = QStringLiteral(
                     "server \"%1\": unknown \"type\" \"%2\" (expected \"stdio\", \"http\" or "
                     "\"streamable-http\")")
                     .arg(name, type);
        return false;
    }
    const bool wantsHttp = !url.isEmpty() || (!type.isEmpty() && type != QLatin1String("stdio"));
    if (wantsHttp) {
        if (!c.command.isEmpty()) {
            *error = QStringLiteral("server \"%1\": has both \"command\" and \"url\"; give one")
                         .arg(name);
            return false;
        }
        if (url.isEmpty()) {
            *error = QStringLiteral("server \"%1\": an HTTP server needs a \"url\"").arg(name);
            return false;
        }
        c.transport = McpServerConfig::Transport::http;
        c.url = QUrl(url, QUrl::StrictMode);
        const QString scheme = c.url.scheme().toLower();
        if (!c.url.isValid() || c.url.host().isEmpty() ||
            (scheme != QLatin1String("http") && scheme != QLatin1String("https"))) {
            *error =
                QStringLiteral("server \"%1\": \"url\" is not an http(s) URL: %2").arg(name, url);
            return false;
        }
        if (!readStringMap(server, "headers", name, &c.headers, error)) return false;
    } else {
        if (c.command.trimmed().isEmpty()) {
            *error =
                QStringLiteral("server \"%1\": needs a \"command\" (stdio) or a \"url\" (HTTP)")
                    .arg(name);
            return false;
        }
        c.transport = McpServerConfig::Transport::stdio;
        if (const auto it = server.find("args"); it != server.end() && !it->is_null()) {
            if (!it->is_array()) {
                *error =
                    QStringLiteral("server \"%1\": \"args\" must be an array of strings, not %2")
                        .arg(name, QLatin1String(typeName(*it)));
                return false;
            }
            for (std::size_t i = 0; i < it->size(); ++i) {
                const ojson& a = (*it)[i];
                if (!a.is_string()) {
                    *error = QStringLiteral("server \"%1\": \"args\"[%2] must be a string, not %3")
                                 .arg(name)
                                 .arg(i)
                                 .arg(QLatin1String(typeName(a)));
                    return false;
                }
                c.args << q(a.get<std::string>());
            }
        }
        if (!readStringMap(server, "env", name, &c.env, error)) return false;
    }
    *out = std::move(c);
    return true;
}

}  // namespace

QList<McpServerConfig> parseMcpServersJson(const QByteArray& json, QString* error) {
    QString ignored;
    if (error == nullptr) error = &ignored;
    error->clear();
    ojson doc;
    try {
        doc = ojson::parse(json.constData(), json.constData() + json.size());
    } catch (const ojson::parse_error& e) {
        // "[json.exception.parse_error.101] parse error at line 1, ...": keep from "parse error".
        QString what = QString::fromUtf8(e.what());
        const int at = what.indexOf(QLatin1String("] "));
        if (at >= 0) what = what.mid(at + 2);
        *error = QStringLiteral("not valid JSON: %1").arg(what);
        return {};
    }
    if (!doc.is_object()) {
        *error = QStringLiteral("expected a JSON object with \"mcpServers\", not %1")
                     .arg(QLatin1String(doc.type_name()));
        return {};
    }
    const ojson* servers = &doc;
    if (const auto it = doc.find("mcpServers"); it != doc.end()) {
        if (!it->is_object()) {
            *error = QStringLiteral("\"mcpServers\" must be an object of servers, not %1")
                         .arg(QLatin1String(it->type_name()));
            return {};
        }
        servers = &*it;
    }
    QList<McpServerConfig> out;
    for (const auto& [key, value] : servers->items()) {
        McpServerConfig c;
        if (!readServer(key, value, &c, error)) return {};
        out << c;
    }
    return out;
}

QJsonObject mcpServersJson(const QList<McpServerConfig>& servers) {
    QJsonObject all;
    for (const McpServerConfig& c : servers) {
        QJsonObject s;
        if (c.transport == McpServerConfig::Transport::stdio) {
            s.insert(QStringLiteral("command"), c.command);
            if (!c.args.isEmpty())
                s.insert(QStringLiteral("args"), QJsonArray::fromStringList(c.args));
            if (!c.env.isEmpty()) {
                QJsonObject env;
                for (auto it = c.env.cbegin(); it != c.env.cend(); ++it)
                    env.insert(it.key(), it.value());
                s.insert(QStringLiteral("env"), env);
            }
            if (!c.workingDirectory.isEmpty()) s.insert(QStringLiteral("cwd"), c.workingDirectory);
        } else {
            s.insert(QStringLiteral("type"), QStringLiteral("http"));
            s.insert(QStringLiteral("url"), c.url.toString());
            if (!c.headers.isEmpty()) {
                QJsonObject headers;
                for (auto it = c.headers.cbegin(); it != c.headers.cend(); ++it)
                    headers.insert(it.key(), it.value());
                s.insert(QStringLiteral("headers"), headers);
            }
        }
        if (!c.enabled) s.insert(QStringLiteral("disabled"), true);
        all.insert(c.name, s);
    }
    return QJsonObject{{QStringLiteral("mcpServers"), all}};
}

QString mcpNamespaceName(const QString& serverName) {
    QString out;
    bool underscore = false;
    for (const QChar ch : serverName) {
        const char16_t c = ch.unicode();
        const bool keep =
            (c >= u'a' && c <= u'z') || (c >= u'A' && c <= u'Z') || (c >= u'0' && c <= u'9');
        if (keep) {
            out += ch;
            underscore = false;
        } else if (!underscore) {
            out += QLatin1Char('_');
            underscore = true;
        }
    }
    while (out.startsWith(QLatin1Char('_'))) out.remove(0, 1);
    while (out.endsWith(QLatin1Char('_'))) out.chop(1);
    if (out.isEmpty()) return QStringLiteral("mcp");
    if (out.front().isDigit()) out.prepend(QLatin1String("mcp_"));
    if (out.size() > 60) out.truncate(60);
    while (out.endsWith(QLatin1Char('_'))) out.chop(1);
    // Names the chat format gives a meaning: the function namespace, the built-in tools, the
    // roles and the "all" recipient.
    static const QStringList reserved = {
        QStringLiteral("functions"), QStringLiteral("python"),        QStringLiteral("browser"),
        QStringLiteral("container"), QStringLiteral("assistant"),     QStringLiteral("user"),
        QStringLiteral("system"),    QStringLiteral("developer"),     QStringLiteral("tool"),
        QStringLiteral("all"),       QStringLiteral("multi_tool_use")};
    if (reserved.contains(out, Qt::CaseInsensitive)) out += QLatin1String("_mcp");
    return out;
}

bool operator==(const McpServerConfig& a, const McpServerConfig& b) {
    return a.name == b.name && a.transport == b.transport && a.command == b.command &&
           a.args == b.args && a.env == b.env && a.workingDirectory == b.workingDirectory &&
           a.url == b.url && a.headers == b.headers && a.enabled == b.enabled;
}

}  // namespace neural::toolhost
