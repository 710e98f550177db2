#include "tools/toolsettings.h"

#include <QJsonDocument>

#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/paths.h"

namespace neural::gui {

namespace {
namespace key {
constexpr const char* servers = "tools/mcpServers";  // mcpServers JSON text
constexpr const char* pythonEnabled = "tools/python/enabled";
constexpr const char* pythonInterpreter = "tools/python/interpreter";
constexpr const char* pythonTimeout = "tools/python/timeoutS";
constexpr const char* pythonMemory = "tools/python/memoryMiB";
constexpr const char* browserEnabled = "tools/browser/enabled";
constexpr const char* searxng = "tools/browser/searxngUrl";
constexpr const char* searchServer = "tools/browser/searchServer";
constexpr const char* searchTool = "tools/browser/searchTool";
constexpr const char* callTimeout = "tools/callTimeoutS";
constexpr const char* maxResult = "tools/maxResultKiB";
}  // namespace key
}  // namespace

toolhost::CallLimits ToolSettings::limits() const {
    toolhost::CallLimits l;
    l.timeoutMs = callTimeoutS * 1000;
    l.maxResultBytes = static_cast<qint64>(maxResultKiB) * 1024;
    return l;
}

ToolSettings ToolSettings::load() {
    const auto s = appSettings();
    ToolSettings t;
    const QByteArray json = s->value(key::servers).toString().toUtf8();
    if (!json.trimmed().isEmpty()) {
        QString error;
        t.servers = toolhost::parseMcpServersJson(json, &error);
        if (!error.isEmpty())
            spdlog::error("Settings > Tools: the MCP servers could not be read: {}",
                          error.toStdString());
    }
    t.pythonEnabled = s->value(key::pythonEnabled, false).toBool();
    t.pythonInterpreter = s->value(key::pythonInterpreter).toString();
    t.pythonTimeoutS = std::clamp(s->value(key::pythonTimeout, 30).toInt(), 1, 3600);
    t.pythonMemoryMiB = std::clamp(s->value(key::pythonMemory, 1024).toInt(), 64, 65536);
    t.browserEnabled = s->value(key::browserEnabled, false).toBool();
    t.searxngUrl = QUrl(s->value(key::searxng).toString());
    t.searchServer = s->value(key::searchServer).toString();
    t.searchTool = s->value(key::searchTool).toString();
    t.callTimeoutS = std::clamp(s->value(key::callTimeout, 60).toInt(), 1, 3600);
    t.maxResultKiB = std::clamp(s->value(key::maxResult, 64).toInt(), 1, 4096);
    return t;
}

void ToolSettings::save() const {
    const auto s = appSettings();
    s->setValue(key::servers,
                QString::fromUtf8(QJsonDocument(toolhost::mcpServersJson(servers)).toJson()));
    s->setValue(key::pythonEnabled, pythonEnabled);
    s->setValue(key::pythonInterpreter, pythonInterpreter);
    s->setValue(key::pythonTimeout, pythonTimeoutS);
    s->setValue(key::pythonMemory, pythonMemoryMiB);
    s->setValue(key::browserEnabled, browserEnabled);
    s->setValue(key::searxng, searxngUrl.toString());
    s->setValue(key::searchServer, searchServer);
    s->setValue(key::searchTool, searchTool);
    s->setValue(key::callTimeout, callTimeoutS);
    s->setValue(key::maxResult, maxResultKiB);
}

}  // namespace neural::gui
