#include "mcpprovider.h"

#include <algorithm>

#include "mcphttptransport.h"
#include "mcpstdiotransport.h"

#ifndef NEURAL_MCP_CLIENT_VERSION
#define NEURAL_MCP_CLIENT_VERSION "0"
#endif

namespace neural::toolhost {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

QString seconds(int ms) { return QString::number(ms / 1000.0, 'g', 3) + QStringLiteral(" s"); }

QString byteSize(qint64 bytes) {
    if (bytes < 1024) return QStringLiteral("%1 bytes").arg(bytes);
    if (bytes < 1024 * 1024)
        return QStringLiteral("%1 KB").arg(QString::number(bytes / 1024.0, 'f', 1));
    return QStringLiteral("%1 MB").arg(QString::number(bytes / (1024.0 * 1024.0), 'f', 1));
}

QString str(const Json& object, const char* key) {
    if (!object.is_object()) return {};
    const auto it = object.find(key);
    return it != object.end() && it->is_string() ? q(it->get<std::string>()) : QString();
}

int depth(const Json& j, int limit) {
    if (limit <= 0) return 1;
    int deepest = 0;
    if (j.is_object() || j.is_array())
        for (const Json& child : j) deepest = std::max(deepest, depth(child, limit - 1));
    return (j.is_object() || j.is_array()) ? deepest + 1 : 0;
}

// The size of base64 data, decoded.
qint64 base64Bytes(const QString& data) {
    qint64 n = data.size() * 3 / 4;
    if (data.endsWith(QLatin1String("==")))
        n -= 2;
    else if (data.endsWith(QLatin1Char('=')))
        n -= 1;
    return std::max<qint64>(n, 0);
}

}  // namespace

bool mcpResultText(const Json& result, QString* text, bool* isError, QString* error) {
    *isError = false;
    text->clear();
    if (!result.is_object()) {
        *error = QStringLiteral("the result is %1, not an object")
                     .arg(QLatin1String(result.type_name()));
        return false;
    }
    if (const auto it = result.find("isError"); it != result.end() && !it->is_null()) {
        if (!it->is_boolean()) {
            *error = QStringLiteral("\"isError\" is not true or false");
            return false;
        }
        *isError = it->get<bool>();
    }
    const auto structured = result.find("structuredContent");
    const auto content = result.find("content");
    if (content == result.end() || content->is_null()) {
        if (structured != result.end()) {
            *text = q(structured->dump(-1, ' ', false, Json::error_handler_t::replace));
            return true;
        }
        *error = QStringLiteral("the result has no \"content\"");
        return false;
    }
    if (!content->is_array()) {
        *error = QStringLiteral("\"content\" is %1, not an array")
                     .arg(QLatin1String(content->type_name()));
        return false;
    }
    QStringList parts;
    for (std::size_t i = 0; i < content->size(); ++i) {
        const Json& item = (*content)[i];
        const QString type = str(item, "type");
        if (type.isEmpty()) {
            *error = QStringLiteral("content item %1 has no \"type\"").arg(i);
            return false;
        }
        if (type == QLatin1String("text")) {
            const auto t = item.find("text");
            if (t == item.end() || !t->is_string()) {
                *error = QStringLiteral("text item %1 has no \"text\" string").arg(i);
                return false;
            }
            parts << q(t->get<std::string>());
        } else if (type == QLatin1String("image") || type == QLatin1String("audio")) {
            const QString mime = str(item, "mimeType");
            parts << QStringLiteral("[%1: %2, %3]")
                         .arg(type, mime.isEmpty() ? QStringLiteral("unknown type") : mime,
                              byteSize(base64Bytes(str(item, "data"))));
        } else if (type == QLatin1String("resource")) {
            const auto r = item.find("resource");
            if (r == item.end() || !r->is_object()) {
                *error = QStringLiteral("resource item %1 has no \"resource\" object").arg(i);
                return false;
            }
            const QString uri = str(*r, "uri"), mime = str(*r, "mimeType");
            const QString label = mime.isEmpty() ? uri : QStringLiteral("%1, %2").arg(uri, mime);
            if (const auto t = r->find("text"); t != r->end() && t->is_string()) {
                // An embedded text resource is content the model can read.
                parts << QStringLiteral("[resource: %1]\n%2").arg(label, q(t->get<std::string>()));
            } else {
                parts << QStringLiteral("[resource: %1, %2]")
                             .arg(label, byteSize(base64Bytes(str(*r, "blob"))));
            }
        } else if (type == QLatin1String("resource_link")) {
            const QString name = str(item, "name"), uri = str(item, "uri");
            parts << QStringLiteral("[resource link: %1]")
                         .arg(name.isEmpty() || name == uri
                                  ? uri
                                  : QStringLiteral("%1 <%2>").arg(name, uri));
        } else {
            parts << QStringLiteral("[%1 content, not shown]").arg(type);
        }
    }
    if (parts.isEmpty() && structured != result.end())
        parts << q(structured->dump(-1, ' ', false, Json::error_handler_t::replace));
    *text = parts.join(QLatin1Char('\n'));
    return true;
}

