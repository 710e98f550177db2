// The built-in browser tool (toolhost/builtin/browsertool.h) against a local HTTP server: search
// through a fake SearXNG, open by link id and by URL, scrolling with cursor and loc, find,
// redirects, and each failure (size and time limits, 404, a type it cannot show, bad schemes and
// arguments, no search provider); search through an MCP server's tool (the C++ test MCP server of
// tests/toolhost/mcp) and the reading of search servers' answers (builtin/searchresults.h).
#include <gtest/gtest.h>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTimer>

#include "builtin/browsertool.h"
#include "builtin/searchresults.h"
#include "builtin_test_support.h"
#include "mcpprovider.h"

namespace neural::toolhost {
namespace {

using test::HttpAnswer;
using test::runCall;
using Status = ToolOutcome::Status;

class BrowserTool : public ::testing::Test {
protected:
    void SetUp() override {
        test::ensureApp();
        m_server = std::make_unique<test::HttpServer>();
        ASSERT_NE(m_server->port(), 0);
        auto page = [](const QString& name) {
            return [name](const QByteArray&) {
                HttpAnswer answer;
                answer.body = test::fixturePage(name);
                return answer;
            };
        };
        m_server->route("/moons/article.html", page(QStringLiteral("article.html")));
        m_server->route("/galilean.html", page(QStringLiteral("galilean.html")));
        m_server->route("/malformed.html", page(QStringLiteral("malformed.html")));
        m_server->route("/searx/search", [this](const QByteArray& target) {
            m_searchTarget = target;
            QJsonArray results;
            results.append(
                QJsonObject{{"url", m_server->url(QStringLiteral("/moons/article.html"))},
                            {"title", "Moons of Jupiter"},
                            {"content", "Jupiter has 95 known moons."}});
            results.append(QJsonObject{{"url", "https://en.example.org/wiki/Europa"},
                                       {"title", "Europa <moon>"},
                                       {"content", "An icy moon."}});
            HttpAnswer answer;
            answer.contentType = "application/json";
            answer.body = QJsonDocument(QJsonObject{{"query", "moons"}, {"results", results}})
                              .toJson(QJsonDocument::Compact);
            return answer;
        });
        m_server->route("/closed/search", [](const QByteArray&) {
            HttpAnswer answer;
            answer.status = 403;
            answer.reason = "Forbidden";
            answer.body = "json format is disabled";
            return answer;
        });
        m_server->route("/redirect", [](const QByteArray&) {
            HttpAnswer answer;
            answer.status = 302;
            answer.reason = "Found";
            answer.location = "/galilean.html";
            return answer;
        });
        m_server->route("/loop", [](const QByteArray&) {
            HttpAnswer answer;
            answer.status = 302;
            answer.reason = "Found";
            answer.location = "/loop";
            return answer;
        });
        m_server->route("/big.html", [](const QByteArray&) {
            HttpAnswer answer;
            answer.body = "<html><body><p>" + QByteArray(200 * 1024, 'x') + "</p></body></html>";
            return answer;
        });
        m_server->route("/slow.html", [](const QByteArray&) {
            HttpAnswer answer;
            answer.body = "<html><body>late</body></html>";
            answer.delayMs = 5000;
            return answer;
        });
        m_server->route("/picture.png", [](const QByteArray&) {
            HttpAnswer answer;
            answer.contentType = "image/png";
            answer.body = QByteArray("\x89PNG\r\n\x1a\n", 8);
            return answer;
        });
        m_server->route("/notes.txt", [](const QByteArray&) {
            HttpAnswer answer;
            answer.contentType = "text/plain; charset=utf-8";
            answer.body = "first line\r\nsecond line\r\n";
            return answer;
        });
        m_server->route("/long.html", [](const QByteArray&) {
            HttpAnswer answer;
            answer.body = "<html><head><title>Long</title></head><body>";
            for (int i = 0; i < 300; ++i)
                answer.body += "<p>Paragraph " + QByteArray::number(i) + " of the long page.</p>";
            answer.body += "</body></html>";
            return answer;
        });
    }

    BrowserToolSettings settings() const {
        BrowserToolSettings s;
        s.searxngUrl = QUrl(m_server->url(QStringLiteral("/searx")));
        s.timeoutMs = 2000;
        s.maxPageBytes = 64 * 1024;
        return s;
    }

