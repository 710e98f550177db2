// The browser tool's page text (docs/TOOLS.md "Built-in tools"): HTML rendered to the plain,
// numbered-line form gpt-oss was trained on, following the reference browser's rules (headings as
// `#`, list items as `*`, links replaced by `【id†text†domain】` with the domain left out for links
// within the page's own site, images as `[Image N: alt]`, scripts and styles dropped), and the
// viewport and find-in-page that display it.
#pragma once

#include <QList>
#include <QString>
#include <QStringList>
#include <QUrl>

namespace neural::toolhost::browser {

struct Page {
    QString url;  // empty for a search results page
    QString title;
    QString text;       // the rendered text, lines separated by '\n'
    QStringList links;  // link id -> absolute URL
    // Find results only (`find` refuses them): for each link, the line of the searched page it
    // points at; opening the link starts the view a few lines above it.
    bool isFindResults = false;
    QList<int> linkLines;
};

// Renders `html` fetched from `url` (relative links resolve against it). `title` overrides the
// document's <title>; `showUrl` starts the text with a "URL: ..." line as the reference does for
// fetched pages.
Page pageFromHtml(const QString& html, const QUrl& url, const QString& title = {},
                  bool showUrl = true);
// A page of plain text (text/plain and other textual types, view-source).
Page pageFromText(const QString& text, const QUrl& url, const QString& title);

// The page's lines as the viewport counts them: each line wrapped at 80 columns.
QStringList wrapLines(const QString& text, int width = 80);

// The host part the link notation shows ("example.org", "127.0.0.1:8080").
QString domainOf(const QUrl& url);

// The display of `page` at stack position `cursor` from line `loc` (numLines <= 0: as many as
// fit the reference's view of about 1024 tokens). Empty with `error` set when loc is past the end.
QString showPage(const Page& page, int cursor, int loc, int numLines, QString* error);

// Finds `pattern` (case-insensitive) in `page`'s lines, links shown as their text; the result is
// a page whose link i opens `page` at match i.
Page findInPage(const QString& pattern, const Page& page);

}  // namespace neural::toolhost::browser