// ---- McpToolCall ----------------------------------------------------------------------------

McpToolCall::McpToolCall(McpProvider* provider, QString tool, CallLimits limits)
    : ToolCall(provider), provider_(provider), tool_(std::move(tool)), limits_(limits) {
    timer_.setSingleShot(true);
}

void McpToolCall::finish(ToolOutcome outcome) {
    if (done_) return;
    done_ = true;
    timer_.stop();
    if (provider_) provider_->callDone(this);
    emit finished(outcome);
}

void McpToolCall::finishWith(ToolOutcome::Status status, const QString& text,
                             const QString& detail) {
    ToolOutcome outcome;
    outcome.status = status;
    setResultText(outcome, text, limits_.maxResultBytes);
    outcome.detail = detail;
    finish(outcome);
}

McpToolCall::~McpToolCall() {
    if (done_ || !provider_) return;
    provider_->cancelCall(this, QStringLiteral("cancelled by the user"));
    provider_->callDone(this);
}

void McpToolCall::cancel() {
    if (done_) return;
    if (provider_) provider_->cancelCall(this, QStringLiteral("cancelled by the user"));
    finishWith(ToolOutcome::Status::cancelled, QStringLiteral("The call was cancelled."),
               QString());
}

// ---- McpProvider ----------------------------------------------------------------------------

QStringList McpProvider::supportedProtocolVersions() {
    return {QStringLiteral("2025-06-18"), QStringLiteral("2025-03-26"),
            QStringLiteral("2024-11-05")};
}

McpProvider::McpProvider(McpServerConfig config, QObject* parent)
    : ToolProvider(parent), config_(std::move(config)) {
    problem_ = QStringLiteral("the server is not started");
    startTimer_.setSingleShot(true);
    connect(&startTimer_, &QTimer::timeout, this, [this] {
        if (state_ != State::starting) return;
        fail(QStringLiteral("the server did not finish starting within %1")
                 .arg(seconds(startTimeoutMs_)),
             transport_ ? transport_->diagnostics() : QString());
    });
}

McpProvider::~McpProvider() {
    const QList<McpToolCall*> calls = running_;
    for (McpToolCall* c : calls)
        c->finishWith(ToolOutcome::Status::cancelled,
                      QStringLiteral("The call was cancelled: the MCP server was removed."),
                      QString());
    teardown();
}

QString McpProvider::name() const { return mcpNamespaceName(config_.name); }

void McpProvider::note(const QString& line) {
    notes_ << (line.size() > 500 ? line.left(500) + QStringLiteral("...") : line);
    while (notes_.size() > 40) notes_.removeFirst();
}

QString McpProvider::diagnostics() const {
    QStringList lines = notes_;
    if (transport_) {
        const QString t = transport_->diagnostics();
        if (!t.isEmpty()) lines << t;
    }
    return lines.join(QLatin1Char('\n'));
}

QStringList McpProvider::toolNames() const {
    QStringList names;
    for (const Tool& t : tools_) names << t.name;
    return names;
}

chat::ToolNamespace McpProvider::toolNamespace() const {
    chat::ToolNamespace ns;
    ns.name = name().toStdString();
    if (!instructions_.isEmpty()) ns.description = instructions_.toStdString();
    if (state_ == State::ready)
        for (const Tool& t : tools_) ns.tools.push_back(t.description);
    return ns;
}