    ToolOutcome open(BrowserProvider& browser, const QJsonObject& args) {
        return runCall(browser, QStringLiteral("open"),
                       QString::fromUtf8(QJsonDocument(args).toJson(QJsonDocument::Compact)));
    }

    std::unique_ptr<test::HttpServer> m_server;
    QByteArray m_searchTarget;
};

TEST_F(BrowserTool, DeclaresTheBuiltInNamespace) {
    BrowserProvider browser(settings());
    EXPECT_EQ(browser.name(), QStringLiteral("browser"));
    EXPECT_TRUE(browser.inSystemMessage());
    EXPECT_TRUE(browser.ready());
    const chat::ToolNamespace ns = browser.toolNamespace();
    EXPECT_EQ(ns.name, "browser");
    ASSERT_EQ(ns.tools.size(), 3u);
    EXPECT_EQ(ns.tools[0].name, "search");
    EXPECT_EQ(ns.tools[1].name, "open");
    EXPECT_EQ(ns.tools[2].name, "find");
}

TEST_F(BrowserTool, SearchThenOpenALinkThenFindThenScroll) {
    BrowserProvider browser(settings());
    const ToolOutcome search =
        runCall(browser, QStringLiteral("search"),
                QStringLiteral(R"({"query": "moons of jupiter", "topn": 5})"));
    ASSERT_EQ(search.status, Status::ok) << search.text.toStdString();
    EXPECT_TRUE(m_searchTarget.contains("q=moons%20of%20jupiter") ||
                m_searchTarget.contains("q=moons+of+jupiter"))
        << m_searchTarget.toStdString();
    EXPECT_TRUE(m_searchTarget.contains("format=json"));
    const QString domain = QStringLiteral("127.0.0.1:%1").arg(m_server->port());
    EXPECT_EQ(
        search.text,
        QStringLiteral(
            "[0] moons of jupiter\n"
            "**viewing lines [0 - 3] of 3**\n\n"
            "L0: # Search Results\n"
            "L1: \n"
            "L2:   * \u30100\u2020Moons of Jupiter\u2020%1\u3011 Jupiter has 95 known moons.\n"
            "L3:   * \u30101\u2020Europa <moon>\u2020en.example.org\u3011 An icy moon.")
            .arg(domain))
        << search.text.toStdString();

    // Link 0 of the results page.
    const ToolOutcome opened = open(browser, {{"id", 0}});
    ASSERT_EQ(opened.status, Status::ok) << opened.text.toStdString();
    EXPECT_TRUE(opened.text.startsWith(
        QStringLiteral("[1] Moons of Jupiter & Saturn (%1)\n**viewing lines [0 - ")
            .arg(m_server->url(QStringLiteral("/moons/article.html")))))
        << opened.text.toStdString();
    EXPECT_TRUE(opened.text.contains(
        QStringLiteral("L1: URL: %1").arg(m_server->url(QStringLiteral("/moons/article.html")))));
    EXPECT_TRUE(opened.text.contains(QStringLiteral("L4: # Moons of Jupiter")));

    const ToolOutcome found =
        runCall(browser, QStringLiteral("find"), QStringLiteral(R"({"pattern": "Ganymede"})"));
    ASSERT_EQ(found.status, Status::ok) << found.text.toStdString();
    EXPECT_TRUE(found.text.startsWith(
        QStringLiteral("[2] Find results for text: `ganymede` in `Moons of Jupiter & Saturn`")))
        << found.text.toStdString();
    EXPECT_TRUE(found.text.contains(QStringLiteral("match at L")));
    EXPECT_TRUE(found.text.contains(QStringLiteral("Ganymede, the largest moon")));

    // The match opens its page near the line, from memory (no new request).
    const int requests = m_server->requests();
    const ToolOutcome match = open(browser, {{"id", 0}});
    ASSERT_EQ(match.status, Status::ok) << match.text.toStdString();
    EXPECT_TRUE(match.text.startsWith(QStringLiteral("[3] Moons of Jupiter & Saturn")));
    EXPECT_TRUE(match.text.contains(QStringLiteral("**viewing lines [")));
    EXPECT_FALSE(match.text.contains(QStringLiteral("L0: ")));
    EXPECT_EQ(m_server->requests(), requests);

    // `find` on a find results page is refused, as in the reference.
    const ToolOutcome findOnFind = runCall(browser, QStringLiteral("find"),
                                           QStringLiteral(R"({"pattern": "moon", "cursor": 2})"));
    EXPECT_EQ(findOnFind.status, Status::toolError);
    EXPECT_EQ(findOnFind.text,
              QStringLiteral("Cannot run `find` on search results page or find results page"));

    // Scrolling an earlier page by cursor, loc and num_lines.
    const ToolOutcome scrolled = open(browser, {{"cursor", 1}, {"loc", 5}, {"num_lines", 3}});
    ASSERT_EQ(scrolled.status, Status::ok) << scrolled.text.toStdString();
    EXPECT_TRUE(scrolled.text.startsWith(QStringLiteral("[4] Moons of Jupiter & Saturn")));
    EXPECT_TRUE(scrolled.text.contains(QStringLiteral("**viewing lines [5 - 7] of ")));
    EXPECT_TRUE(scrolled.text.contains(QStringLiteral("\n\nL5: ")));
    EXPECT_TRUE(scrolled.text.contains(QStringLiteral("\nL7: ")));
    EXPECT_FALSE(scrolled.text.contains(QStringLiteral("\nL8: ")));
    EXPECT_EQ(browser.pages().size(), 5);
}

TEST_F(BrowserTool, OpenByUrlFollowsRedirectsAndRelativeLinks) {
    BrowserProvider browser(settings());
    const ToolOutcome opened = open(browser, {{"id", m_server->url(QStringLiteral("/redirect"))}});
    ASSERT_EQ(opened.status, Status::ok) << opened.text.toStdString();
    EXPECT_TRUE(opened.text.startsWith(QStringLiteral("[0] Galilean moons (%1)")
                                           .arg(m_server->url(QStringLiteral("/galilean.html")))))
        << opened.text.toStdString();
    // The page's link "article.html" resolves against where the redirect ended, /galilean.html
    // (which this server does not have).
    const ToolOutcome back = open(browser, {{"id", 0}});
    EXPECT_EQ(back.status, Status::toolError);
    EXPECT_EQ(back.text, QStringLiteral("Error fetching URL `%1`: HTTP 404 Not Found")
                             .arg(m_server->url(QStringLiteral("/article.html"))));
}

TEST_F(BrowserTool, TooManyRedirectsIsAnError) {
    BrowserProvider browser(settings());
    const ToolOutcome outcome = open(browser, {{"id", m_server->url(QStringLiteral("/loop"))}});
    EXPECT_EQ(outcome.status, Status::toolError);
    EXPECT_TRUE(outcome.text.startsWith(
        QStringLiteral("Error fetching URL `%1`: ").arg(m_server->url(QStringLiteral("/loop")))))
        << outcome.text.toStdString();
    EXPECT_TRUE(browser.pages().isEmpty());
}

TEST_F(BrowserTool, APageOverTheSizeLimitIsNotLoaded) {
    BrowserProvider browser(settings());
    const ToolOutcome outcome = open(browser, {{"id", m_server->url(QStringLiteral("/big.html"))}});
    EXPECT_EQ(outcome.status, Status::toolError);
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("larger than the browser's limit of 64 KiB")))
        << outcome.text.toStdString();
}

