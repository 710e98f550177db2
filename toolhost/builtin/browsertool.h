// gpt-oss's built-in `browser` tool (docs/TOOLS.md "Built-in tools"): `search`, `open` and
// `find` as the chat format declares them (chat::ToolNamespace::browser()), answering with pages
// rendered to the numbered-line text the model was trained on (pagetext.h). Search goes to the
// provider the user configures: a SearXNG instance, or a search tool of an MCP server (its answer
// read by searchresults.h); `open` fetches http(s) with a time and a size limit.
// One provider per conversation: it holds the conversation's page stack (the `cursor`s).
#pragma once

#include <QList>
#include <QPointer>
#include <QUrl>

#include <functional>

#include "builtin/pagetext.h"
#include "tool.h"

class QJsonObject;
class QNetworkAccessManager;
class QNetworkReply;

namespace neural::toolhost {

struct BrowserToolSettings {
    QUrl searxngUrl;  // e.g. http://127.0.0.1:8888; empty: `search` says none is configured
    // Search through a tool of an MCP server instead (set: SearXNG is not used): the server's
    // name, its tool (as the server or the model spells it), and how to find the running server
    // at each search (it may have been restarted since); null when it is not configured.
    QString searchServer;
    QString searchTool;
    std::function<ToolProvider*(const QString& server)> findServer;
    int timeoutMs = 20000;
    qint64 maxPageBytes = 2 << 20;
};

class BrowserCall;

class BrowserProvider : public ToolProvider {
    Q_OBJECT
public:
    explicit BrowserProvider(BrowserToolSettings settings, QObject* parent = nullptr);
    ~BrowserProvider() override;

    QString name() const override { return QStringLiteral("browser"); }
    bool inSystemMessage() const override { return true; }
    chat::ToolNamespace toolNamespace() const override;
    // Always ready: without a search provider, `open` and `find` still work.
    bool ready() const override { return true; }
    QString problem() const override { return {}; }
    // `tool` is "search", "open" or "find"; `arguments` their JSON object.
    ToolCall* call(const QString& tool, const QString& arguments,
                   const CallLimits& limits) override;

    // The pages opened so far; a page's index is its cursor.
    const QList<browser::Page>& pages() const { return m_pages; }

private:
    friend class BrowserCall;
    void search(BrowserCall* call, const QString& query, int topn);
    void searchMcp(BrowserCall* call, const QString& query, int topn);
    void open(BrowserCall* call, const QJsonObject& args);
    void find(BrowserCall* call, const QJsonObject& args);
    // Fetches `url` (http or https); `done` gets the page, or an error for the model.
    void fetch(BrowserCall* call, const QUrl& url, bool viewSource, int loc, int numLines);
    // Pushes `page`, shows it from `loc` and finishes the call (a bad loc pops it again).
    void showNew(BrowserCall* call, const browser::Page& page, int loc, int numLines);
    const browser::Page* pageAt(int cursor, QString* error) const;

    BrowserToolSettings m_settings;
    QNetworkAccessManager* m_network;
    QList<browser::Page> m_pages;
};

// One browser call: a network request (search, open) or an immediate answer (find, scrolling).
class BrowserCall : public ToolCall {
    Q_OBJECT
public:
    BrowserCall(QString tool, const CallLimits& limits);
    void cancel() override;
    bool isDone() const { return m_done; }

private:
    friend class BrowserProvider;
    void finish(const ToolOutcome& outcome);
    void finishLater(const ToolOutcome& outcome);
    void finishText(ToolOutcome::Status status, const QString& text, bool later = false);
    QString m_tool;
    CallLimits m_limits;
    QPointer<QNetworkReply> m_reply;
    QPointer<ToolCall> m_inner;  // the MCP search server's call
    bool m_done = false;
};

}  // namespace neural::toolhost
