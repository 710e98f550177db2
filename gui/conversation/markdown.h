// Markdown for the chat view: Qt's CommonMark/GitHub importer (QTextDocument::setMarkdown),
// styled from a palette so a theme change re-renders it in the new colours: fenced code blocks
// get a header line (language label, "Copy" link), a tinted background, the fixed-pitch font and
// syntax colours (highlightCode); tables get borders and padding, block quotes a tinted band.
// While a reply streams, the chat view renders its complete blocks once and re-renders only the
// open tail (stablePrefixLength), so a long reply costs no quadratic work.
#pragma once

#include <QColor>
#include <QList>
#include <QPalette>
#include <QString>
#include <QStringList>

class QTextDocument;

namespace neural::gui {

// The colours of code blocks for a palette (dark or light variants by the palette's Base).
struct CodeColors {
    QColor background, header, text, keyword, string, comment, number, label;
};
CodeColors codeColors(const QPalette& palette);

// A highlighted span of a code block.
struct CodeSpan {
    enum Kind { keyword, string, comment, number };
    int start = 0;
    int length = 0;
    Kind kind = keyword;
};
// The language a fence's info string names ("c++", "py", "ts", "bash" ...) as one of "cpp",
// "python", "js", "json", "sh", "rust", "go"; empty when it is none of them.
QString codeLanguage(const QString& info);
// Keywords, strings, comments and numbers of `code` (a whole block, so block comments and
// multi-line strings span lines). Empty for an unknown language.
QList<CodeSpan> highlightCode(const QString& code, const QString& language);

// Renders `markdown` into `doc` (replacing its content). Each fenced code block gets the link
// "copy-code:<firstCodeIndex + i>" in its header; returns the blocks' texts in that order.
QStringList renderMarkdown(QTextDocument* doc, const QString& markdown, const QPalette& palette,
                           int firstCodeIndex = 0);
QString markdownToHtml(const QString& markdown, const QPalette& palette);
// The fenced code blocks of `markdown`, in order, without the fences.
QStringList codeBlocks(const QString& markdown);
// The length of the part of a growing `markdown` text whose rendering can no longer change:
// it ends after a blank line outside a code fence, or after a closing fence. A tail longer
// than `maxTail` characters is cut at its last line break outside a fence as well.
int stablePrefixLength(const QString& markdown, int maxTail = 4000);

}  // namespace neural::gui