TEST_F(BrowserTool, ASlowPageHitsTheTimeLimit) {
    BrowserProvider browser(settings());
    qint64 elapsed = 0;
    const ToolOutcome outcome =
        runCall(browser, QStringLiteral("open"),
                QStringLiteral(R"({"id": "%1"})").arg(m_server->url(QStringLiteral("/slow.html"))),
                {}, {}, &elapsed);
    EXPECT_EQ(outcome.status, Status::timedOut);
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("no complete answer within 2 s")))
        << outcome.text.toStdString();
    EXPECT_LT(elapsed, 4500);
}

TEST_F(BrowserTool, A404IsAnErrorTheModelReads) {
    BrowserProvider browser(settings());
    const ToolOutcome outcome = open(browser, {{"id", m_server->url(QStringLiteral("/nowhere"))}});
    EXPECT_EQ(outcome.status, Status::toolError);
    EXPECT_EQ(outcome.text, QStringLiteral("Error fetching URL `%1`: HTTP 404 Not Found")
                                .arg(m_server->url(QStringLiteral("/nowhere"))));
}

TEST_F(BrowserTool, ATypeItCannotShowIsAnError) {
    BrowserProvider browser(settings());
    const ToolOutcome outcome =
        open(browser, {{"id", m_server->url(QStringLiteral("/picture.png"))}});
    EXPECT_EQ(outcome.status, Status::toolError);
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("image/png"))) << outcome.text.toStdString();
    // Plain text is shown as it is.
    const ToolOutcome text = open(browser, {{"id", m_server->url(QStringLiteral("/notes.txt"))}});
    EXPECT_EQ(text.status, Status::ok);
    EXPECT_TRUE(text.text.contains(QStringLiteral("L2: first line\nL3: second line")))
        << text.text.toStdString();
}

