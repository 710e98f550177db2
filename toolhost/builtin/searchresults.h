// The browser tool's search results (docs/TOOLS.md "browser"): the results page the reference
// browser shows (a list of links with their summaries), whatever the provider, and what an MCP
// search server's answer holds. An MCP search tool has no standard answer: servers answer with
// JSON text (a list of results, or an object holding one) or with text, either blocks of
// "Title: / URL: / Description:" lines or a Markdown list of links; these are read here.
#pragma once

#include <QList>
#include <QString>

#include <nlohmann/json.hpp>

#include <optional>

#include "builtin/pagetext.h"

namespace neural::toolhost::browser {

struct SearchResult {
    QString url;  // absolute http(s)
    QString title;
    QString snippet;
};

// The results page for `query`: up to `topn` results as a list of links with their snippets
// ("No results." when there are none).
Page searchResultsPage(const QList<SearchResult>& results, const QString& query, int topn);

// The results in the text of an MCP search tool's answer, in its order, each URL once. JSON
// first: an array of result objects, or an object with one under "results", "items", "organic",
// "organic_results", "data", "hits" or "web.results" (a result's URL is its "url", "link" or
// "href"; its title "title" or "name"; its snippet "snippet", "content", "description",
// "summary" or "text"); or one such JSON object per line. Else text: blocks separated by blank
// lines, each with a URL (a "URL:" line, a Markdown link or a bare address) and its title ("Title:"
// or the link's text or the block's first line) and snippet (a "Description:", "Snippet:",
// "Content:" or "Summary:" line, else the block's other lines); a block whose lines are each a
// Markdown link is one result per line. Empty when the text names no http(s) URL.
QList<SearchResult> parseSearchResults(const QString& text);

// The arguments for a search tool whose input schema is `schema`: the query under the first of
// "query", "q", "search_query", "searchQuery", "search", "text", "keywords" the schema has (else its
// first required string property, else "query"), and `topn` under the first of "count",
// "max_results", "maxResults", "num_results", "numResults", "limit", "topn", "top_n", "n",
// "size" it has (left out when it has none).
QString searchArguments(const std::optional<nlohmann::ordered_json>& schema, const QString& query,
                        int topn);

}  // namespace neural::toolhost::browser
