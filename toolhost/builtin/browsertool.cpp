#include "builtin/browsertool.h"

#include "builtin/searchresults.h"

#include <algorithm>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QNetworkAccessManager>
#include <QNetworkReply>
#include <QNetworkRequest>
#include <QRegularExpression>
#include <QStringDecoder>
#include <QTimer>
#include <QUrlQuery>

#include <functional>
#include <memory>

namespace neural::toolhost {
namespace {

constexpr int kMaxRedirects = 5;
constexpr int kMaxSearchResults = 20;
const QByteArray kUserAgent = "Mozilla/5.0 (compatible; neural-browser-tool)";

QString sizeText(qint64 bytes) {
    if (bytes >= (qint64(1) << 20) && bytes % (qint64(1) << 20) == 0)
        return QStringLiteral("%1 MiB").arg(bytes >> 20);
    if (bytes >= 1024 && bytes % 1024 == 0) return QStringLiteral("%1 KiB").arg(bytes >> 10);
    return QStringLiteral("%1 bytes").arg(bytes);
}

QString secondsText(int ms) {
    if (ms % 1000 == 0) return QStringLiteral("%1 s").arg(ms / 1000);
    return QStringLiteral("%1 s").arg(ms / 1000.0, 0, 'f', 1);
}

QString truncated(const QString& text, int chars = 1024) {
    return text.size() > chars ? text.left(chars - 3) + QStringLiteral("...") : text;
}

// The body as text: the header's charset, else the document's own (BOM, <meta charset>), else
// UTF-8. Qt decodes the UTF and Latin-1 families; other single-byte charsets read as Latin-1.
QString decodeBody(const QByteArray& body, const QString& charset, bool html) {
    if (!charset.isEmpty()) {
        const QByteArray name = charset.toLatin1();
        if (auto encoding = QStringConverter::encodingForName(name.constData()))
            return QStringDecoder(*encoding).decode(body);
        return QStringDecoder(QStringConverter::Latin1).decode(body);
    }
    if (html) {
        QStringDecoder decoder = QStringDecoder::decoderForHtml(body);
        if (decoder.isValid()) return decoder.decode(body);
    }
    return QString::fromUtf8(body);
}

// The fields of a JSON argument object with the reference's defaults.
int intArg(const QJsonObject& args, const char* key, int fallback) {
    const QJsonValue value = args.value(QLatin1String(key));
    return value.isDouble() ? int(value.toDouble()) : fallback;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

BrowserCall::BrowserCall(QString tool, const CallLimits& limits)
    : ToolCall(nullptr), m_tool(std::move(tool)), m_limits(limits) {}

void BrowserCall::cancel() {
    if (m_done) return;
    ToolOutcome outcome;
    outcome.status = ToolOutcome::Status::cancelled;
    outcome.text = QStringLiteral("The call was cancelled.");
    finish(outcome);
    if (m_reply) m_reply->abort();
    if (m_inner) m_inner->cancel();
}

void BrowserCall::finish(const ToolOutcome& outcome) {
    if (m_done) return;
    m_done = true;
    emit finished(outcome);
}

void BrowserCall::finishLater(const ToolOutcome& outcome) {
    QTimer::singleShot(0, this, [this, outcome] { finish(outcome); });
}

void BrowserCall::finishText(ToolOutcome::Status status, const QString& text, bool later) {
    ToolOutcome outcome;
    outcome.status = status;
    setResultText(outcome, text, m_limits.maxResultBytes);
    if (status != ToolOutcome::Status::ok) outcome.detail = text;
    if (later)
        finishLater(outcome);
    else
        finish(outcome);
}

// ---------------------------------------------------------------------------------------------

namespace {

// What one GET brought back.
struct Response {
    QByteArray body;
    QString error;  // for the model, empty on success
    ToolOutcome::Status errorStatus = ToolOutcome::Status::toolError;
    int httpStatus = 0;
    QString mimeType;
    QString charset;
    QUrl finalUrl;
};

// GET `url` with the call's limits; `done` runs once unless the call was cancelled first.
void get(QNetworkAccessManager* network, BrowserCall* call, QPointer<BrowserCall> guard,
         QPointer<QNetworkReply>* replySlot, const QUrl& url, int timeoutMs, qint64 maxBytes,
         std::function<void(const Response&)> done) {
    QNetworkRequest request(url);
    request.setAttribute(QNetworkRequest::RedirectPolicyAttribute,
                         QNetworkRequest::NoLessSafeRedirectPolicy);
    request.setMaximumRedirectsAllowed(kMaxRedirects);
    request.setHeader(QNetworkRequest::UserAgentHeader, kUserAgent);
    request.setRawHeader("Accept",
                         "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.8,"
                         "*/*;q=0.5");
    QNetworkReply* reply = network->get(request);
    *replySlot = reply;
    struct State {
        QByteArray body;
        bool tooBig = false;
        bool timedOut = false;
    };
    auto state = std::make_shared<State>();
    auto* timer = new QTimer(reply);
    timer->setSingleShot(true);
    QObject::connect(timer, &QTimer::timeout, reply, [reply, state] {
        state->timedOut = true;
        reply->abort();
    });
    timer->start(timeoutMs);
    QObject::connect(reply, &QNetworkReply::metaDataChanged, reply, [reply, state, maxBytes] {
        const QVariant length = reply->header(QNetworkRequest::ContentLengthHeader);
        if (length.isValid() && length.toLongLong() > maxBytes) {
            state->tooBig = true;
            reply->abort();
        }
    });
    QObject::connect(reply, &QNetworkReply::readyRead, reply, [reply, state, maxBytes] {
        state->body += reply->readAll();
        if (state->body.size() > maxBytes) {
            state->tooBig = true;
            reply->abort();
        }
    });
    QObject::connect(
        reply, &QNetworkReply::finished, call, [reply, state, guard, done, timeoutMs, maxBytes] {
            reply->deleteLater();
            if (!guard || guard->isDone()) return;
            if (!state->tooBig && !state->timedOut) state->body += reply->readAll();
            Response response;
            response.finalUrl = reply->url();
            response.httpStatus =
                reply->attribute(QNetworkRequest::HttpStatusCodeAttribute).toInt();
            const QString reason =
                reply->attribute(QNetworkRequest::HttpReasonPhraseAttribute).toString();
            const QString contentType =
                reply->header(QNetworkRequest::ContentTypeHeader).toString();
            const QStringList parts = contentType.split(QLatin1Char(';'));
            response.mimeType = parts.value(0).trimmed().toLower();
            for (const QString& part : parts.mid(1)) {
                const QString p = part.trimmed();
                if (p.startsWith(QLatin1String("charset="), Qt::CaseInsensitive))
                    response.charset = p.mid(8).remove(QLatin1Char('"')).trimmed();
            }
            if (state->timedOut) {
                response.errorStatus = ToolOutcome::Status::timedOut;
                response.error =
                    QStringLiteral("no complete answer within %1").arg(secondsText(timeoutMs));
            } else if (state->tooBig) {
                response.error = QStringLiteral(
                                     "the page is larger than the browser's limit of %1, so it "
                                     "was not loaded")
                                     .arg(sizeText(maxBytes));
            } else if (response.httpStatus >= 400) {
                response.error = QStringLiteral("HTTP %1%2")
                                     .arg(response.httpStatus)
                                     .arg(reason.isEmpty() ? QString() : QLatin1Char(' ') + reason);
            } else if (reply->error() != QNetworkReply::NoError) {
                response.error = reply->errorString();
            } else if (response.httpStatus >= 300) {
                response.error = QStringLiteral(
                                     "HTTP %1 redirect without a usable "
                                     "Location")
                                     .arg(response.httpStatus);
            }
            response.body = std::move(state->body);
            done(response);
        });
}

bool isTextual(const QString& mime) {
    return mime.startsWith(QLatin1String("text/")) || mime == QLatin1String("application/json") ||
           mime.endsWith(QLatin1String("+json")) || mime == QLatin1String("application/xml") ||
           mime.endsWith(QLatin1String("+xml")) || mime == QLatin1String("application/javascript");
}

}  // namespace

BrowserProvider::BrowserProvider(BrowserToolSettings settings, QObject* parent)
    : ToolProvider(parent),
      m_settings(std::move(settings)),
      m_network(new QNetworkAccessManager(this)) {}

BrowserProvider::~BrowserProvider() = default;

chat::ToolNamespace BrowserProvider::toolNamespace() const {
    return chat::ToolNamespace::browser();
}

ToolCall* BrowserProvider::call(const QString& tool, const QString& arguments,
                                const CallLimits& limits) {
    auto* call = new BrowserCall(tool, limits);
    QJsonObject args;
    if (!arguments.trimmed().isEmpty()) {
        QJsonParseError error;
        const QJsonDocument document = QJsonDocument::fromJson(arguments.toUtf8(), &error);
        if (error.error != QJsonParseError::NoError || !document.isObject()) {
            // The reference's answer to arguments that are not a JSON object.
            call->finishText(ToolOutcome::Status::failed,
                             QStringLiteral("{\"error\": \"Invalid function arguments\"}"), true);
            return call;
        }
        args = document.object();
    }
    if (tool == QLatin1String("search")) {
        const QJsonValue query = args.value(QStringLiteral("query"));
        if (!query.isString()) {
            call->finishText(ToolOutcome::Status::failed,
                             QStringLiteral("{\"error\": \"search needs a `query` string\"}"),
                             true);
            return call;
        }
        int topn = intArg(args, "topn", intArg(args, "top_n", 10));
        search(call, query.toString(), std::clamp(topn, 1, kMaxSearchResults));
    } else if (tool == QLatin1String("open")) {
        open(call, args);
    } else if (tool == QLatin1String("find")) {
        find(call, args);
    } else {
        call->finishText(
            ToolOutcome::Status::failed,
            QStringLiteral("{\"error\": \"Unknown function: %1\"}").arg(truncated(tool, 100)),
            true);
    }
    return call;
}

const browser::Page* BrowserProvider::pageAt(int cursor, QString* error) const {
    if (m_pages.isEmpty()) {
        *error = QStringLiteral("No pages to access!");
        return nullptr;
    }
    if (cursor == -1) return &m_pages.back();
    if (cursor < 0 || cursor >= m_pages.size()) {
        *error = QStringLiteral("Cursor `%1` is out of range. Available cursor indices: [0 - %2].")
                     .arg(cursor)
                     .arg(m_pages.size() - 1);
        return nullptr;
    }
    return &m_pages[cursor];
}

void BrowserProvider::showNew(BrowserCall* call, const browser::Page& page, int loc, int numLines) {
    if (call->isDone()) return;  // cancelled meanwhile: the page stack stays as it was
    m_pages.append(page);
    QString error;
    const QString text = browser::showPage(page, int(m_pages.size()) - 1, loc, numLines, &error);
    if (!error.isEmpty()) {
        m_pages.removeLast();
        call->finishText(ToolOutcome::Status::toolError, error);
        return;
    }
    call->finishText(ToolOutcome::Status::ok, text);
}

void BrowserProvider::search(BrowserCall* call, const QString& query, int topn) {
    if (!m_settings.searchServer.isEmpty()) {
        searchMcp(call, query, topn);
        return;
    }
    if (m_settings.searxngUrl.isEmpty()) {
        call->finishText(ToolOutcome::Status::failed,
                         QStringLiteral("Error during search for `%1`: no search provider "
                                        "configured: Settings > Tools. Pages can still be "
                                        "opened by their URL.")
                             .arg(truncated(query)),
                         true);
        return;
    }
    QUrl url = m_settings.searxngUrl;
    QString path = url.path();
    if (!path.endsWith(QLatin1Char('/'))) path += QLatin1Char('/');
    url.setPath(path + QStringLiteral("search"));
    QUrlQuery urlQuery;
    urlQuery.addQueryItem(QStringLiteral("q"), query);
    urlQuery.addQueryItem(QStringLiteral("format"), QStringLiteral("json"));
    url.setQuery(urlQuery);
    const int timeoutMs = std::min(m_settings.timeoutMs, call->m_limits.timeoutMs);
    QPointer<BrowserProvider> self(this);
    get(m_network, call, call, &call->m_reply, url, timeoutMs, m_settings.maxPageBytes,
        [self, call, query, topn](const Response& response) {
            if (!self) return;
            const QString prefix =
                QStringLiteral("Error during search for `%1`: ").arg(truncated(query));
            if (!response.error.isEmpty()) {
                QString error = response.error;
                if (response.httpStatus == 403)
                    error += QStringLiteral(
                        " (SearXNG answers 403 while its JSON output is off: add json to "
                        "search.formats in its settings.yml)");
                call->finishText(response.errorStatus, prefix + error);
                return;
            }
            const QJsonDocument document = QJsonDocument::fromJson(response.body);
            const QJsonValue results = document.object().value(QStringLiteral("results"));
            if (!document.isObject() || !results.isArray()) {
                call->finishText(ToolOutcome::Status::toolError,
                                 prefix + QStringLiteral("the search provider's answer is not "
                                                         "SearXNG's JSON (no \"results\" list)"));
                return;
            }
            QList<browser::SearchResult> list;
            for (const QJsonValue& value : results.toArray()) {
                const QJsonObject result = value.toObject();
                const QString link = result.value(QStringLiteral("url")).toString();
                if (link.isEmpty() || !QUrl(link).isValid()) continue;
                list.push_back({link, result.value(QStringLiteral("title")).toString().trimmed(),
                                result.value(QStringLiteral("content")).toString()});
            }
            self->showNew(call, browser::searchResultsPage(list, query, topn), 0, -1);
        });
}

void BrowserProvider::searchMcp(BrowserCall* call, const QString& query, int topn) {
    const QString prefix = QStringLiteral("Error during search for `%1`: ").arg(truncated(query));
    const QString server = m_settings.searchServer;
    ToolProvider* provider = m_settings.findServer ? m_settings.findServer(server) : nullptr;
    if (!provider) {
        call->finishText(ToolOutcome::Status::failed,
                         prefix + QStringLiteral("the search server \"%1\" is not one of the "
                                                 "MCP servers: Settings > Tools")
                                      .arg(server),
                         true);
        return;
    }
    if (!provider->ready()) {
        call->finishText(ToolOutcome::Status::failed,
                         prefix + QStringLiteral("the search server \"%1\" is not running: %2")
                                      .arg(server, provider->problem()),
                         true);
        return;
    }
    // The tool, by the server's spelling or the model's; its schema names the arguments.
    const chat::ToolNamespace ns = provider->toolNamespace();
    QString wanted = m_settings.searchTool;
    wanted.replace(QRegularExpression(QStringLiteral("[^A-Za-z0-9_-]")), QStringLiteral("_"));
    const chat::ToolDescription* tool = nullptr;
    for (const chat::ToolDescription& t : ns.tools)
        if (QString::fromStdString(t.name) == m_settings.searchTool ||
            QString::fromStdString(t.name) == wanted)
            tool = &t;
    if (!tool) {
        QStringList names;
        for (const chat::ToolDescription& t : ns.tools) names << QString::fromStdString(t.name);
        call->finishText(
            ToolOutcome::Status::failed,
            prefix + QStringLiteral("the search server \"%1\" has no tool \"%2\" "
                                    "(it has: %3)")
                         .arg(server, m_settings.searchTool, names.join(QStringLiteral(", "))),
            true);
        return;
    }
    // The server's answer is read whole (the page shows `topn` of it); the time limit is the
    // browser's.
    CallLimits limits = call->m_limits;
    limits.timeoutMs = std::min(m_settings.timeoutMs, limits.timeoutMs);
    limits.maxResultBytes = std::max(limits.maxResultBytes, m_settings.maxPageBytes);
    ToolCall* inner =
        provider->call(QString::fromStdString(tool->name),
                       browser::searchArguments(tool->parameters, query, topn), limits);
    call->m_inner = inner;
    connect(inner, &ToolCall::finished, inner, &QObject::deleteLater);
    QPointer<BrowserProvider> self(this);
    connect(inner, &ToolCall::finished, call,
            [self, call, query, topn, prefix](const ToolOutcome& outcome) {
                if (!self || call->isDone()) return;
                if (outcome.status != ToolOutcome::Status::ok) {
                    ToolOutcome o = outcome;
                    o.text = prefix + outcome.text;
                    if (o.detail.isEmpty()) o.detail = o.text;
                    call->finish(o);
                    return;
                }
                const QList<browser::SearchResult> results =
                    browser::parseSearchResults(outcome.text);
                // An answer without links (prose) is shown as it is.
                const browser::Page page = results.isEmpty() && !outcome.text.trimmed().isEmpty()
                                               ? browser::pageFromText(outcome.text, QUrl(), query)
                                               : browser::searchResultsPage(results, query, topn);
                self->showNew(call, page, 0, -1);
            });
}

void BrowserProvider::open(BrowserCall* call, const QJsonObject& args) {
    const QJsonValue id = args.value(QStringLiteral("id"));
    const int cursor = intArg(args, "cursor", -1);
    int loc = intArg(args, "loc", -1);
    const int numLines = intArg(args, "num_lines", -1);
    const bool viewSource = args.value(QStringLiteral("view_source")).toBool(false);
    QString error;

    if (id.isString()) {  // a URL: fetched afresh
        const QUrl url = QUrl::fromUserInput(id.toString());
        fetch(call, url.isValid() ? url : QUrl(id.toString()), viewSource, std::max(loc, 0),
              numLines);
        return;
    }
    const browser::Page* current = pageAt(cursor, &error);
    if (!current) {
        call->finishText(ToolOutcome::Status::toolError, error, true);
        return;
    }
    const int linkId = id.isDouble() ? int(id.toDouble()) : -1;
    if (linkId < 0) {
        if (viewSource) {  // the current page's source
            fetch(call, QUrl(current->url), true, std::max(loc, 0), numLines);
            return;
        }
        // Scrolling: the same page again, from `loc`.
        const browser::Page page = *current;
        QPointer<BrowserProvider> self(this);
        QTimer::singleShot(0, call, [self, call, page, loc, numLines] {
            if (self) self->showNew(call, page, std::max(loc, 0), numLines);
        });
        return;
    }
    if (linkId >= current->links.size()) {
        call->finishText(ToolOutcome::Status::toolError,
                         QStringLiteral("Invalid link id `%1`.").arg(linkId), true);
        return;
    }
    const QString target = current->links[linkId];
    if (loc < 0 && current->isFindResults && linkId < current->linkLines.size()) {
        loc = current->linkLines[linkId];
        if (loc > 4) loc -= 4;
    }
    if (!viewSource) {
        // A page already opened in this conversation is shown from memory.
        for (qsizetype i = m_pages.size() - 1; i >= 0; --i) {
            if (m_pages[i].url == target && !m_pages[i].isFindResults) {
                const browser::Page page = m_pages[i];
                QPointer<BrowserProvider> self(this);
                QTimer::singleShot(0, call, [self, call, page, loc, numLines] {
                    if (self) self->showNew(call, page, std::max(loc, 0), numLines);
                });
                return;
            }
        }
    }
    fetch(call, QUrl(target), viewSource, std::max(loc, 0), numLines);
}

void BrowserProvider::find(BrowserCall* call, const QJsonObject& args) {
    const QJsonValue pattern = args.value(QStringLiteral("pattern"));
    if (!pattern.isString() || pattern.toString().isEmpty()) {
        call->finishText(ToolOutcome::Status::failed,
                         QStringLiteral("{\"error\": \"find needs a `pattern` string\"}"), true);
        return;
    }
    QString error;
    const browser::Page* page = pageAt(intArg(args, "cursor", -1), &error);
    if (!page) {
        call->finishText(ToolOutcome::Status::toolError, error, true);
        return;
    }
    if (page->isFindResults) {
        call->finishText(ToolOutcome::Status::toolError,
                         QStringLiteral("Cannot run `find` on search results page or find "
                                        "results page"),
                         true);
        return;
    }
    const browser::Page result = browser::findInPage(pattern.toString().toLower(), *page);
    QPointer<BrowserProvider> self(this);
    QTimer::singleShot(0, call, [self, call, result] {
        if (self) self->showNew(call, result, 0, -1);
    });
}

void BrowserProvider::fetch(BrowserCall* call, const QUrl& url, bool viewSource, int loc,
                            int numLines) {
    const QString shown = truncated(url.toDisplayString());
    const QString prefix = QStringLiteral("Error fetching URL `%1`: ").arg(shown);
    const QString scheme = url.scheme().toLower();
    if (scheme != QLatin1String("http") && scheme != QLatin1String("https")) {
        call->finishText(ToolOutcome::Status::toolError,
                         prefix + QStringLiteral("only http and https URLs can be opened"), true);
        return;
    }
    const int timeoutMs = std::min(m_settings.timeoutMs, call->m_limits.timeoutMs);
    QPointer<BrowserProvider> self(this);
    get(m_network, call, call, &call->m_reply, url, timeoutMs, m_settings.maxPageBytes,
        [self, call, prefix, viewSource, loc, numLines](const Response& response) {
            if (!self) return;
            if (!response.error.isEmpty()) {
                call->finishText(response.errorStatus, prefix + response.error);
                return;
            }
            const QString& mime = response.mimeType;
            const bool html = mime == QLatin1String("text/html") ||
                              mime == QLatin1String("application/xhtml+xml") ||
                              (mime.isEmpty() && response.body.left(1024).contains("<html"));
            browser::Page page;
            if (viewSource && (html || isTextual(mime) || mime.isEmpty())) {
                const QString source = decodeBody(response.body, response.charset, html);
                page = browser::pageFromText(
                    source, QUrl(QStringLiteral("view-source:") + response.finalUrl.toString()),
                    QStringLiteral("Source of %1").arg(response.finalUrl.toDisplayString()));
            } else if (html) {
                page = browser::pageFromHtml(decodeBody(response.body, response.charset, true),
                                             response.finalUrl);
            } else if (isTextual(mime)) {
                page = browser::pageFromText(
                    decodeBody(response.body, response.charset, false), response.finalUrl,
                    response.finalUrl.fileName().isEmpty() ? QString()
                                                           : response.finalUrl.fileName());
            } else {
                call->finishText(
                    ToolOutcome::Status::toolError,
                    prefix + QStringLiteral("the content is of type %1, which the "
                                            "browser cannot show as text")
                                 .arg(mime.isEmpty() ? QStringLiteral("unknown") : mime));
                return;
            }
            self->showNew(call, page, loc, numLines);
        });
}

}  // namespace neural::toolhost