TEST_F(BrowserTool, MalformedHtmlIsShown) {
    BrowserProvider browser(settings());
    const ToolOutcome outcome =
        open(browser, {{"id", m_server->url(QStringLiteral("/malformed.html"))}});
    EXPECT_EQ(outcome.status, Status::ok) << outcome.text.toStdString();
    EXPECT_TRUE(outcome.text.startsWith(QStringLiteral("[0] Broken page (")));
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("item two")));
}

TEST_F(BrowserTool, ViewSourceShowsTheHtml) {
    BrowserProvider browser(settings());
    const ToolOutcome outcome = open(
        browser, {{"id", m_server->url(QStringLiteral("/galilean.html"))}, {"view_source", true}});
    EXPECT_EQ(outcome.status, Status::ok) << outcome.text.toStdString();
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("<title>Galilean moons</title>")));
}

TEST_F(BrowserTool, TheDefaultViewShowsPartOfALongPage) {
    BrowserProvider browser(settings());
    const ToolOutcome first = open(browser, {{"id", m_server->url(QStringLiteral("/long.html"))}});
    ASSERT_EQ(first.status, Status::ok);
    EXPECT_FALSE(first.text.contains(QStringLiteral("Paragraph 299 ")));
    const ToolOutcome end = open(browser, {{"loc", 590}});
    EXPECT_EQ(end.status, Status::ok) << end.text.toStdString();
    EXPECT_TRUE(end.text.contains(QStringLiteral("Paragraph 299 of the long page.")))
        << end.text.toStdString();
    const ToolOutcome past = open(browser, {{"loc", 5000}});
    EXPECT_EQ(past.status, Status::toolError);
    EXPECT_TRUE(past.text.startsWith(QStringLiteral("Invalid location parameter: `5000`.")));
    EXPECT_EQ(browser.pages().size(), 2) << "a failed view is not kept";
}

TEST_F(BrowserTool, UsageErrorsAreAnswered) {
    BrowserProvider browser(settings());
    EXPECT_EQ(open(browser, {{"id", 3}}).text, QStringLiteral("No pages to access!"));
    const ToolOutcome scheme = open(browser, {{"id", "file:///etc/passwd"}});
    EXPECT_EQ(scheme.status, Status::toolError);
    EXPECT_TRUE(scheme.text.contains(QStringLiteral("only http and https")));
    ASSERT_EQ(open(browser, {{"id", m_server->url(QStringLiteral("/galilean.html"))}}).status,
              Status::ok);
    EXPECT_EQ(open(browser, {{"id", 7}}).text, QStringLiteral("Invalid link id `7`."));
    EXPECT_EQ(open(browser, {{"cursor", 9}}).text,
              QStringLiteral("Cursor `9` is out of range. Available cursor indices: [0 - 0]."));
    const ToolOutcome badJson =
        runCall(browser, QStringLiteral("open"), QStringLiteral("{not json"));
    EXPECT_EQ(badJson.status, Status::failed);
    EXPECT_EQ(badJson.text, QStringLiteral("{\"error\": \"Invalid function arguments\"}"));
    const ToolOutcome unknown = runCall(browser, QStringLiteral("click"), QStringLiteral("{}"));
    EXPECT_EQ(unknown.status, Status::failed);
    EXPECT_EQ(unknown.text, QStringLiteral("{\"error\": \"Unknown function: click\"}"));
}

TEST_F(BrowserTool, SearchWithoutAProviderSaysWhereToSetOne) {
    BrowserToolSettings s = settings();
    s.searxngUrl = QUrl();
    BrowserProvider browser(s);
    const ToolOutcome outcome =
        runCall(browser, QStringLiteral("search"), QStringLiteral(R"({"query": "x"})"));
    EXPECT_EQ(outcome.status, Status::failed);
    EXPECT_TRUE(
        outcome.text.contains(QStringLiteral("no search provider configured: Settings > Tools")));
}

