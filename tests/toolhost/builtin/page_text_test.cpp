// The browser's page text (toolhost/builtin/pagetext.h): HTML to the reference browser's text,
// the numbered viewport and find-in-page.
#include <gtest/gtest.h>

#include "builtin/pagetext.h"
#include "builtin_test_support.h"

namespace neural::toolhost::browser {
namespace {

const QUrl kBase(QStringLiteral("http://127.0.0.1:8080/moons/article.html"));

TEST(PageText, RendersTheFixtureArticleInTheReferencesForm) {
    const Page page =
        pageFromHtml(QString::fromUtf8(test::fixturePage(QStringLiteral("article.html"))), kBase);
    EXPECT_EQ(page.title, QStringLiteral("Moons of Jupiter & Saturn"));
    EXPECT_EQ(page.url, kBase.toString());
    const QString expected = QStringLiteral(
        "\nURL: http://127.0.0.1:8080/moons/article.html\n"
        "Skip to content\n"
        "\n"
        "# Moons of Jupiter\n"
        "\n"
        "Jupiter has 95 known moons. The four largest are the \u30100\u2020Galilean moons\u3011, "
        "discovered by \u30101\u2020Galileo Galilei\u2020en.example.org\u3011 in 1610.\n"
        "\n"
        "## The Galilean moons\n"
        "\n"
        "  * Io \u2014 volcanically active\n"
        "  * Europa, with an ocean under its ice\n"
        "  * Ganymede, the largest moon in the Solar System\n"
        "  * Callisto\n"
        "\n"
        "## Further reading\n"
        "\n"
        "  1. \u30102\u2020Galilean moons again\u3011 (same link, same id)\n"
        "  2. Write to the editor\n"
        "  3. [Image 0: Saturn]\n"
        "\n"
        "Water ice: H_{2}O; area in km^{2}.\n"
        "\n"
        "[Image 1: Jupiter seen by Juno]\n"
        "\n"
        "The end of the page about moons.");
    EXPECT_EQ(page.text, expected) << page.text.toStdString();
    ASSERT_EQ(page.links.size(), 3);
    EXPECT_EQ(page.links[0], QStringLiteral("http://127.0.0.1:8080/galilean.html"));
    EXPECT_EQ(page.links[1], QStringLiteral("https://en.example.org/wiki/Galileo_Galilei"));
    EXPECT_EQ(page.links[2], QStringLiteral("http://127.0.0.1:8080/moons/galilean.html"));
    EXPECT_FALSE(page.text.contains(QStringLiteral("script")));
    EXPECT_FALSE(page.text.contains(QStringLiteral("font-family")));
    EXPECT_FALSE(page.text.contains(QStringLiteral("comment")));
}

TEST(PageText, MalformedHtmlStillRenders) {
    const Page page =
        pageFromHtml(QString::fromUtf8(test::fixturePage(QStringLiteral("malformed.html"))), kBase);
    EXPECT_EQ(page.title, QStringLiteral("Broken page"));
    EXPECT_TRUE(page.text.contains(QStringLiteral("Unclosed paragraph with an unclosed bold")));
    EXPECT_TRUE(page.text.contains(QStringLiteral("a stray < sign and a broken &entity and ABC.")))
        << page.text.toStdString();
    EXPECT_TRUE(page.text.contains(QStringLiteral("\u30100\u2020unquoted link\u3011")));
    EXPECT_TRUE(page.text.contains(QStringLiteral("\u30101\u2020nested link\u3011")));
    EXPECT_TRUE(page.text.contains(QStringLiteral("attribute with a quoted > sign")));
    EXPECT_TRUE(page.text.contains(QStringLiteral("  * item one\n  * item two")));
    EXPECT_TRUE(page.text.contains(QStringLiteral("cell 1 cell 2\n")));
    EXPECT_TRUE(page.text.endsWith(QStringLiteral("Last words before an unclosed comment")))
        << page.text.toStdString();
}

TEST(PageText, TheReferencesSpecialCharactersAreReplaced) {
    const Page page = pageFromHtml(
        QStringLiteral("<p>\u3010x\u3011 a\u200Bb \U0001F600 <a href='/y'>dag\u2020ger</a></p>"),
        kBase, {}, false);
    EXPECT_EQ(page.text, QStringLiteral("\u3016x\u3017 ab \u30100\u2020dag\u2021ger\u3011"));
}

TEST(PageText, LongLinesWrapAtEightyColumns) {
    const QString word = QStringLiteral("abcdefghi ");  // 10 columns
    const QStringList lines = wrapLines(word.repeated(20).trimmed());
    ASSERT_EQ(lines.size(), 3);
    EXPECT_EQ(lines[0].size(), 80);
    EXPECT_EQ(wrapLines(QString(200, u'x')).size(), 3);  // a long word is broken
    EXPECT_EQ(wrapLines(QStringLiteral("a\n\nb")), (QStringList{"a", "", "b"}));
}

TEST(PageText, TheViewportNumbersLinesAndSaysWhichItShows) {
    Page page;
    page.url = QStringLiteral("http://127.0.0.1:8080/long");
    page.title = QStringLiteral("Long");
    QStringList lines;
    for (int i = 0; i < 1000; ++i)
        lines << QStringLiteral("line number %1 of the long page").arg(i);
    page.text = lines.join(u'\n');
    QString error;
    const QString shown = showPage(page, 3, 10, 2, &error);
    EXPECT_EQ(shown, QStringLiteral("[3] Long (http://127.0.0.1:8080/long)\n"
                                    "**viewing lines [10 - 11] of 999**\n\n"
                                    "L10: line number 10 of the long page\n"
                                    "L11: line number 11 of the long page"));
    // Without num_lines: about the reference's 1024-token view.
    const QString view = showPage(page, 0, 0, -1, &error);
    EXPECT_TRUE(view.contains(QStringLiteral("**viewing lines [0 - ")));
    EXPECT_FALSE(view.contains(QStringLiteral("L999:")));
    EXPECT_GT(view.size(), 3000);
    EXPECT_LT(view.size(), 5000);
    EXPECT_TRUE(showPage(page, 0, 1000, -1, &error).isEmpty());
    EXPECT_EQ(error, QStringLiteral("Invalid location parameter: `1000`. Cannot exceed page "
                                    "maximum of 999."));
}

TEST(PageText, FindShowsMatchesAsLinksToTheirLines) {
    const Page page =
        pageFromHtml(QString::fromUtf8(test::fixturePage(QStringLiteral("article.html"))), kBase);
    const Page found = findInPage(QStringLiteral("galilean"), page);
    EXPECT_TRUE(found.isFindResults);
    EXPECT_EQ(found.title,
              QStringLiteral("Find results for text: `galilean` in `Moons of Jupiter & "
                             "Saturn`"));
    EXPECT_EQ(found.url, page.url + QStringLiteral("/find?pattern=galilean"));
    // A match shows four lines and the search goes on after them (the heading on L9 is inside
    // the first match's lines).
    ASSERT_EQ(found.links.size(), 2) << found.text.toStdString();
    EXPECT_EQ(found.linkLines, (QList<int>{6, 18}));
    EXPECT_EQ(found.links[0], page.url);
    // Links show as their text; lines are the page's wrapped lines.
    EXPECT_TRUE(found.text.startsWith(
        QStringLiteral("# \u30100\u2020match at L6\u3011\nJupiter has 95 known moons. The four "
                       "largest are the Galilean moons, \ndiscovered by Galileo Galilei in 1610.\n"
                       "\n## The Galilean moons\n\n# \u30101\u2020match at L18\u3011\n  1. "
                       "Galilean moons again (same link, same id)\n")))
        << found.text.toStdString();
    const Page none = findInPage(QStringLiteral("neptune"), page);
    EXPECT_EQ(none.text, QStringLiteral("No `find` results for pattern: `neptune`"));
}

}  // namespace
}  // namespace neural::toolhost::browser