void McpProvider::teardown() {
    ++generation_;  // answers and signals of the old connection are ignored from now on
    startTimer_.stop();
    byProgressToken_.clear();
    listingTools_ = listAgain_ = false;
    if (rpc_ != nullptr) {
        rpc_->disconnect(this);
        rpc_->deleteLater();  // its waiting callbacks are never run
        rpc_ = nullptr;
    }
    if (transport_) {
        McpTransport* t = transport_;
        transport_ = nullptr;
        t->disconnect(this);
        t->close();
        t->deleteLater();
    }
}

void McpProvider::start() {
    const QList<McpToolCall*> calls = running_;
    for (McpToolCall* c : calls)
        c->finishWith(ToolOutcome::Status::cancelled,
                      QStringLiteral("The call was cancelled: the MCP server was restarted."),
                      QString());
    teardown();
    notes_.clear();
    tools_.clear();
    protocolVersion_.clear();
    serverName_.clear();
    serverVersion_.clear();
    instructions_.clear();
    state_ = State::starting;
    problem_ = QStringLiteral("the server is starting");
    const int gen = generation_;

    if (config_.transport == McpServerConfig::Transport::stdio) {
        if (config_.command.trimmed().isEmpty()) {
            fail(QStringLiteral("no command to start"), QString());
            return;
        }
        transport_ = new McpStdioTransport(config_, this);
    } else {
        if (!config_.url.isValid() || config_.url.host().isEmpty()) {
            fail(QStringLiteral("no valid URL (%1)").arg(config_.url.toString()), QString());
            return;
        }
        transport_ = new McpHttpTransport(config_, this);
    }
    rpc_ = new JsonRpcConnection(this);
    McpTransport* t = transport_;
    connect(rpc_, &JsonRpcConnection::outgoing, t, &McpTransport::send);
    connect(t, &McpTransport::messageReceived, rpc_, &JsonRpcConnection::receive);
    connect(t, &McpTransport::requestFailed, rpc_, &JsonRpcConnection::fail);
    connect(t, &McpTransport::opened, this, [this, gen] {
        if (gen == generation_) onOpened();
    });
    connect(t, &McpTransport::closed, this,
            [this, gen](const QString& problem, const QString& detail) {
                if (gen == generation_) onClosed(problem, detail);
            });
    connect(rpc_, &JsonRpcConnection::protocolError, this, [this](const QString& what) {
        note(QStringLiteral("skipped from the server: %1").arg(what));
    });
    connect(rpc_, &JsonRpcConnection::notificationReceived, this, &McpProvider::onNotification);
    startTimer_.start(startTimeoutMs_);
    emit changed();
    t->open();
}

void McpProvider::stop() {
    const QList<McpToolCall*> calls = running_;
    for (McpToolCall* c : calls)
        c->finishWith(ToolOutcome::Status::cancelled,
                      QStringLiteral("The call was cancelled: the MCP server was stopped."),
                      QString());
    teardown();
    state_ = State::stopped;
    problem_ = QStringLiteral("the server is stopped");
    emit changed();
}

void McpProvider::onOpened() {
    const int gen = generation_;
    Json params = {
        {"protocolVersion", kProtocolVersion},
        {"capabilities", Json::object()},  // no roots, sampling or elicitation
        {"clientInfo",
         {{"name", "neural"}, {"title", "Neural"}, {"version", NEURAL_MCP_CLIENT_VERSION}}}};
    rpc_->request(QStringLiteral("initialize"), std::move(params),
                  [this, gen](const JsonRpcReply& r) {
                      if (gen == generation_) onInitialized(r);
                  });
}

void McpProvider::onInitialized(const JsonRpcReply& reply) {
    if (!reply.ok()) {
        fail(QStringLiteral("initialize failed: %1").arg(reply.describe()), diagnostics());
        return;
    }
    const Json& r = reply.result;
    const QString version = str(r, "protocolVersion");
    if (!r.is_object() || version.isEmpty()) {
        fail(QStringLiteral("malformed answer to initialize (no \"protocolVersion\"): %1")
                 .arg(JsonRpcConnection::excerpt(QByteArray::fromStdString(
                     r.dump(-1, ' ', false, Json::error_handler_t::replace)))),
             diagnostics());
        return;
    }
    if (!supportedProtocolVersions().contains(version)) {
        fail(QStringLiteral("the server speaks MCP revision %1; Neural speaks %2")
                 .arg(version, supportedProtocolVersions().join(QStringLiteral(", "))),
             diagnostics());
        return;
    }
    protocolVersion_ = version;
    if (const auto info = r.find("serverInfo"); info != r.end()) {
        serverName_ = str(*info, "name");
        serverVersion_ = str(*info, "version");
    }
    instructions_ = str(r, "instructions").left(kMaxDescriptionChars);
    bool hasTools = false;
    if (const auto caps = r.find("capabilities"); caps != r.end() && caps->is_object())
        hasTools = caps->contains("tools");
    transport_->setProtocolVersion(version);  // HTTP sends it with every later message
    rpc_->notify(QStringLiteral("notifications/initialized"), nullptr);
    if (hasTools)
        listTools({}, {}, 0);
    else
        setTools({});
}