TEST_F(BrowserTool, ASearxngWithoutJsonOutputIsExplained) {
    BrowserToolSettings s = settings();
    s.searxngUrl = QUrl(m_server->url(QStringLiteral("/closed")));
    BrowserProvider browser(s);
    const ToolOutcome outcome =
        runCall(browser, QStringLiteral("search"), QStringLiteral(R"({"query": "x"})"));
    EXPECT_EQ(outcome.status, Status::toolError);
    EXPECT_TRUE(
        outcome.text.startsWith(QStringLiteral("Error during search for `x`: HTTP 403 Forbidden")))
        << outcome.text.toStdString();
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("search.formats")));
}

TEST_F(BrowserTool, CancelStopsAFetch) {
    BrowserProvider browser(settings());
    qint64 elapsed = 0;
    const ToolOutcome outcome = runCall(
        browser, QStringLiteral("open"),
        QStringLiteral(R"({"id": "%1"})").arg(m_server->url(QStringLiteral("/slow.html"))), {},
        [](ToolCall* call) { QTimer::singleShot(200, call, [call] { call->cancel(); }); },
        &elapsed);
    EXPECT_EQ(outcome.status, Status::cancelled);
    EXPECT_LT(elapsed, 1500);
    EXPECT_TRUE(browser.pages().isEmpty());
}

TEST_F(BrowserTool, ALongResultIsCutToTheCallsLimit) {
    BrowserProvider browser(settings());
    CallLimits limits;
    limits.maxResultBytes = 300;
    const ToolOutcome outcome = runCall(
        browser, QStringLiteral("open"),
        QStringLiteral(R"({"id": "%1"})").arg(m_server->url(QStringLiteral("/long.html"))), limits);
    EXPECT_EQ(outcome.status, Status::ok);
    EXPECT_TRUE(outcome.truncated);
    EXPECT_TRUE(outcome.text.contains(QStringLiteral("left out")));
}

// ---- search through an MCP server's tool ----------------------------------------------------

QString resultsText(const QList<browser::SearchResult>& results) {
    QStringList lines;
    for (const browser::SearchResult& r : results)
        lines << r.title + QStringLiteral(" | ") + r.url + QStringLiteral(" | ") + r.snippet;
    return lines.join(QLatin1Char('\n'));
}

TEST(SearchResults, ReadsTitleDescriptionUrlBlocks) {
    // As Brave's and similar search servers answer.
    const QString text = QStringLiteral(
        "Title: Moons of Jupiter\nDescription: Jupiter has 95 known moons.\n"
        "URL: https://example.org/moons\n\n"
        "Title: Europa\nDescription: An icy moon.\nURL: https://en.example.org/wiki/Europa.\n"
        "\n---\n\nTitle: Again\nURL: https://example.org/moons\n");
    EXPECT_EQ(resultsText(browser::parseSearchResults(text)),
              QStringLiteral("Moons of Jupiter | https://example.org/moons | Jupiter has 95 known "
                             "moons.\nEuropa | https://en.example.org/wiki/Europa | An icy moon."));
}

TEST(SearchResults, ReadsJsonAnswers) {
    const QString expected =
        QStringLiteral("A | https://a.example/ | first\nB | https://b.example/x | second");
    // {"results": [...]} with SearXNG's and Tavily's field names.
    EXPECT_EQ(resultsText(browser::parseSearchResults(QStringLiteral(
                  R"({"query": "x", "results": [{"title": "A", "url": "https://a.example/",
                  "content": "first"}, {"title": "B", "url": "https://b.example/x",
                  "content": "second"}, {"title": "no url"}, {"title": "C", "url": "ftp://c"}]})"))),
              expected);
    // A bare list with "link" and "snippet"; Brave's API shape; one object per line.
    EXPECT_EQ(resultsText(browser::parseSearchResults(QStringLiteral(
                  R"([{"name": "A", "link": "https://a.example/", "snippet": "first"},
                      {"name": "B", "href": "https://b.example/x", "description": "second"}])"))),
              expected);
    EXPECT_EQ(resultsText(browser::parseSearchResults(QStringLiteral(
                  R"({"web": {"results": [{"title": "A", "url": "https://a.example/",
                  "description": "first"}, {"title": "B", "url": "https://b.example/x",
                  "description": "second"}]}})"))),
              expected);
    EXPECT_EQ(resultsText(browser::parseSearchResults(QStringLiteral(
                  "{\"title\": \"A\", \"url\": \"https://a.example/\", \"summary\": \"first\"}\n"
                  "{\"title\": \"B\", \"url\": \"https://b.example/x\", \"text\": \"second\"}\n"))),
              expected);
}

