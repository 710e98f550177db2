#include "builtin/searchresults.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QUrl>

namespace neural::toolhost::browser {
namespace {

bool isWebUrl(const QString& text) {
    const QUrl url(text, QUrl::StrictMode);
    return url.isValid() && !url.host().isEmpty() &&
           (url.scheme() == QLatin1String("http") || url.scheme() == QLatin1String("https"));
}

QString firstString(const QJsonObject& o, std::initializer_list<const char*> keys) {
    for (const char* key : keys) {
        const QJsonValue v = o.value(QLatin1String(key));
        if (v.isString() && !v.toString().trimmed().isEmpty()) return v.toString().trimmed();
    }
    return {};
}

// A result object of a JSON answer; no url when it has none.
SearchResult fromJson(const QJsonObject& o) {
    SearchResult r;
    r.url = firstString(o, {"url", "link", "href"});
    r.title = firstString(o, {"title", "name"});
    r.snippet = firstString(o, {"snippet", "content", "description", "summary", "text"});
    return r;
}

// The result list of a JSON answer, or null when it holds none.
QJsonArray resultArray(const QJsonDocument& document) {
    if (document.isArray()) return document.array();
    const QJsonObject o = document.object();
    for (const char* key : {"results", "items", "organic", "organic_results", "data", "hits"}) {
        const QJsonValue v = o.value(QLatin1String(key));
        if (v.isArray()) return v.toArray();
    }
    const QJsonValue web = o.value(QStringLiteral("web"));
    if (web.isObject() && web.toObject().value(QStringLiteral("results")).isArray())
        return web.toObject().value(QStringLiteral("results")).toArray();
    return {};
}

const QRegularExpression& markdownLink() {
    static const QRegularExpression re(QStringLiteral(R"(\[([^\]\n]+)\]\((https?://[^\s)]+)\))"));
    return re;
}

const QRegularExpression& bareUrl() {
    static const QRegularExpression re(QStringLiteral(R"(https?://[^\s<>"'\])]+)"));
    return re;
}

// "Title: x" -> "x" when `line` starts with one of `labels` (case-insensitive) and a colon.
bool labelled(const QString& line, std::initializer_list<const char*> labels, QString* value) {
    for (const char* label : labels) {
        const QString l = QLatin1String(label);
        if (line.size() > l.size() && line.startsWith(l, Qt::CaseInsensitive) &&
            line.at(l.size()) == QLatin1Char(':')) {
            *value = line.mid(l.size() + 1).trimmed();
            return true;
        }
    }
    return false;
}

// A line without its list marker ("1.", "-", "*"), heading marks and bold stars.
QString plainLine(QString line) {
    static const QRegularExpression marker(QStringLiteral(R"(^\s*(?:\d+[.)]|[-*\x{2022}]|#+)\s+)"));
    line.remove(marker);
    line.remove(QStringLiteral("**"));
    return line.trimmed();
}

QString trimUrl(QString url) {
    while (!url.isEmpty() && QStringLiteral(".,;:!?").contains(url.back())) url.chop(1);
    return url;
}

// One block of a text answer: its result, with no url when it names none.
SearchResult fromBlock(const QStringList& lines) {
    SearchResult r;
    QStringList rest;
    for (const QString& raw : lines) {
        const QString line = plainLine(raw);
        QString value;
        if (labelled(line, {"url", "link", "source"}, &value)) {
            const QRegularExpressionMatch m = bareUrl().match(value);
            if (r.url.isEmpty() && m.hasMatch()) r.url = trimUrl(m.captured(0));
        } else if (labelled(line, {"title"}, &value)) {
            if (r.title.isEmpty()) r.title = value;
        } else if (labelled(line, {"description", "snippet", "content", "summary"}, &value)) {
            if (r.snippet.isEmpty()) r.snippet = value;
        } else if (const QRegularExpressionMatch m = markdownLink().match(line);
                   m.hasMatch() && r.url.isEmpty()) {
            r.url = m.captured(2);
            if (r.title.isEmpty()) r.title = m.captured(1).trimmed();
            QString after = line.mid(m.capturedEnd()).trimmed();
            after.remove(QRegularExpression(QStringLiteral(R"(^[-\x{2013}\x{2014}:|]\s*)")));
            if (!after.isEmpty()) rest << after;
        } else if (const QRegularExpressionMatch u = bareUrl().match(line);
                   u.hasMatch() && r.url.isEmpty()) {
            r.url = trimUrl(u.captured(0));
            QString other = line;
            other.remove(u.capturedStart(), u.capturedLength());
            // What is left around the address: "Title (", "Title - ", "<>".
            static const QRegularExpression edges(QStringLiteral(
                R"(^[\s()<>\[\]\-\x{2013}\x{2014}:|]+|[\s()<>\[\]\-\x{2013}\x{2014}:|]+$)"));
            other.remove(edges);
            if (!other.isEmpty() && r.title.isEmpty()) r.title = other;
        } else if (!line.isEmpty()) {
            rest << line;
        }
    }
    if (r.title.isEmpty() && !rest.isEmpty()) r.title = rest.takeFirst();
    if (r.snippet.isEmpty()) r.snippet = rest.join(QLatin1Char(' '));
    return r;
}

}  // namespace

Page searchResultsPage(const QList<SearchResult>& results, const QString& query, int topn) {
    QString html = QStringLiteral("<html><body>\n<h1>Search Results</h1>\n<ul>\n");
    int count = 0;
    for (const SearchResult& r : results) {
        if (count == topn) break;
        html +=
            QStringLiteral("<li><a href='%1'>%2</a> %3</li>\n")
                .arg(r.url.toHtmlEscaped(), (r.title.isEmpty() ? r.url : r.title).toHtmlEscaped(),
                     r.snippet.toHtmlEscaped());
        ++count;
    }
    if (count == 0) html += QStringLiteral("<li>No results.</li>\n");
    html += QStringLiteral("</ul>\n</body></html>\n");
    return pageFromHtml(html, QUrl(), query, false);
}

QList<SearchResult> parseSearchResults(const QString& text) {
    QList<SearchResult> found;
    const auto keep = [&found](SearchResult r) {
        r.url = r.url.trimmed();
        if (!isWebUrl(r.url)) return;
        for (const SearchResult& f : std::as_const(found))
            if (f.url == r.url) return;
        found.push_back(std::move(r));
    };
    // JSON: the whole answer, else one object per line.
    QJsonParseError error;
    const QJsonDocument document = QJsonDocument::fromJson(text.trimmed().toUtf8(), &error);
    if (error.error == QJsonParseError::NoError && !document.isNull()) {
        const QJsonArray list = resultArray(document);
        if (!list.isEmpty()) {
            for (const QJsonValue& v : list) keep(fromJson(v.toObject()));
        } else if (document.isObject()) {
            keep(fromJson(document.object()));
        }
        return found;
    }
    bool allJson = true;
    QList<QJsonObject> objects;
    for (const QString& line : text.split(QLatin1Char('\n'), Qt::SkipEmptyParts)) {
        if (line.trimmed().isEmpty()) continue;
        const QJsonDocument d = QJsonDocument::fromJson(line.trimmed().toUtf8(), &error);
        if (error.error != QJsonParseError::NoError || !d.isObject()) {
            allJson = false;
            break;
        }
        objects.push_back(d.object());
    }
    if (allJson && !objects.isEmpty()) {
        for (const QJsonObject& o : objects) keep(fromJson(o));
        return found;
    }
    // Text: blocks between blank lines (or rules).
    static const QRegularExpression rule(QStringLiteral(R"(^\s*([-=*_])\1{2,}\s*$)"));
    QList<QStringList> blocks(1);
    for (const QString& line : text.split(QLatin1Char('\n'))) {
        if (line.trimmed().isEmpty() || rule.match(line).hasMatch()) {
            if (!blocks.back().isEmpty()) blocks.push_back({});
            continue;
        }
        blocks.back().push_back(line);
    }
    for (const QStringList& block : std::as_const(blocks)) {
        if (block.isEmpty()) continue;
        // A list of links: one result per line.
        int linkLines = 0;
        for (const QString& line : block)
            if (markdownLink().match(line).hasMatch()) ++linkLines;
        if (linkLines > 1) {
            for (const QString& line : block)
                if (markdownLink().match(line).hasMatch()) keep(fromBlock({line}));
            continue;
        }
        keep(fromBlock(block));
    }
    return found;
}

QString searchArguments(const std::optional<nlohmann::ordered_json>& schema, const QString& query,
                        int topn) {
    nlohmann::ordered_json properties = nlohmann::ordered_json::object();
    nlohmann::ordered_json required = nlohmann::ordered_json::array();
    if (schema && schema->is_object()) {
        if (auto p = schema->find("properties"); p != schema->end() && p->is_object())
            properties = *p;
        if (auto r = schema->find("required"); r != schema->end() && r->is_array()) required = *r;
    }
    const auto has = [&](const char* key) { return properties.contains(key); };
    std::string queryKey;
    for (const char* key :
         {"query", "q", "search_query", "searchQuery", "search", "text", "keywords"})
        if (has(key)) {
            queryKey = key;
            break;
        }
    if (queryKey.empty())
        for (const auto& r : required)
            if (r.is_string() && properties.contains(r.get<std::string>()) &&
                properties[r.get<std::string>()].value("type", "") == "string") {
                queryKey = r.get<std::string>();
                break;
            }
    if (queryKey.empty()) queryKey = "query";
    nlohmann::ordered_json args = nlohmann::ordered_json::object();
    args[queryKey] = query.toStdString();
    for (const char* key : {"count", "max_results", "maxResults", "num_results", "numResults",
                            "limit", "topn", "top_n", "n", "size"})
        if (has(key) && key != queryKey) {
            args[key] = topn;
            break;
        }
    return QString::fromStdString(args.dump());
}

}  // namespace neural::toolhost::browser