void McpProvider::listTools(const std::string& cursor, QList<Tool> sofar, int page) {
    listingTools_ = true;
    const int gen = generation_;
    Json params = Json::object();
    if (!cursor.empty()) params["cursor"] = cursor;
    rpc_->request(
        QStringLiteral("tools/list"), std::move(params),
        [this, gen, sofar = std::move(sofar), page](const JsonRpcReply& reply) mutable {
            if (gen != generation_) return;
            const Json& r = reply.result;
            QString bad;
            if (!reply.ok())
                bad = QStringLiteral("tools/list failed: %1").arg(reply.describe());
            else if (!r.is_object() || !r.contains("tools") || !r["tools"].is_array())
                bad = QStringLiteral("malformed answer to tools/list (no \"tools\" array)");
            if (!bad.isEmpty()) {
                listingTools_ = false;
                if (state_ == State::starting) {
                    fail(bad, diagnostics());
                } else {
                    note(bad + QStringLiteral("; the previous list stays"));
                }
                return;
            }
            for (const Json& t : r["tools"]) {
                if (sofar.size() >= kMaxTools) {
                    note(QStringLiteral(
                             "the server offers more than %1 tools; the rest are left out")
                             .arg(kMaxTools));
                    break;
                }
                const QString toolName = str(t, "name");
                if (toolName.isEmpty()) {
                    note(QStringLiteral("skipped a tool without a name"));
                    continue;
                }
                Tool tool;
                tool.name = toolName;
                // The model addresses NAMESPACE.TOOL: keep to the characters function names use.
                QString m;
                for (const QChar ch : toolName) {
                    const char16_t c = ch.unicode();
                    const bool ok = (c >= u'a' && c <= u'z') || (c >= u'A' && c <= u'Z') ||
                                    (c >= u'0' && c <= u'9') || c == u'_' || c == u'-';
                    m += ok ? ch : QLatin1Char('_');
                }
                m.truncate(64);
                QString unique = m;
                for (int n = 2;; ++n) {
                    bool taken = false;
                    for (const Tool& o : sofar) taken = taken || o.modelName == unique;
                    if (!taken) break;
                    unique = m.left(60) + QStringLiteral("_%1").arg(n);
                }
                tool.modelName = unique;
                tool.description.name = unique.toStdString();
                QString description = str(t, "description");
                if (description.size() > kMaxDescriptionChars)
                    description = description.left(kMaxDescriptionChars) + QStringLiteral("...");
                const auto schema = t.find("inputSchema");
                if (schema != t.end() && schema->is_object()) {
                    const bool empty =
                        !schema->contains("properties") ||
                        ((*schema)["properties"].is_object() && (*schema)["properties"].empty());
                    if (depth(*schema, kMaxSchemaDepth + 1) > kMaxSchemaDepth ||
                        schema->dump(-1, ' ', false, Json::error_handler_t::replace).size() >
                            std::size_t(kMaxSchemaBytes)) {
                        note(QStringLiteral("tool %1: its argument schema is too large to show")
                                 .arg(toolName));
                        description += QStringLiteral(
                            "\n(The argument schema is too large to show: pass a JSON object.)");
                    } else if (!empty) {
                        tool.description.parameters = *schema;
                    }
                }
                tool.description.description = description.toStdString();
                sofar << tool;
            }
            const QString next = str(r, "nextCursor");
            if (!next.isEmpty() && sofar.size() < kMaxTools) {
                if (page + 1 >= kMaxToolPages) {
                    note(QStringLiteral("tools/list went on for more than %1 pages; stopped there")
                             .arg(kMaxToolPages));
                } else {
                    listTools(next.toStdString(), std::move(sofar), page + 1);
                    return;
                }
            }
            setTools(sofar);
        });
}

