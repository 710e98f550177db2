#include "builtin/pagetext.h"

#include <algorithm>

#include <QHash>
#include <QRegularExpression>

namespace neural::toolhost::browser {
namespace {

// The reference counts its view in tokens (1024); without the model's tokenizer the view is
// 4096 characters of numbered text, about as much for English prose.
constexpr int kViewChars = 4096;
constexpr int kMaxFindResults = 50;
constexpr int kFindShowLines = 4;

const QChar kDagger(0x2020);                    // †
const QChar kDoubleDagger(0x2021);              // ‡
const QString kOpen = QString(QChar(0x3010));   // 【
const QString kClose = QString(QChar(0x3011));  // 】

QString decodeEntities(QStringView text) {
    static const QHash<QString, QString> named = [] {
        QHash<QString, QString> map;
        const struct {
            const char* name;
            char16_t code;
        } table[] = {
            {"amp", u'&'},      {"lt", u'<'},      {"gt", u'>'},       {"quot", u'"'},
            {"apos", u'\''},    {"nbsp", u' '},    {"copy", 0xA9},     {"reg", 0xAE},
            {"trade", 0x2122},  {"mdash", 0x2014}, {"ndash", 0x2013},  {"hellip", 0x2026},
            {"lsquo", 0x2018},  {"rsquo", 0x2019}, {"ldquo", 0x201C},  {"rdquo", 0x201D},
            {"laquo", 0xAB},    {"raquo", 0xBB},   {"middot", 0xB7},   {"bull", 0x2022},
            {"deg", 0xB0},      {"plusmn", 0xB1},  {"times", 0xD7},    {"divide", 0xF7},
            {"euro", 0x20AC},   {"pound", 0xA3},   {"yen", 0xA5},      {"cent", 0xA2},
            {"sect", 0xA7},     {"para", 0xB6},    {"eacute", 0xE9},   {"egrave", 0xE8},
            {"agrave", 0xE0},   {"aacute", 0xE1},  {"uuml", 0xFC},     {"ouml", 0xF6},
            {"auml", 0xE4},     {"Uuml", 0xDC},    {"Ouml", 0xD6},     {"Auml", 0xC4},
            {"szlig", 0xDF},    {"ccedil", 0xE7},  {"ntilde", 0xF1},   {"shy", 0xAD},
            {"rarr", 0x2192},   {"larr", 0x2190},  {"dagger", 0x2020}, {"Dagger", 0x2021},
            {"thinsp", 0x2009}, {"ensp", 0x2002},  {"emsp", 0x2003},   {"zwj", 0x200D},
            {"zwnj", 0x200C},   {"minus", 0x2212}, {"le", 0x2264},     {"ge", 0x2265},
        };
        for (const auto& entry : table)
            map.insert(QString::fromLatin1(entry.name), QString(QChar(entry.code)));
        return map;
    }();
    QString out;
    out.reserve(text.size());
    for (qsizetype i = 0; i < text.size(); ++i) {
        if (text[i] != u'&') {
            out += text[i];
            continue;
        }
        const qsizetype semicolon = text.indexOf(u';', i + 1);
        if (semicolon < 0 || semicolon - i > 32) {
            out += text[i];
            continue;
        }
        const QStringView name = text.mid(i + 1, semicolon - i - 1);
        bool ok = false;
        if (name.startsWith(u'#')) {
            uint code = 0;
            if (name.size() > 1 && (name[1] == u'x' || name[1] == u'X'))
                code = name.mid(2).toUInt(&ok, 16);
            else
                code = name.mid(1).toUInt(&ok, 10);
            if (ok && code > 0 && code <= 0x10FFFF && (code < 0xD800 || code > 0xDFFF)) {
                const char32_t c = code;
                out += QString::fromUcs4(&c, 1);
                i = semicolon;
                continue;
            }
        } else if (const auto it = named.constFind(name.toString()); it != named.constEnd()) {
            out += *it;
            i = semicolon;
            continue;
        }
        out += text[i];
    }
    return out;
}

// The reference's clean-up of the source: its link brackets and a few symbols are replaced by
// look-alikes, zero-width spaces and characters beyond the BMP (emoji) dropped.
QString replaceSpecialChars(const QString& html) {
    QString out;
    out.reserve(html.size());
    for (qsizetype i = 0; i < html.size(); ++i) {
        const QChar c = html[i];
        if (c.isHighSurrogate() && i + 1 < html.size() && html[i + 1].isLowSurrogate()) {
            const char32_t code = QChar::surrogateToUcs4(c, html[i + 1]);
            if (code >= 0x10000 && code <= 0x1FFFF) {
                ++i;
                continue;
            }
            out += c;
            out += html[i + 1];
            ++i;
            continue;
        }
        switch (c.unicode()) {
            case 0x3010:
                out += QChar(0x3016);
                break;  // 【 -> 〖
            case 0x3011:
                out += QChar(0x3017);
                break;  // 】 -> 〗
            case 0x25FC:
                out += QChar(0x25FE);
                break;  // ◼ -> ◾
            case 0x200B:
                break;
            default:
                out += c;
        }
    }
    return out;
}

// Runs of whitespace become one space (also at the ends: neighbouring text decides).
QString collapseWhitespace(const QString& text) {
    QString out;
    out.reserve(text.size());
    bool space = false;
    for (const QChar c : text) {
        if (c.isSpace()) {
            if (!space) out += u' ';
            space = true;
            continue;
        }
        space = false;
        out += c;
    }
    return out;
}

bool isOneOf(const QString& name, std::initializer_list<const char*> names) {
    for (const char* n : names)
        if (name == QLatin1String(n)) return true;
    return false;
}

// Walks the tags and text of a tolerant tokenizer and writes the reference browser's text.
class Renderer {
public:
    explicit Renderer(const QUrl& base) : m_base(base), m_baseDomain(domainOf(base)) {}

