#include "conversation/markdown.h"

#include <QFontDatabase>
#include <QRegularExpression>
#include <QTextBlock>
#include <QTextCursor>
#include <QTextDocument>

namespace neural::gui {

QString markdownToHtml(const QString &markdown, const QColor &codeBackground)
{
    QTextDocument doc;
    renderMarkdown(&doc, markdown, codeBackground);
    return doc.toHtml();
}

void renderMarkdown(QTextDocument *docPtr, const QString &markdown, const QColor &codeBackground)
{
    QTextDocument &doc = *docPtr;
    doc.setMarkdown(markdown, QTextDocument::MarkdownDialectGitHub);
    const QFont fixed = QFontDatabase::systemFont(QFontDatabase::FixedFont);
    QTextCharFormat mono;
    mono.setFontFamilies({fixed.family(), QStringLiteral("monospace")});
    mono.setFontFixedPitch(true);
    QTextCursor cursor(&doc);
    for (QTextBlock b = doc.begin(); b.isValid(); b = b.next()) {
        const QTextBlockFormat bf = b.blockFormat();
        // The importer marks fenced blocks with BlockCodeFence and indented ones with
        // non-breakable lines.
        if (bf.hasProperty(QTextFormat::BlockCodeFence) || bf.nonBreakableLines()) {
            QTextBlockFormat nb = bf;
            nb.setBackground(codeBackground);
            cursor.setPosition(b.position());
            cursor.setBlockFormat(nb);
            cursor.setPosition(b.position() + b.length() - 1, QTextCursor::KeepAnchor);
            cursor.mergeCharFormat(mono);
            continue;
        }
        // Inline `code`: fragments the importer gave a fixed-pitch font.
        for (auto it = b.begin(); !it.atEnd(); ++it) {
            const QTextFragment f = it.fragment();
            if (f.isValid() && f.charFormat().fontFixedPitch()) {
                cursor.setPosition(f.position());
                cursor.setPosition(f.position() + f.length(), QTextCursor::KeepAnchor);
                QTextCharFormat c = mono;
                c.setBackground(codeBackground);
                cursor.mergeCharFormat(c);
            }
        }
    }
}

QStringList codeBlocks(const QString &markdown)
{
    QStringList out;
    static const QRegularExpression fence(
        QStringLiteral("(^|\\n)(```|~~~)[^\\n]*\\n(.*?)(\\n\\2[ \\t]*(?=\\n|$)|$)"),
        QRegularExpression::DotMatchesEverythingOption);
    auto it = fence.globalMatch(markdown);
    while (it.hasNext())
        out << it.next().captured(3);
    return out;
}

}  // namespace neural::gui