void McpProvider::setTools(const QList<Tool>& tools) {
    listingTools_ = false;
    tools_ = tools;
    if (listAgain_) {  // the list changed while it was being read
        listAgain_ = false;
        listTools({}, {}, 0);
        return;
    }
    if (state_ == State::starting) {
        startTimer_.stop();
        state_ = State::ready;
        problem_.clear();
    }
    emit changed();
}

void McpProvider::onNotification(const QString& method, const Json& params) {
    if (method == QLatin1String("notifications/progress")) {
        if (!params.is_object()) return;
        const auto token = params.find("progressToken");
        if (token == params.end()) return;
        const QString key = token->is_string() ? q(token->get<std::string>()) : q(token->dump());
        McpToolCall* call = byProgressToken_.value(key);
        if (call == nullptr) return;
        const auto progress = params.find("progress");
        const auto total = params.find("total");
        double fraction = -1;
        if (progress != params.end() && progress->is_number() && total != params.end() &&
            total->is_number() && total->get<double>() > 0)
            fraction = std::clamp(progress->get<double>() / total->get<double>(), 0.0, 1.0);
        emit call->progress(fraction, str(params, "message"));
    } else if (method == QLatin1String("notifications/tools/list_changed")) {
        if (state_ == State::stopped || state_ == State::failed) return;
        if (listingTools_) {
            listAgain_ = true;
        } else if (state_ == State::ready) {
            listTools({}, {}, 0);
        }
    } else if (method == QLatin1String("notifications/message")) {
        const QString level = str(params, "level");
        QString data;
        if (params.is_object() && params.contains("data"))
            data = params["data"].is_string()
                       ? q(params["data"].get<std::string>())
                       : q(params["data"].dump(-1, ' ', false, Json::error_handler_t::replace));
        note(QStringLiteral("log %1: %2").arg(level, data));
    }
}

void McpProvider::onClosed(const QString& problem, const QString& detail) { fail(problem, detail); }

void McpProvider::fail(const QString& problem, const QString& detail) {
    QString lastLine;
    const QStringList lines = detail.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
    if (!lines.isEmpty()) lastLine = lines.last().trimmed();
    problem_ = lastLine.isEmpty() || problem.contains(lastLine)
                   ? problem
                   : QStringLiteral("%1: %2").arg(problem, lastLine.left(300));
    state_ = State::failed;
    const QString full = detail.isEmpty() ? problem : problem + QLatin1Char('\n') + detail;
    const QList<McpToolCall*> calls = running_;
    for (McpToolCall* c : calls)
        c->finishWith(ToolOutcome::Status::failed,
                      QStringLiteral("The call failed: the MCP server \"%1\" stopped (%2).")
                          .arg(config_.name, problem),
                      full);
    // The transport's last lines stay readable through notes_ after it is gone.
    if (!detail.isEmpty()) note(detail);
    teardown();
    emit changed();
}

ToolCall* McpProvider::call(const QString& tool, const QString& arguments,
                            const CallLimits& limits) {
    auto* c = new McpToolCall(this, tool, limits);
    const auto failLater = [c](const QString& text, const QString& detail) {
        QMetaObject::invokeMethod(
            c, [c, text, detail] { c->finishWith(ToolOutcome::Status::failed, text, detail); },
            Qt::QueuedConnection);
        return c;
    };
    if (state_ != State::ready)
        return failLater(QStringLiteral("The MCP server \"%1\" is not available: %2.")
                             .arg(config_.name, problem_),
                         problem_ + QLatin1Char('\n') + diagnostics());
    const Tool* found = nullptr;
    for (const Tool& t : tools_)
        if (t.modelName == tool) found = &t;
    if (found == nullptr)
        for (const Tool& t : tools_)
            if (t.name == tool) found = &t;
    if (found == nullptr) {
        QStringList names;
        for (const Tool& t : tools_) names << t.modelName;
        return failLater(QStringLiteral("Unknown tool \"%1\" of %2; it has: %3.")
                             .arg(tool, name(),
                                  names.isEmpty() ? QStringLiteral("no tools")
                                                  : names.join(QStringLiteral(", "))),
                         QString());
    }
    Json args = Json::object();
    const QByteArray text = arguments.trimmed().toUtf8();
    if (!text.isEmpty()) {
        args = Json::parse(text.constData(), text.constData() + text.size(), nullptr, false);
        if (args.is_discarded() || !args.is_object())
            return failLater(QStringLiteral("The arguments are not a JSON object: %1")
                                 .arg(JsonRpcConnection::excerpt(text)),
                             QStringLiteral("arguments are not a JSON object: %1")
                                 .arg(QString::fromUtf8(text.left(2000))));
    }
    c->tool_ = found->name;
    running_ << c;
    c->timer_.setInterval(std::max(limits.timeoutMs, 1));
    connect(&c->timer_, &QTimer::timeout, c, [this, c] {
        cancelCall(c, QStringLiteral("timed out"));
        c->finishWith(
            ToolOutcome::Status::timedOut,
            QStringLiteral("The call timed out after %1.").arg(seconds(c->limits_.timeoutMs)),
            QStringLiteral("no answer from the MCP server \"%1\" within %2 (tool %3)")
                .arg(config_.name, seconds(c->limits_.timeoutMs), c->tool_));
    });
    c->timer_.start();
    // Sent from the event loop: a call never finishes inside call().
    QMetaObject::invokeMethod(
        c, [this, c, args = std::move(args)] { sendCall(c, args); }, Qt::QueuedConnection);
    return c;
}