TEST(SearchResults, ReadsMarkdownLinksAndBareAddresses) {
    EXPECT_EQ(resultsText(browser::parseSearchResults(
                  QStringLiteral("Results for x:\n1. [A](https://a.example/) - first\n"
                                 "2. **[B](https://b.example/x)**: second\n"))),
              QStringLiteral("A | https://a.example/ | first\nB | https://b.example/x | second"));
    EXPECT_EQ(resultsText(browser::parseSearchResults(
                  QStringLiteral("## A\nhttps://a.example/\nfirst line\nsecond line\n\n"
                                 "- B (https://b.example/x)\n"))),
              QStringLiteral("A | https://a.example/ | first line second line\n"
                             "B | https://b.example/x | "));
}

TEST(SearchResults, ProseWithoutAddressesHasNoResults) {
    EXPECT_TRUE(browser::parseSearchResults(QStringLiteral("Jupiter has 95 moons.")).isEmpty());
    EXPECT_TRUE(browser::parseSearchResults(QString()).isEmpty());
    EXPECT_TRUE(browser::parseSearchResults(QStringLiteral("{\"results\": 3}")).isEmpty());
    EXPECT_TRUE(browser::parseSearchResults(QStringLiteral("[1, 2")).isEmpty());
}

TEST(SearchResults, ArgumentsFollowTheToolsSchema) {
    const auto schema = [](const char* json) {
        return std::optional<nlohmann::ordered_json>(nlohmann::ordered_json::parse(json));
    };
    EXPECT_EQ(browser::searchArguments(
                  schema(R"({"properties": {"query": {"type": "string"}, "count": {}}})"),
                  QStringLiteral("moons"), 5),
              QStringLiteral(R"({"query":"moons","count":5})"));
    EXPECT_EQ(browser::searchArguments(
                  schema(R"({"properties": {"max_results": {}, "q": {"type": "string"}}})"),
                  QStringLiteral("moons"), 3),
              QStringLiteral(R"({"q":"moons","max_results":3})"));
    EXPECT_EQ(browser::searchArguments(schema(R"({"properties": {"lang": {"type": "string"},
                  "terms": {"type": "string"}}, "required": ["terms"]})"),
                                       QStringLiteral("moons"), 3),
              QStringLiteral(R"({"terms":"moons"})"));
    EXPECT_EQ(browser::searchArguments(std::nullopt, QStringLiteral("a \"b\""), 3),
              QStringLiteral(R"({"query":"a \"b\""})"));
}

// The C++ test MCP server with its search tools, whose first result links to the local server.
class McpSearch : public BrowserTool {
protected:
    void SetUp() override {
        BrowserTool::SetUp();
        McpServerConfig c;
        c.name = QStringLiteral("search");
        c.command = QStringLiteral(NEURAL_MCP_TEST_SERVER);
        c.args = QStringList{QStringLiteral("--search-tools"), m_server->url(QString())};
        if (c.args.back().endsWith(QLatin1Char('/'))) c.args.back().chop(1);
        m_mcp = std::make_unique<McpProvider>(c);
        m_mcp->start();
        ASSERT_TRUE(test::spinUntil([&] { return m_mcp->ready(); }, 30000))
            << m_mcp->problem().toStdString();
    }
    void TearDown() override {
        if (m_mcp) m_mcp->stop();
    }
    BrowserToolSettings mcpSettings(const QString& tool) {
        BrowserToolSettings s = settings();
        s.searxngUrl = QUrl();  // not used
        s.searchServer = QStringLiteral("search");
        s.searchTool = tool;
        s.findServer = [this](const QString& name) -> ToolProvider* {
            return name == QLatin1String("search") ? m_mcp.get() : nullptr;
        };
        return s;
    }
    std::unique_ptr<McpProvider> m_mcp;
};

