// The pattern automaton (chat/regex_automaton.h) against std::regex with ECMAScript grammar:
// fixed and randomly generated expressions on fixed and random strings; Unicode beyond ASCII;
// the features it refuses (named) and the syntax errors; the length table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <regex>
#include <string>

#include "chat/regex_automaton.h"

namespace neural::chat {
namespace {

using ::testing::HasSubstr;

std::u32string widen(const std::string& s) { return std::u32string(s.begin(), s.end()); }

// JSON Schema's rule: a pattern matches when it matches some part of the string.
bool ecma_search(const std::regex& re, const std::string& s) { return std::regex_search(s, re); }

// Every string over `alphabet` up to `max_length`, plus random longer ones.
std::vector<std::string> strings_over(const std::string& alphabet, std::size_t max_length,
                                      std::mt19937& rng, int random_count) {
    std::vector<std::string> out = {""};
    std::vector<std::string> frontier = {""};
    for (std::size_t len = 1; len <= max_length; ++len) {
        std::vector<std::string> next;
        for (const std::string& s : frontier) {
            for (char c : alphabet) next.push_back(s + c);
        }
        out.insert(out.end(), next.begin(), next.end());
        frontier = std::move(next);
    }
    std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
    std::uniform_int_distribution<std::size_t> length(max_length + 1, max_length + 12);
    for (int i = 0; i < random_count; ++i) {
        std::string s;
        for (std::size_t k = length(rng); k > 0; --k) s += alphabet[pick(rng)];
        out.push_back(s);
    }
    return out;
}

void expect_same_as_std_regex(const std::string& pattern, const std::string& alphabet,
                              std::size_t exhaustive_length, std::mt19937& rng) {
    SCOPED_TRACE("pattern " + pattern);
    const auto automaton = RegexAutomaton::compile(pattern);
    const std::regex re(pattern, std::regex::ECMAScript);
    for (const std::string& s : strings_over(alphabet, exhaustive_length, rng, 200)) {
        ASSERT_EQ(automaton->matches(widen(s)), ecma_search(re, s)) << "string \"" << s << "\"";
    }
}

TEST(RegexAutomaton, AgreesWithStdRegexOnFixedPatterns) {
    std::mt19937 rng(1);
    const std::string abc = "abc-1_ .\n";
    for (const char* p : {
             "a",
             "^a",
             "a$",
             "^a$",
             "^$",
             "^(a|b)*c$",
             "ab|^c",
             "a|b$",
             "^a*b+c?$",
             "^[a-c]{2,3}$",
             "^a{2}$",
             "^a{2,}$",
             "^(ab){0,2}$",
             "[^a]",
             "^[^a-b]*$",
             "^\\d+$",
             "^\\D",
             "\\w\\W",
             "^\\s*a\\s*$",
             "^\\S+$",
             "^.$",
             "a.c",
             "^(?:a|bc)+$",
             "^(a)(b)?$",
             "^[.]$",
             "^\\.$",
             "^a-1$",
             "^[-a]$",
             "^[a-]$",
             "^a*?b+?$",
             "^(a|)+$",
             "^(|a)b$",
             "^a{0}b$",
             "^\\x61\\u0062$",
             "^[\\x2d\\x5f]+$",
             "^\\n$",
             "^a{1,3}?b$",
             "((a))",
             "^(a*)*$",
             "^(?:(?:a|b)c){1,2}$",
             "^[\\-]$",
             "^\\t?\\n?$",
             "^[\\s\\d]$",
             "(^a|b)(c|$)",
             "^\\/$",
         }) {
        expect_same_as_std_regex(p, abc, 4, rng);
    }
}

// Random expressions from a small grammar over {a, b, c}.
std::string random_pattern(std::mt19937& rng, int depth) {
    std::uniform_int_distribution<int> d(0, 99);
    const int r = d(rng);
    if (depth <= 0 || r < 30) {
        static const char* atoms[] = {"a",     "b",   "c",   ".",    "[ab]", "[^c]",
                                      "[a-b]", "\\w", "\\d", "(?:)", "\\.",  "-"};
        return atoms[std::uniform_int_distribution<int>(0, 11)(rng)];
    }
    if (r < 50) return random_pattern(rng, depth - 1) + random_pattern(rng, depth - 1);
    if (r < 62)
        return "(" + random_pattern(rng, depth - 1) + "|" + random_pattern(rng, depth - 1) + ")";
    if (r < 86) {
        static const char* quantifiers[] = {"*", "+", "?", "{2}", "{1,3}", "{0,2}", "{2,}", "*?"};
        return "(?:" + random_pattern(rng, depth - 1) + ")" +
               quantifiers[std::uniform_int_distribution<int>(0, 7)(rng)];
    }
    if (r < 93) return "^" + random_pattern(rng, depth - 1);
    return random_pattern(rng, depth - 1) + "$";
}

TEST(RegexAutomaton, AgreesWithStdRegexOnRandomPatterns) {
    std::mt19937 rng(2026);
    int empty = 0;
    for (int i = 0; i < 200; ++i) {
        const std::string p = random_pattern(rng, 4);
        try {
            RegexAutomaton::compile(p);
        } catch (const RegexError& e) {
            // Only an expression no string matches ("a^b") is refused: std::regex agrees.
            ASSERT_FALSE(e.unsupported()) << p << ": " << e.what();
            ASSERT_THAT(e.what(), HasSubstr("no string matches")) << p;
            const std::regex re(p, std::regex::ECMAScript);
            for (const std::string& s : strings_over("abc.-1", 3, rng, 50))
                ASSERT_FALSE(ecma_search(re, s)) << p << " on " << s;
            ++empty;
            continue;
        }
        expect_same_as_std_regex(p, "abc.-1", 3, rng);
    }
    EXPECT_LT(empty, 60);  // anchors inside make some empty ("a^b"), most are not
}

// Syntax std::regex does not take (named groups, Annex B braces, [^], \cX, [\b]).
TEST(RegexAutomaton, EcmaScriptSyntaxBeyondStdRegex) {
    EXPECT_TRUE(RegexAutomaton::compile("^(?<n>a|b)c$")->matches(U"bc"));
    EXPECT_TRUE(RegexAutomaton::compile("^b{$")->matches(U"b{"));
    EXPECT_TRUE(RegexAutomaton::compile("^a{,2}$")->matches(U"a{,2}"));
    EXPECT_TRUE(RegexAutomaton::compile("^x}$")->matches(U"x}"));
    EXPECT_TRUE(RegexAutomaton::compile("^[^]$")->matches(U"\n"));
    EXPECT_TRUE(RegexAutomaton::compile("^\\cJ$")->matches(U"\n"));
    EXPECT_TRUE(RegexAutomaton::compile("^[\\b]$")->matches(U"\b"));
    EXPECT_TRUE(RegexAutomaton::compile("^[\\w-]+$")->matches(U"a-_"));
}

TEST(RegexAutomaton, WorksOnCodePointsBeyondAscii) {
    auto re = RegexAutomaton::compile("^[é-ü]+ \\u00e9?.$");
    EXPECT_TRUE(re->matches(U"éü é😀"));
    EXPECT_TRUE(re->matches(U"ö x"));
    EXPECT_FALSE(re->matches(U"e x"));
    EXPECT_FALSE(re->matches(U"é \u2028"));  // '.' is no line terminator
    auto emoji = RegexAutomaton::compile("^\\uD83D\\uDE00\\u{1F601}$");
    EXPECT_TRUE(emoji->matches(U"😀😁"));
    auto space = RegexAutomaton::compile("^\\s$");
    for (char32_t cp : {U'\u00a0', U'\u2003', U'\u3000', U'\ufeff', U'\u2029'})
        EXPECT_TRUE(space->matches(std::u32string(1, cp)));
    EXPECT_FALSE(space->matches(U"\u200b"));
    auto not_word = RegexAutomaton::compile("^\\W$");
    EXPECT_TRUE(not_word->matches(U"é"));
    // Surrogate code points never step (JSON text cannot carry a lone one).
    auto any = RegexAutomaton::compile("^.$");
    EXPECT_EQ(any->step(any->start(), 0xD800), -1);
    EXPECT_GE(any->step(any->start(), 0xE000), 0);
}

TEST(RegexAutomaton, RefusesWhatNoAutomatonExpressesByName) {
    for (const auto& [pattern, feature] : std::vector<std::pair<std::string, std::string>>{
             {"(a)\\1", "a backreference \\1"},
             {"(?<x>a)\\k<x>", "a backreference \\k<name>"},
             {"a(?=b)", "a lookahead"},
             {"a(?!b)", "a lookahead"},
             {"(?<=a)b", "a lookbehind"},
             {"(?<!a)b", "a lookbehind"},
             {"\\bword\\b", "a word boundary"},
             {"\\Bx", "a word boundary"},
             {"\\p{L}+", "a Unicode property escape"},
             {"(?i:a)", "an inline modifier group"},
             {"a{1001}", "a repetition count above 1000"},
             {"(a|b)*a(a|b){14}", "more than 4096 automaton states"},
         }) {
        try {
            RegexAutomaton::compile(pattern);
            ADD_FAILURE() << "accepted " << pattern;
        } catch (const RegexError& e) {
            EXPECT_TRUE(e.unsupported()) << pattern << ": " << e.what();
            EXPECT_THAT(e.what(), HasSubstr(feature)) << pattern;
        }
    }
}

TEST(RegexAutomaton, SyntaxErrorsAndEmptyLanguagesAreNotFeatures) {
    for (const char* pattern :
         {"(a", "a)", "[a", "*a", "a**", "a{2,1}", "[z-a]", "\\", "\\q", "[\\d-z]", "\\x4",
          "\\u{110000}", "$a", "a^b", "[]", "(?<>a)", "^*"}) {
        try {
            RegexAutomaton::compile(pattern);
            ADD_FAILURE() << "accepted " << pattern;
        } catch (const RegexError& e) {
            EXPECT_FALSE(e.unsupported()) << pattern << ": " << e.what();
        }
    }
    try {
        RegexAutomaton::compile("a)");
    } catch (const RegexError& e) {
        EXPECT_THAT(e.what(), HasSubstr("unmatched ')' at offset 1"));
    }
    try {
        RegexAutomaton::compile("$a");
    } catch (const RegexError& e) {
        EXPECT_THAT(e.what(), HasSubstr("no string matches the pattern"));
    }
}

TEST(RegexAutomaton, IntersectionAcceptsWhatBothAccept) {
    auto digits = RegexAutomaton::compile("^\\d+$");
    auto has_seven = RegexAutomaton::compile("7");
    auto both = RegexAutomaton::intersect(*digits, *has_seven);
    EXPECT_TRUE(both->matches(U"1273"));
    EXPECT_FALSE(both->matches(U"123"));
    EXPECT_FALSE(both->matches(U"a7"));
    EXPECT_THROW(RegexAutomaton::intersect(*digits, *RegexAutomaton::compile("^a")), RegexError);
}

TEST(RegexLengths, TellsWhichLengthsAreStillReachable) {
    auto even = RegexAutomaton::compile("^(aa)*$");
    RegexLengths lengths(*even, 3, 5);
    EXPECT_TRUE(lengths.can_finish(even->start(), 3, 5));   // 4
    EXPECT_FALSE(lengths.can_finish(even->start(), 5, 5));  // odd
    const int one = even->step(even->start(), 'a');
    EXPECT_TRUE(lengths.can_finish(one, 3, 4));  // 3 more: "aaaa"
    EXPECT_FALSE(lengths.can_finish(one, 2, 2));
    // Unbounded above: anything from minLength on.
    auto plus = RegexAutomaton::compile("^a+b$");
    RegexLengths open(*plus, 100, SIZE_MAX);
    EXPECT_TRUE(open.can_finish(plus->start(), 100, SIZE_MAX));
    EXPECT_EQ(plus->shortest(plus->start()), 2u);
}

}  // namespace
}  // namespace neural::chat
