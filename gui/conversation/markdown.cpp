#include "conversation/markdown.h"

#include <QFontDatabase>
#include <QRegularExpression>
#include <QSet>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextDocument>
#include <QTextFrame>
#include <QTextTable>

namespace neural::gui {

namespace {

bool isDark(const QPalette& p) { return p.color(QPalette::Base).lightness() < 128; }

QColor blend(const QColor& a, const QColor& b, double t) {
    return QColor::fromRgbF(static_cast<float>(a.redF() * (1 - t) + b.redF() * t),
                            static_cast<float>(a.greenF() * (1 - t) + b.greenF() * t),
                            static_cast<float>(a.blueF() * (1 - t) + b.blueF() * t));
}

const QSet<QString>& keywords(const QString& lang) {
    auto set = [](const char* words) {
        QSet<QString> s;
        for (const QString& w : QString::fromLatin1(words).split(QLatin1Char(' '))) s.insert(w);
        return s;
    };
    static const QSet<QString> cpp =
        set("alignas alignof auto bool break case catch char class concept const consteval "
            "constexpr constinit const_cast continue co_await co_return co_yield decltype default "
            "delete do double dynamic_cast else enum explicit export extern false float for friend "
            "goto if inline int long mutable namespace new noexcept nullptr operator private "
            "protected public register reinterpret_cast requires return short signed sizeof static "
            "static_assert static_cast struct switch template this throw true try typedef typeid "
            "typename union unsigned using virtual void volatile while include define ifdef ifndef "
            "endif pragma size_t uint8_t uint32_t uint64_t int32_t int64_t std");
    static const QSet<QString> python =
        set("False None True and as assert async await break class continue def del elif else "
            "except finally for from global if import in is lambda nonlocal not or pass raise "
            "return try while with yield self print len range int str float list dict set tuple");
    static const QSet<QString> js =
        set("break case catch class const continue debugger default delete do else export extends "
            "false finally for function if import in instanceof let new null return super switch "
            "this throw true try typeof var void while with yield async await of static get set "
            "undefined interface type enum implements private public protected readonly as any "
            "number string boolean never unknown");
    static const QSet<QString> json = set("true false null");
    static const QSet<QString> sh =
        set("if then else elif fi case esac for while until do done in function return local "
            "export echo cd exit set unset source read shift break continue sudo");
    static const QSet<QString> rust =
        set("as async await break const continue crate dyn else enum extern false fn for if impl "
            "in let loop match mod move mut pub ref return self Self static struct super trait "
            "true type unsafe use where while i8 i16 i32 i64 i128 isize u8 u16 u32 u64 u128 usize "
            "f32 f64 bool char str String Vec Option Some None Result Ok Err Box");
    static const QSet<QString> go =
        set("break case chan const continue default defer else fallthrough for func go goto if "
            "import interface map package range return select struct switch type var true false "
            "nil int int8 int16 int32 int64 uint uint8 uint16 uint32 uint64 float32 float64 string "
            "bool byte rune error make len cap append new panic");
    static const QSet<QString> none;
    if (lang == QLatin1String("cpp")) return cpp;
    if (lang == QLatin1String("python")) return python;
    if (lang == QLatin1String("js")) return js;
    if (lang == QLatin1String("json")) return json;
    if (lang == QLatin1String("sh")) return sh;
    if (lang == QLatin1String("rust")) return rust;
    if (lang == QLatin1String("go")) return go;
    return none;
}

bool isIdentStart(QChar c) { return c.isLetter() || c == QLatin1Char('_'); }
bool isIdent(QChar c) { return c.isLetterOrNumber() || c == QLatin1Char('_'); }

}  // namespace

CodeColors codeColors(const QPalette& p) {
    const QColor base = p.color(QPalette::Base);
    const QColor text = p.color(QPalette::Text);
    CodeColors c;
    c.background = blend(base, text, 0.06);
    c.header = blend(base, text, 0.12);
    c.text = text;
    c.label = blend(text, base, 0.35);
    if (isDark(p)) {
        c.keyword = QColor(0x79, 0xb8, 0xff);
        c.string = QColor(0xa5, 0xd6, 0x7f);
        c.comment = QColor(0x8b, 0x94, 0x9e);
        c.number = QColor(0xf7, 0x8c, 0x6c);
    } else {
        c.keyword = QColor(0x00, 0x3f, 0xb3);
        c.string = QColor(0x0a, 0x6b, 0x1f);
        c.comment = QColor(0x6a, 0x73, 0x7d);
        c.number = QColor(0xa3, 0x3b, 0x00);
    }
    return c;
}

QString codeLanguage(const QString& info) {
    const QString l = info.trimmed().section(QLatin1Char(' '), 0, 0).toLower();
    static const QList<QPair<QString, QStringList>> names = {
        {QStringLiteral("cpp"),
         {QStringLiteral("c"), QStringLiteral("cpp"), QStringLiteral("c++"), QStringLiteral("cc"),
          QStringLiteral("cxx"), QStringLiteral("h"), QStringLiteral("hpp"),
          QStringLiteral("cuda")}},
        {QStringLiteral("python"),
         {QStringLiteral("python"), QStringLiteral("py"), QStringLiteral("python3")}},
        {QStringLiteral("js"),
         {QStringLiteral("js"), QStringLiteral("javascript"), QStringLiteral("ts"),
          QStringLiteral("typescript"), QStringLiteral("jsx"), QStringLiteral("tsx"),
          QStringLiteral("mjs")}},
        {QStringLiteral("json"), {QStringLiteral("json"), QStringLiteral("jsonc")}},
        {QStringLiteral("sh"),
         {QStringLiteral("sh"), QStringLiteral("bash"), QStringLiteral("shell"),
          QStringLiteral("zsh"), QStringLiteral("console")}},
        {QStringLiteral("rust"), {QStringLiteral("rust"), QStringLiteral("rs")}},
        {QStringLiteral("go"), {QStringLiteral("go"), QStringLiteral("golang")}},
    };
    for (const auto& [lang, aliases] : names)
        if (aliases.contains(l)) return lang;
    return {};
}

QList<CodeSpan> highlightCode(const QString& code, const QString& language) {
    QList<CodeSpan> out;
    const QSet<QString>& words = keywords(language);
    if (words.isEmpty()) return out;
    const bool hashComments =
        language == QLatin1String("python") || language == QLatin1String("sh");
    const bool slashComments = language == QLatin1String("cpp") ||
                               language == QLatin1String("js") ||
                               language == QLatin1String("rust") || language == QLatin1String("go");
    // Rust's ' starts lifetimes as well as chars; only " is a string there.
    const bool singleQuotes = language != QLatin1String("rust");
    const bool backticks = language == QLatin1String("js") || language == QLatin1String("go");
    const int n = static_cast<int>(code.size());
    auto at = [&](int i) { return i < n ? code[i] : QChar(); };
    int i = 0;
    while (i < n) {
        const QChar c = code[i];
        const int start = i;
        if ((hashComments && c == QLatin1Char('#')) ||
            (slashComments && c == QLatin1Char('/') && at(i + 1) == QLatin1Char('/'))) {
            while (i < n && code[i] != QLatin1Char('\n')) ++i;
            out.push_back({start, i - start, CodeSpan::comment});
            continue;
        }
        if (slashComments && c == QLatin1Char('/') && at(i + 1) == QLatin1Char('*')) {
            const int end = static_cast<int>(code.indexOf(QStringLiteral("*/"), i + 2));
            i = end < 0 ? n : end + 2;
            out.push_back({start, i - start, CodeSpan::comment});
            continue;
        }
        if (c == QLatin1Char('"') || (singleQuotes && c == QLatin1Char('\'')) ||
            (backticks && c == QLatin1Char('`'))) {
            const bool triple =
                language == QLatin1String("python") && at(i + 1) == c && at(i + 2) == c;
            const QString close = triple ? QString(3, c) : QString(c);
            // Shell single quotes have no escapes; a plain string ends at the line's end.
            const bool escapes = !(language == QLatin1String("sh") && c == QLatin1Char('\''));
            const bool multiline = triple || c == QLatin1Char('`');
            i += static_cast<int>(close.size());
            while (i < n) {
                if (escapes && code[i] == QLatin1Char('\\')) {
                    i += 2;
                    continue;
                }
                if (!multiline && code[i] == QLatin1Char('\n')) break;
                if (QStringView(code).mid(i).startsWith(close)) {
                    i += static_cast<int>(close.size());
                    break;
                }
                ++i;
            }
            i = std::min(i, n);
            out.push_back({start, i - start, CodeSpan::string});
            continue;
        }
        if (c.isDigit() ||
            (c == QLatin1Char('-') && language == QLatin1String("json") && at(i + 1).isDigit())) {
            ++i;
            while (i < n && (isIdent(code[i]) || code[i] == QLatin1Char('.'))) ++i;
            out.push_back({start, i - start, CodeSpan::number});
            continue;
        }
        if (isIdentStart(c)) {
            while (i < n && isIdent(code[i])) ++i;
            if (words.contains(code.mid(start, i - start)))
                out.push_back({start, i - start, CodeSpan::keyword});
            continue;
        }
        ++i;
    }
    return out;
}

namespace {

struct CodeGroup {
    int start = 0;  // document position of the first character
    int end = 0;    // position after the last character
    QString info;   // the fence's info string
    bool fenced = false;
};

// Qt's importer leaves an empty block, formatted as code, at the top of a table's first cell
// when the table follows a code block: it would push that cell's text down a line and join the
// code block before it. Removed before anything else is styled.
void dropEmptyCellBlocks(QTextFrame* frame) {
    for (QTextFrame* child : frame->childFrames()) {
        if (auto* table = qobject_cast<QTextTable*>(child)) {
            for (int r = 0; r < table->rows(); ++r) {
                for (int col = 0; col < table->columns(); ++col) {
                    const QTextTableCell cell = table->cellAt(r, col);
                    const QTextBlock first = cell.firstCursorPosition().block();
                    const QTextBlock last = cell.lastCursorPosition().block();
                    if (first == last || first.length() > 1) continue;
                    const QTextBlock second = first.next();
                    const QTextBlockFormat keep = second.blockFormat();
                    const QTextCharFormat keepChar = second.charFormat();
                    QTextCursor c(second);
                    c.deletePreviousChar();  // the empty block's separator
                    c.setBlockFormat(keep);
                    c.setBlockCharFormat(keepChar);
                }
            }
        }
        dropEmptyCellBlocks(child);
    }
}

void styleTables(QTextFrame* frame, const QPalette& palette) {
    for (QTextFrame* child : frame->childFrames()) {
        if (auto* table = qobject_cast<QTextTable*>(child)) {
            QTextTableFormat f = table->format();
            f.setBorder(1);
            f.setBorderBrush(
                blend(palette.color(QPalette::Base), palette.color(QPalette::Text), 0.3));
            f.setBorderStyle(QTextFrameFormat::BorderStyle_Solid);
            f.setBorderCollapse(true);
            f.setCellSpacing(0);
            f.setCellPadding(4);
            f.setTopMargin(4);
            f.setBottomMargin(4);
            table->setFormat(f);
            const QColor head =
                blend(palette.color(QPalette::Base), palette.color(QPalette::Text), 0.08);
            QTextCharFormat bold;
            bold.setFontWeight(QFont::Bold);
            for (int col = 0; col < table->columns(); ++col) {
                QTextTableCell cell = table->cellAt(0, col);
                QTextTableCellFormat cf = cell.format().toTableCellFormat();
                cf.setBackground(head);
                cell.setFormat(cf);
                QTextCursor c = cell.firstCursorPosition();
                c.setPosition(cell.lastCursorPosition().position(), QTextCursor::KeepAnchor);
                c.mergeCharFormat(bold);
            }
        }
        styleTables(child, palette);
    }
}

}  // namespace

QStringList renderMarkdown(QTextDocument* docPtr, const QString& markdown, const QPalette& palette,
                           int firstCodeIndex) {
    QTextDocument& doc = *docPtr;
    doc.setMarkdown(markdown, QTextDocument::MarkdownDialectGitHub);
    dropEmptyCellBlocks(doc.rootFrame());
    const CodeColors colors = codeColors(palette);
    const QFont fixed = QFontDatabase::systemFont(QFontDatabase::FixedFont);
    QTextCharFormat mono;
    mono.setFontFamilies({fixed.family(), QStringLiteral("monospace")});
    mono.setFontFixedPitch(true);
    mono.setForeground(colors.text);
    QTextCursor cursor(&doc);

    // Code blocks: the importer gives each line its own block, marked with BlockCodeFence
    // (fenced) or non-breakable lines (indented); consecutive ones form one code block.
    QList<CodeGroup> groups;
    bool inGroup = false;
    for (QTextBlock b = doc.begin(); b.isValid(); b = b.next()) {
        const QTextBlockFormat bf = b.blockFormat();
        const bool fenced = bf.hasProperty(QTextFormat::BlockCodeFence);
        if (fenced || bf.nonBreakableLines()) {
            const QString info = bf.stringProperty(QTextFormat::BlockCodeLanguage);
            if (!inGroup || groups.last().fenced != fenced || groups.last().info != info)
                groups.push_back({b.position(), 0, info, fenced});
            groups.last().end = b.position() + b.length() - 1;
            inGroup = true;
            QTextBlockFormat nb = bf;
            nb.setBackground(colors.background);
            nb.setLeftMargin(8);
            nb.setRightMargin(8);
            cursor.setPosition(b.position());
            cursor.setBlockFormat(nb);
            cursor.setPosition(b.position() + b.length() - 1, QTextCursor::KeepAnchor);
            cursor.setCharFormat(mono);
            continue;
        }
        inGroup = false;
        if (bf.hasProperty(QTextFormat::BlockQuoteLevel) &&
            bf.intProperty(QTextFormat::BlockQuoteLevel) > 0) {
            QTextBlockFormat nb = bf;
            nb.setBackground(
                blend(palette.color(QPalette::Base), palette.color(QPalette::Highlight), 0.10));
            nb.setLeftMargin(16.0 * bf.intProperty(QTextFormat::BlockQuoteLevel));
            cursor.setPosition(b.position());
            cursor.setBlockFormat(nb);
            cursor.setPosition(b.position() + b.length() - 1, QTextCursor::KeepAnchor);
            QTextCharFormat q;
            q.setForeground(colors.label);
            q.setFontItalic(true);
            cursor.mergeCharFormat(q);
            continue;
        }
        // Inline `code`: fragments the importer gave a fixed-pitch font.
        for (auto it = b.begin(); !it.atEnd(); ++it) {
            const QTextFragment f = it.fragment();
            if (f.isValid() && f.charFormat().fontFixedPitch()) {
                cursor.setPosition(f.position());
                cursor.setPosition(f.position() + f.length(), QTextCursor::KeepAnchor);
                QTextCharFormat c = mono;
                c.setBackground(colors.header);
                cursor.mergeCharFormat(c);
            }
        }
    }

    // Syntax colours, then the header line above each fenced block (last to first, so the
    // positions of the blocks not handled yet stay valid).
    QStringList texts;
    for (const CodeGroup& g : groups) {
        cursor.setPosition(g.start);
        cursor.setPosition(g.end, QTextCursor::KeepAnchor);
        const QString text =
            cursor.selectedText().replace(QChar::ParagraphSeparator, QLatin1Char('\n'));
        if (g.fenced) texts << text;
        for (const CodeSpan& s : highlightCode(text, codeLanguage(g.info))) {
            QTextCharFormat f;
            switch (s.kind) {
                case CodeSpan::keyword:
                    f.setForeground(colors.keyword);
                    f.setFontWeight(QFont::DemiBold);
                    break;
                case CodeSpan::string:
                    f.setForeground(colors.string);
                    break;
                case CodeSpan::comment:
                    f.setForeground(colors.comment);
                    f.setFontItalic(true);
                    break;
                case CodeSpan::number:
                    f.setForeground(colors.number);
                    break;
            }
            cursor.setPosition(g.start + s.start);
            cursor.setPosition(g.start + s.start + s.length, QTextCursor::KeepAnchor);
            cursor.mergeCharFormat(f);
        }
    }
    int index = firstCodeIndex + static_cast<int>(texts.size());
    for (auto it = groups.crbegin(); it != groups.crend(); ++it) {
        if (!it->fenced) continue;
        --index;
        cursor.setPosition(it->start);
        const QTextBlockFormat code = cursor.blockFormat();
        cursor.insertBlock(code);  // the code moves down; its old block becomes the header
        cursor.setPosition(it->start);
        QTextBlockFormat head = code;
        head.clearProperty(QTextFormat::BlockCodeFence);
        head.clearProperty(QTextFormat::BlockCodeLanguage);
        head.setNonBreakableLines(false);
        head.setBackground(colors.header);
        head.setTopMargin(6);
        cursor.setBlockFormat(head);
        QTextCharFormat label;
        label.setForeground(colors.label);
        const QString lang = it->info.trimmed().section(QLatin1Char(' '), 0, 0);
        cursor.insertText(lang.isEmpty() ? QObject::tr("code") : lang, label);
        cursor.insertText(QStringLiteral("    "), label);
        QTextCharFormat link;
        link.setAnchor(true);
        link.setAnchorHref(QStringLiteral("copy-code:%1").arg(index));
        link.setForeground(palette.color(QPalette::Link));
        link.setToolTip(QObject::tr("Copy this code block"));
        cursor.insertText(QObject::tr("Copy"), link);
    }
    styleTables(doc.rootFrame(), palette);
    return texts;
}

QString markdownToHtml(const QString& markdown, const QPalette& palette) {
    QTextDocument doc;
    renderMarkdown(&doc, markdown, palette);
    return doc.toHtml();
}

QStringList codeBlocks(const QString& markdown) {
    QStringList out;
    static const QRegularExpression fence(
        QStringLiteral("(^|\\n)(```|~~~)[^\\n]*\\n(.*?)(\\n\\2[ \\t]*(?=\\n|$)|$)"),
        QRegularExpression::DotMatchesEverythingOption);
    auto it = fence.globalMatch(markdown);
    while (it.hasNext()) out << it.next().captured(3);
    return out;
}

int stablePrefixLength(const QString& markdown, int maxTail) {
    int stable = 0;
    int lastBreak = 0;  // after the last line break outside a fence
    QString fence;      // the open fence's marker, empty outside one
    int pos = 0;
    const int n = static_cast<int>(markdown.size());
    while (pos < n) {
        const int nl = static_cast<int>(markdown.indexOf(QLatin1Char('\n'), pos));
        if (nl < 0) break;  // the last line is still being written
        const QStringView line = QStringView(markdown).mid(pos, nl - pos);
        const QStringView trimmed = line.trimmed();
        const int next = nl + 1;
        if (!fence.isEmpty()) {
            if (trimmed.startsWith(fence) && trimmed.count(fence.at(0)) == trimmed.size()) {
                fence.clear();
                stable = lastBreak = next;
            }
        } else if (trimmed.startsWith(QLatin1String("```")) ||
                   trimmed.startsWith(QLatin1String("~~~"))) {
            const QChar c = trimmed.at(0);
            int k = 0;
            while (k < trimmed.size() && trimmed.at(k) == c) ++k;
            fence = QString(k, c);
        } else if (trimmed.isEmpty()) {
            stable = lastBreak = next;
        } else {
            lastBreak = next;
        }
        pos = next;
    }
    if (n - stable > maxTail && fence.isEmpty() && lastBreak > stable) stable = lastBreak;
    return stable;
}

}  // namespace neural::gui