TEST_F(McpSearch, ResultsShowAsTheSearchPageAndOpen) {
    const QString domain = QStringLiteral("127.0.0.1:%1").arg(m_server->port());
    const QString page = QStringLiteral(
                             "[0] moons of jupiter\n"
                             "**viewing lines [0 - 4] of 4**\n\n"
                             "L0: # Search Results\n"
                             "L1: \n"
                             "L2:   * \u30100\u2020Moons of Jupiter\u2020%1\u3011 About moons of "
                             "jupiter: Jupiter has 95 \n"
                             "L3: known moons.\n"
                             "L4:   * \u30101\u2020Europa\u2020en.example.org\u3011 An icy moon.")
                             .arg(domain);
    // Text blocks (web_search {query, count}) and JSON (json_search {q, max_results}): the same
    // page, topn passed as the tool's count.
    for (const char* tool : {"web_search", "json_search"}) {
        SCOPED_TRACE(tool);
        BrowserProvider browser(mcpSettings(QLatin1String(tool)));
        const ToolOutcome search =
            runCall(browser, QStringLiteral("search"),
                    QStringLiteral(R"({"query": "moons of jupiter", "topn": 2})"));
        ASSERT_EQ(search.status, Status::ok) << search.text.toStdString();
        EXPECT_EQ(search.text, page) << search.text.toStdString();
        EXPECT_EQ(m_searchTarget, QByteArray());  // SearXNG was not asked
        const ToolOutcome opened = open(browser, {{"id", 0}});
        ASSERT_EQ(opened.status, Status::ok) << opened.text.toStdString();
        EXPECT_TRUE(opened.text.contains(QStringLiteral("L4: # Moons of Jupiter")))
            << opened.text.toStdString();
    }
}

TEST_F(McpSearch, FailuresAreErrorsTheModelReads) {
    // The server's own error.
    {
        BrowserProvider browser(mcpSettings(QStringLiteral("web_search")));
        const ToolOutcome o =
            runCall(browser, QStringLiteral("search"), QStringLiteral(R"({"query": "fail"})"));
        EXPECT_EQ(o.status, Status::toolError);
        EXPECT_EQ(o.text,
                  QStringLiteral("Error during search for `fail`: the search engine is down"));
    }
    // A tool it does not have.
    {
        BrowserProvider browser(mcpSettings(QStringLiteral("find_pages")));
        const ToolOutcome o =
            runCall(browser, QStringLiteral("search"), QStringLiteral(R"({"query": "x"})"));
        EXPECT_EQ(o.status, Status::failed);
        EXPECT_TRUE(o.text.contains(QStringLiteral("has no tool \"find_pages\"")));
        EXPECT_TRUE(o.text.contains(QStringLiteral("web_search"))) << o.text.toStdString();
    }
    // An answer without links is shown as it is.
    {
        BrowserProvider browser(mcpSettings(QStringLiteral("echo")));
        const ToolOutcome o =
            runCall(browser, QStringLiteral("search"), QStringLiteral(R"({"query": "x"})"));
        EXPECT_EQ(o.status, Status::ok) << o.text.toStdString();
        EXPECT_TRUE(o.text.startsWith(QStringLiteral("[0] x\n"))) << o.text.toStdString();
    }
    // Cancelling the browser's call cancels the server's.
    {
        BrowserProvider browser(mcpSettings(QStringLiteral("slow")));
        qint64 elapsed = 0;
        const ToolOutcome o = runCall(
            browser, QStringLiteral("search"), QStringLiteral(R"({"query": "x"})"), {},
            [](ToolCall* call) { QTimer::singleShot(150, call, [call] { call->cancel(); }); },
            &elapsed);
        EXPECT_EQ(o.status, Status::cancelled);
        EXPECT_LT(elapsed, 900);
        EXPECT_TRUE(browser.pages().isEmpty());
    }
    // A server that is not configured, and one that is not running.
    {
        BrowserToolSettings s = mcpSettings(QStringLiteral("web_search"));
        s.searchServer = QStringLiteral("gone");
        BrowserProvider browser(s);
        const ToolOutcome o =
            runCall(browser, QStringLiteral("search"), QStringLiteral(R"({"query": "x"})"));
        EXPECT_EQ(o.status, Status::failed);
        EXPECT_TRUE(o.text.contains(QStringLiteral("\"gone\" is not one of the MCP servers")))
            << o.text.toStdString();
    }
    m_mcp->stop();
    BrowserProvider browser(mcpSettings(QStringLiteral("web_search")));
    const ToolOutcome o =
        runCall(browser, QStringLiteral("search"), QStringLiteral(R"({"query": "x"})"));
    EXPECT_EQ(o.status, Status::failed);
    EXPECT_TRUE(o.text.contains(QStringLiteral("is not running"))) << o.text.toStdString();
}

}  // namespace
}  // namespace neural::toolhost