void McpProvider::sendCall(McpToolCall* call, const Json& arguments) {
    if (call->done_) return;
    if (state_ != State::ready || rpc_ == nullptr) {
        call->finishWith(ToolOutcome::Status::failed,
                         QStringLiteral("The MCP server \"%1\" is not available: %2.")
                             .arg(config_.name, problem_),
                         problem_);
        return;
    }
    call->progressToken_ = QStringLiteral("neural-%1").arg(nextCall_++);
    byProgressToken_.insert(call->progressToken_, call);
    Json params = {{"name", call->tool_.toStdString()},
                   {"arguments", arguments},
                   {"_meta", {{"progressToken", call->progressToken_.toStdString()}}}};
    const int gen = generation_;
    QPointer<McpToolCall> guard(call);
    call->requestId_ = rpc_->request(
        QStringLiteral("tools/call"), std::move(params),
        [this, gen, guard](const JsonRpcReply& reply) {
            if (gen != generation_ || !guard || guard->done_) return;
            McpToolCall* c = guard;
            const QString serverName = config_.name;
            switch (reply.kind) {
                case JsonRpcReply::Kind::failure:
                    c->finishWith(ToolOutcome::Status::failed,
                                  QStringLiteral("The call failed: %1.").arg(reply.errorMessage),
                                  reply.errorMessage + QLatin1Char('\n') + diagnostics());
                    return;
                case JsonRpcReply::Kind::error:
                    c->finishWith(
                        ToolOutcome::Status::failed,
                        QStringLiteral("The server refused the call: %1 (JSON-RPC error %2).")
                            .arg(reply.errorMessage)
                            .arg(reply.errorCode),
                        reply.describe());
                    return;
                case JsonRpcReply::Kind::result:
                    break;
            }
            QString text, error;
            bool isError = false;
            if (!mcpResultText(reply.result, &text, &isError, &error)) {
                const QString raw =
                    q(reply.result.dump(-1, ' ', false, Json::error_handler_t::replace));
                c->finishWith(ToolOutcome::Status::failed,
                              QStringLiteral("The server's answer was malformed: %1.").arg(error),
                              QStringLiteral("malformed tools/call result from \"%1\": %2\n%3")
                                  .arg(serverName, error, raw.left(2000)));
                return;
            }
            if (isError && text.trimmed().isEmpty())
                text = QStringLiteral("The tool reported an error without details.");
            c->finishWith(isError ? ToolOutcome::Status::toolError : ToolOutcome::Status::ok, text,
                          QString());
        });
}

void McpProvider::cancelCall(McpToolCall* call, const QString& reason) {
    if (call->requestId_ < 0 || rpc_ == nullptr) return;
    if (rpc_->forget(call->requestId_)) {
        rpc_->notify(QStringLiteral("notifications/cancelled"),
                     Json{{"requestId", call->requestId_}, {"reason", reason.toStdString()}});
        if (transport_) transport_->abandon(call->requestId_);
    }
}

void McpProvider::callDone(McpToolCall* call) {
    running_.removeAll(call);
    if (!call->progressToken_.isEmpty()) byProgressToken_.remove(call->progressToken_);
}

}  // namespace neural::toolhost