    void run(const QString& html);

    QString text() const;
    QString title;
    QStringList links;

private:
    struct Tag {
        QString name;
        QHash<QString, QString> attributes;
        bool selfClosing = false;
    };
    void startTag(const Tag& tag);
    void endTag(const QString& name);
    void addText(const QString& raw);
    void addInline(const QString& text);
    void block(int newlines);
    void closeAnchor();
    QString& target() { return m_inAnchor ? m_anchorText : m_out; }

    QUrl m_base;
    QString m_baseDomain;
    QString m_out;
    QHash<QString, int> m_linkIds;
    int m_dropDepth = 0;  // inside elements whose content is not shown (svg, math, ...)
    int m_preDepth = 0;
    struct List {
        bool ordered = false;
        int counter = 0;
    };
    QList<List> m_lists;
    bool m_inAnchor = false;
    QString m_anchorHref;
    QString m_anchorText;
    bool m_anchorHasText = false;  // text beyond image placeholders
    int m_images = 0;
    bool m_titleSeen = false;
};

void Renderer::run(const QString& html) {
    const qsizetype n = html.size();
    qsizetype i = 0;
    while (i < n) {
        if (html[i] != u'<') {
            qsizetype next = html.indexOf(u'<', i);
            if (next < 0) next = n;
            addText(decodeEntities(QStringView(html).mid(i, next - i)));
            i = next;
            continue;
        }
        if (QStringView(html).mid(i, 4) == u"<!--") {
            const qsizetype end = html.indexOf(QLatin1String("-->"), i + 4);
            i = end < 0 ? n : end + 3;
            continue;
        }
        if (i + 1 < n && (html[i + 1] == u'!' || html[i + 1] == u'?')) {
            const qsizetype end = html.indexOf(u'>', i);
            i = end < 0 ? n : end + 1;
            continue;
        }
        const bool closing = i + 1 < n && html[i + 1] == u'/';
        qsizetype p = i + (closing ? 2 : 1);
        if (p >= n || !html[p].isLetter()) {
            addText(QStringLiteral("<"));
            ++i;
            continue;
        }
        qsizetype nameEnd = p;
        while (nameEnd < n &&
               (html[nameEnd].isLetterOrNumber() || html[nameEnd] == u'-' || html[nameEnd] == u':'))
            ++nameEnd;
        Tag tag;
        tag.name = html.mid(p, nameEnd - p).toLower();
        // Attributes up to the closing '>' (quoted values may hold '>').
        p = nameEnd;
        while (p < n && html[p] != u'>') {
            if (html[p].isSpace() || html[p] == u'/') {
                if (html[p] == u'/' && p + 1 < n && html[p + 1] == u'>') tag.selfClosing = true;
                ++p;
                continue;
            }
            qsizetype attrEnd = p;
            while (attrEnd < n && !html[attrEnd].isSpace() && html[attrEnd] != u'=' &&
                   html[attrEnd] != u'>' && html[attrEnd] != u'/')
                ++attrEnd;
            const QString attr = html.mid(p, attrEnd - p).toLower();
            p = attrEnd;
            while (p < n && html[p].isSpace()) ++p;
            QString value;
            if (p < n && html[p] == u'=') {
                ++p;
                while (p < n && html[p].isSpace()) ++p;
                if (p < n && (html[p] == u'"' || html[p] == u'\'')) {
                    const QChar quote = html[p];
                    qsizetype end = html.indexOf(quote, p + 1);
                    if (end < 0) end = n;
                    value = html.mid(p + 1, end - p - 1);
                    p = std::min(end + 1, n);
                } else {
                    qsizetype end = p;
                    while (end < n && !html[end].isSpace() && html[end] != u'>') ++end;
                    value = html.mid(p, end - p);
                    p = end;
                }
            }
            if (!attr.isEmpty() && !tag.attributes.contains(attr))
                tag.attributes.insert(attr, decodeEntities(value));
        }
        i = p < n ? p + 1 : n;
        if (closing) {
            endTag(tag.name);
            continue;
        }
        // Raw-text elements: their content is not markup.
        if (isOneOf(tag.name, {"script", "style", "title", "textarea"})) {
            static const QString endMarker = QStringLiteral("</");
            qsizetype end = i;
            for (;;) {
                end = html.indexOf(endMarker, end, Qt::CaseInsensitive);
                if (end < 0 || QStringView(html)
                                       .mid(end + 2, tag.name.size())
                                       .compare(tag.name, Qt::CaseInsensitive) == 0)
                    break;
                end += 2;
            }
            if (end < 0) end = n;
            const QString content = html.mid(i, end - i);
            if (tag.name == QLatin1String("title")) {
                if (!m_titleSeen) title = collapseWhitespace(decodeEntities(content)).trimmed();
                m_titleSeen = true;
            } else if (tag.name == QLatin1String("textarea")) {
                addText(decodeEntities(content));
            }
            const qsizetype close = end < n ? html.indexOf(u'>', end) : -1;
            i = close < 0 ? n : close + 1;
            continue;
        }
        startTag(tag);
    }
    closeAnchor();
}

void Renderer::block(int newlines) {
    if (m_inAnchor) {
        m_anchorText += u' ';
        return;
    }
    while (m_out.endsWith(u' ')) m_out.chop(1);
    if (m_out.isEmpty()) return;
    int have = 0;
    for (qsizetype k = m_out.size() - 1; k >= 0 && m_out[k] == u'\n'; --k) ++have;
    for (; have < newlines; ++have) m_out += u'\n';
}

void Renderer::addInline(const QString& text) {
    if (text.isEmpty()) return;
    QString& out = target();
    if (text.startsWith(u' ') && (out.isEmpty() || out.endsWith(u' ') || out.endsWith(u'\n')))
        out += QStringView(text).mid(1);
    else
        out += text;
}

void Renderer::addText(const QString& raw) {
    if (m_dropDepth > 0 || raw.isEmpty()) return;
    if (m_preDepth > 0) {
        target() += raw;
        if (m_inAnchor) m_anchorHasText = true;
        return;
    }
    const QString text = collapseWhitespace(raw);
    if (m_inAnchor && !text.trimmed().isEmpty()) m_anchorHasText = true;
    addInline(text);
}

void Renderer::startTag(const Tag& tag) {
    const QString& name = tag.name;
    if (isOneOf(name, {"svg", "math", "noscript", "template", "iframe", "object", "canvas"})) {
        if (!tag.selfClosing) ++m_dropDepth;
        return;
    }
    if (m_dropDepth > 0) return;
    if (name.size() == 2 && name[0] == u'h' && name[1] >= u'1' && name[1] <= u'6') {
        block(2);
        if (!m_inAnchor) m_out += QString(name[1].unicode() - u'0', u'#') + u' ';
    } else if (isOneOf(name, {"p", "blockquote", "table", "dl", "figure"})) {
        block(2);
    } else if (name == QLatin1String("pre")) {
        block(2);
        ++m_preDepth;
    } else if (name == QLatin1String("ul") || name == QLatin1String("ol")) {
        block(m_lists.isEmpty() ? 2 : 1);
        m_lists.append(List{name == QLatin1String("ol"), 0});
    } else if (name == QLatin1String("li")) {
        block(1);
        if (!m_inAnchor) {
            const int depth = std::max<int>(1, int(m_lists.size()));
            QString bullet = QStringLiteral("* ");
            if (!m_lists.isEmpty() && m_lists.back().ordered)
                bullet = QStringLiteral("%1. ").arg(++m_lists.back().counter);
            m_out += QString(2 * depth, u' ') + bullet;
        }
    } else if (isOneOf(name, {"div", "section", "article", "header", "footer", "nav", "main",
                              "aside", "tr", "dt", "dd", "form", "figcaption", "address", "caption",
                              "details", "summary", "fieldset", "center"})) {
        block(1);
    } else if (name == QLatin1String("br")) {
        if (m_inAnchor) {
            m_anchorText += u' ';
        } else {
            while (m_out.endsWith(u' ')) m_out.chop(1);
            m_out += u'\n';
        }
    } else if (name == QLatin1String("hr")) {
        block(2);
        if (!m_inAnchor) m_out += QStringLiteral("* * *");
        block(2);
    } else if (name == QLatin1String("td") || name == QLatin1String("th")) {
        addInline(QStringLiteral(" "));
    } else if (name == QLatin1String("img")) {
        const QString alt = tag.attributes.value(QStringLiteral("alt"),
                                                 tag.attributes.value(QStringLiteral("title")));
        const QString label = collapseWhitespace(alt).trimmed();
        addInline(label.isEmpty() ? QStringLiteral("[Image %1]").arg(m_images)
                                  : QStringLiteral("[Image %1: %2]").arg(m_images).arg(label));
        ++m_images;
    } else if (name == QLatin1String("sup")) {
        addInline(QStringLiteral("^{"));
    } else if (name == QLatin1String("sub")) {
        addInline(QStringLiteral("_{"));
    } else if (name == QLatin1String("a")) {
        closeAnchor();
        if (tag.attributes.contains(QStringLiteral("href"))) {
            m_inAnchor = true;
            m_anchorHref = tag.attributes.value(QStringLiteral("href")).trimmed();
            m_anchorText.clear();
            m_anchorHasText = false;
        }
    }
}

void Renderer::endTag(const QString& name) {
    if (isOneOf(name, {"svg", "math", "noscript", "template", "iframe", "object", "canvas"})) {
        if (m_dropDepth > 0) --m_dropDepth;
        return;
    }
    if (m_dropDepth > 0) return;
    if (name.size() == 2 && name[0] == u'h' && name[1] >= u'1' && name[1] <= u'6') {
        closeAnchor();
        block(2);
    } else if (isOneOf(name, {"p", "blockquote", "table", "dl", "figure"})) {
        closeAnchor();
        block(2);
    } else if (name == QLatin1String("pre")) {
        if (m_preDepth > 0) --m_preDepth;
        block(2);
    } else if (name == QLatin1String("ul") || name == QLatin1String("ol")) {
        closeAnchor();
        if (!m_lists.isEmpty()) m_lists.removeLast();
        block(m_lists.isEmpty() ? 2 : 1);
    } else if (isOneOf(name, {"li", "div", "section", "article", "header", "footer", "nav", "main",
                              "aside", "tr", "dt", "dd", "form", "figcaption"})) {
        block(1);
    } else if (name == QLatin1String("sup") || name == QLatin1String("sub")) {
        addInline(QStringLiteral("}"));
    } else if (name == QLatin1String("a")) {
        closeAnchor();
    }
}

// Replaces the finished link by the reference's notation (or its plain text where the reference
// leaves the link out: fragments, mailto:/javascript:, links without text).
void Renderer::closeAnchor() {
    if (!m_inAnchor) return;
    m_inAnchor = false;
    const QString text = collapseWhitespace(m_anchorText).trimmed().replace(kDagger, kDoubleDagger);
    const QString& href = m_anchorHref;
    const bool plain = !m_anchorHasText || href.startsWith(u'#') ||
                       href.startsWith(QLatin1String("mailto:"), Qt::CaseInsensitive) ||
                       href.startsWith(QLatin1String("javascript:"), Qt::CaseInsensitive);
    const QUrl url = plain ? QUrl() : m_base.resolved(QUrl(href));
    const QString domain = plain ? QString() : domainOf(url);
    const QString leading = m_anchorText.startsWith(u' ') || m_anchorText.startsWith(u'\n')
                                ? QStringLiteral(" ")
                                : QString();
    if (plain || domain.isEmpty()) {
        addInline(leading + text);
        return;
    }
    const QString key = url.toString(QUrl::FullyEncoded);
    int id = m_linkIds.value(key, -1);
    if (id < 0) {
        id = int(links.size());
        links.append(key);
        m_linkIds.insert(key, id);
    }
    QString link = kOpen + QString::number(id) + kDagger + text;
    if (domain != m_baseDomain) link += kDagger + domain;
    link += kClose;
    addInline(leading + link);
}

QString Renderer::text() const {
    // Whitespace-only lines emptied, runs of blank lines made one, ends trimmed.
    QStringList lines = m_out.split(u'\n');
    for (QString& line : lines) {
        while (!line.isEmpty() && line.back().isSpace()) line.chop(1);
    }
    QStringList kept;
    for (const QString& line : lines) {
        if (line.isEmpty() && !kept.isEmpty() && kept.back().isEmpty()) continue;
        kept.append(line);
    }
    while (!kept.isEmpty() && kept.front().isEmpty()) kept.removeFirst();
    while (!kept.isEmpty() && kept.back().isEmpty()) kept.removeLast();
    return kept.join(u'\n');
}

QString urlForDisplay(const QString& url) {
    QString shown = QUrl::fromPercentEncoding(url.toUtf8());
    if (shown.size() > 1024) shown = shown.left(1021) + QStringLiteral("...");
    return shown;
}

}  // namespace

QString domainOf(const QUrl& url) {
    if (url.host().isEmpty()) return {};
    return url.port() >= 0 ? QStringLiteral("%1:%2").arg(url.host()).arg(url.port()) : url.host();
}

Page pageFromHtml(const QString& html, const QUrl& url, const QString& title, bool showUrl) {
    Renderer renderer(url);
    renderer.run(replaceSpecialChars(html));
    Page page;
    page.url = url.isEmpty() ? QString() : url.toString(QUrl::FullyEncoded);
    page.title = !title.isEmpty()            ? title
                 : !renderer.title.isEmpty() ? renderer.title
                                             : domainOf(url);
    page.links = renderer.links;
    page.text = renderer.text();
    if (showUrl) page.text = QStringLiteral("\nURL: %1\n").arg(page.url) + page.text;
    return page;
}

Page pageFromText(const QString& text, const QUrl& url, const QString& title) {
    Page page;
    page.url = url.toString(QUrl::FullyEncoded);
    page.title = title.isEmpty() ? domainOf(url) : title;
    QString body = replaceSpecialChars(text);
    body.replace(QStringLiteral("\r\n"), QStringLiteral("\n"));
    page.text = QStringLiteral("\nURL: %1\n").arg(page.url) + body;
    return page;
}

QStringList wrapLines(const QString& text, int width) {
    QStringList result;
    for (const QString& line : text.split(u'\n')) {
        if (line.isEmpty()) {
            result.append(QString());
            continue;
        }
        // Chunks alternate between runs of whitespace and words (textwrap, keeping whitespace).
        QStringList chunks;
        for (qsizetype i = 0; i < line.size();) {
            const bool space = line[i].isSpace();
            qsizetype j = i;
            while (j < line.size() && line[j].isSpace() == space) ++j;
            chunks.append(line.mid(i, j - i));
            i = j;
        }
        std::reverse(chunks.begin(), chunks.end());
        while (!chunks.isEmpty()) {
            QString current;
            while (!chunks.isEmpty() && current.size() + chunks.back().size() <= width)
                current += chunks.takeLast();
            if (!chunks.isEmpty() && chunks.back().size() > width) {
                // A word longer than a line is broken.
                const qsizetype room = std::max<qsizetype>(1, width - current.size());
                current += chunks.back().left(room);
                chunks.back() = chunks.back().mid(room);
            }
            if (!current.isEmpty()) result.append(current);
        }
    }
    return result;
}

QString showPage(const Page& page, int cursor, int loc, int numLines, QString* error) {
    const QStringList lines = wrapLines(page.text);
    const int total = int(lines.size());
    if (loc >= total) {
        if (error)
            *error = QStringLiteral(
                         "Invalid location parameter: `%1`. Cannot exceed page maximum "
                         "of %2.")
                         .arg(loc)
                         .arg(total - 1);
        return {};
    }
    loc = std::max(loc, 0);
    auto numbered = [&](int from, int to) {
        QStringList out;
        for (int i = from; i < to; ++i) out.append(QStringLiteral("L%1: %2").arg(i).arg(lines[i]));
        return out.join(u'\n');
    };
    if (numLines <= 0) {
        const QString rest = numbered(loc, total);
        numLines = rest.size() > kViewChars ? int(rest.left(kViewChars).count(u'\n')) + 1 : total;
    }
    const int end = std::min(loc + numLines, total);
    QString header = page.title;
    const QString shownUrl = urlForDisplay(page.url);
    if (!shownUrl.isEmpty()) header += QStringLiteral(" (%1)").arg(shownUrl);
    header += QStringLiteral("\n**viewing lines [%1 - %2] of %3**\n\n")
                  .arg(loc)
                  .arg(end - 1)
                  .arg(total - 1);
    return QStringLiteral("[%1] ").arg(cursor) + header + numbered(loc, end);
}

Page findInPage(const QString& pattern, const Page& page) {
    QString text = wrapLines(page.text).join(u'\n');
    // Links are searched and shown as their text (the reference's strip_links).
    static const QRegularExpression partialInitial(QStringLiteral("^[^\u3010\u3011]*\u3011"));
    static const QRegularExpression partialFinal(QStringLiteral(
        "\u3010\\d*(?:\u2020(?<content>[^\u2020\u3011]*)(?:\u2020[^\u2020\u3011]*)?)?$"));
    static const QRegularExpression link(QStringLiteral(
        "\u3010\\d+\u2020(?<content>[^\u2020\u3011]+)(?:\u2020[^\u2020\u3011]+)?\u3011"));
    text.remove(partialInitial);
    auto replaceWithContent = [](QString input, const QRegularExpression& re) {
        QString out;
        qsizetype last = 0;
        for (auto it = re.globalMatch(input); it.hasNext();) {
            const QRegularExpressionMatch match = it.next();
            out += QStringView(input).mid(last, match.capturedStart() - last);
            out += match.captured(QStringLiteral("content"));
            last = match.capturedEnd();
        }
        out += QStringView(input).mid(last);
        return out;
    };
    text = replaceWithContent(text, partialFinal);
    text = replaceWithContent(text, link);
    const QStringList lines = text.split(u'\n');

    Page result;
    result.isFindResults = true;
    QStringList chunks;
    for (int i = 0; i < lines.size();) {
        if (!lines[i].contains(pattern, Qt::CaseInsensitive)) {
            ++i;
            continue;
        }
        const int match = int(chunks.size());
        chunks.append(QStringLiteral("# %1%2%3match at L%4%5\n")
                          .arg(kOpen)
                          .arg(match)
                          .arg(kDagger)
                          .arg(i)
                          .arg(kClose) +
                      lines.mid(i, kFindShowLines).join(u'\n'));
        result.links.append(page.url);
        result.linkLines.append(i);
        if (chunks.size() == kMaxFindResults) break;
        i += kFindShowLines;
    }
    result.url = page.url + QStringLiteral("/find?pattern=") +
                 QString::fromLatin1(QUrl::toPercentEncoding(pattern, "/"));
    result.title = QStringLiteral("Find results for text: `%1` in `%2`").arg(pattern, page.title);
    result.text = chunks.isEmpty()
                      ? QStringLiteral("No `find` results for pattern: `%1`").arg(pattern)
                      : chunks.join(QStringLiteral("\n\n"));
    return result;
}

}  // namespace neural::toolhost::browser
