// Markdown for the chat view: Qt's CommonMark/GitHub importer (QTextDocument::setMarkdown), with
// code blocks and inline code forced to the system's fixed-pitch font on a tinted background, as
// HTML for a word-wrapping QLabel.
#pragma once

#include <QColor>
#include <QString>
#include <QStringList>

class QTextDocument;

namespace neural::gui {

QString markdownToHtml(const QString &markdown, const QColor &codeBackground);
// The same into an existing document (the chat view's message bodies).
void renderMarkdown(QTextDocument *doc, const QString &markdown, const QColor &codeBackground);
// The fenced / indented code blocks of `markdown`, in order, without the fences.
QStringList codeBlocks(const QString &markdown);

}  // namespace neural::gui
