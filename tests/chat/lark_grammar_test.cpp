// Freeform tools' Lark grammars (chat/lark_grammar.h) as one regular expression: Codex CLI's
// apply_patch grammar against a line-by-line checker written from the grammar's text, on fixed
// patches and on random and mutated ones; the rest of the syntax on small grammars; what the
// translation refuses; and the text grammar's recogniser (JsonSchemaGrammar::text) as the sampler
// uses it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "chat/json_schema_grammar.h"
#include "chat/lark_grammar.h"
#include "chat/regex_automaton.h"
#include "support/codex_grammar.h"
#include "support/utf8.h"

namespace neural::chat {
namespace {

using ::testing::HasSubstr;

constexpr const char* kApplyPatch = test::kApplyPatchLark;

std::shared_ptr<const RegexAutomaton> whole(const std::string& grammar) {
    return RegexAutomaton::compile("^(?:" + lark_to_regex(grammar) + ")$");
}

bool starts(const std::string& line, const char* prefix) { return line.rfind(prefix, 0) == 0; }

// The apply_patch grammar read line by line, as its rules say.
bool is_apply_patch(const std::string& text) {
    std::vector<std::string> lines;
    std::size_t at = 0;
    while (true) {
        const std::size_t nl = text.find('\n', at);
        if (nl == std::string::npos) {
            lines.push_back(text.substr(at));  // after the last LF ("" when it ends with one)
            break;
        }
        lines.push_back(text.substr(at, nl - at));
        at = nl + 1;
    }
    // Every line but the last had its LF. The last is "" or "*** End Patch" without one.
    const std::string last = lines.back();
    lines.pop_back();
    if (!last.empty()) {
        if (last != "*** End Patch") return false;
        lines.push_back(last);
    }
    std::size_t i = 0;
    if (i >= lines.size() || lines[i++] != "*** Begin Patch") return false;
    auto filename = [](const std::string& line, std::size_t prefix) {
        return line.size() > prefix;
    };
    int hunks = 0;
    while (i < lines.size() && lines[i] != "*** End Patch") {
        const std::string& h = lines[i++];
        if (starts(h, "*** Add File: ") && filename(h, 14)) {
            int added = 0;
            while (i < lines.size() && starts(lines[i], "+")) ++i, ++added;
            if (added == 0) return false;
        } else if (starts(h, "*** Delete File: ") && filename(h, 17)) {
        } else if (starts(h, "*** Update File: ") && filename(h, 17)) {
            if (i < lines.size() && starts(lines[i], "*** Move to: ") && filename(lines[i], 13))
                ++i;
            int changes = 0;
            while (i < lines.size() &&
                   (lines[i] == "@@" || (starts(lines[i], "@@ ") && lines[i].size() > 3) ||
                    starts(lines[i], "+") || starts(lines[i], "-") || starts(lines[i], " ")))
                ++i, ++changes;
            if (changes > 0 && i < lines.size() && lines[i] == "*** End of File") ++i;
        } else {
            return false;
        }
        ++hunks;
    }
    return hunks > 0 && i + 1 == lines.size() && lines[i] == "*** End Patch";
}

TEST(LarkGrammar, ApplyPatchAcceptsTheShapesOfARealPatch) {
    const auto re = whole(kApplyPatch);
    const std::vector<std::string> good = {
        "*** Begin Patch\n*** Add File: hello.txt\n+Hello\n+\n*** End Patch\n",
        "*** Begin Patch\n*** Delete File: old.py\n*** End Patch",
        "*** Begin Patch\n*** Update File: src/a.cpp\n*** Move to: src/b.cpp\n@@ int main() {\n"
        "-    return 1;\n+    return 0;\n     }\n*** End of File\n*** End Patch\n",
        "*** Begin Patch\n*** Update File: x\n*** End Patch\n",  // change? may be absent
        "*** Begin Patch\n*** Update File: \xc3\xa9t\xc3\xa9.md\n@@\n+caf\xc3\xa9\n*** End Patch\n",
        "*** Begin Patch\n*** Update File: w.txt\n line\r\n*** End Patch\n",  // CR is text
    };
    for (const std::string& s : good) {
        EXPECT_TRUE(is_apply_patch(s)) << s;
        EXPECT_TRUE(re->matches(test::code_points(s))) << s;
    }
    const std::vector<std::string> bad = {
        "",
        "*** Begin Patch\n*** End Patch\n",                             // no hunk
        "*** Begin Patch\n*** Add File: a\n*** End Patch\n",            // no added line
        "*** Begin Patch\n*** Add File: \n+x\n*** End Patch\n",         // empty file name
        "*** Begin Patch\n*** Update File: a\nplain\n*** End Patch\n",  // no +, - or space
        "*** Begin Patch\n*** Update File: a\n*** End of File\n*** End Patch\n",  // EOF alone
        "*** Begin Patch\n*** Delete File: a\n*** End Patch\n\n",     // text after the end
        "*** Begin Patch\n*** Update File: a\n@@ \n*** End Patch\n",  // "@@ " needs text
        "{\"patch\": \"*** Begin Patch\"}",
    };
    for (const std::string& s : bad) {
        EXPECT_FALSE(is_apply_patch(s)) << s;
        EXPECT_FALSE(re->matches(test::code_points(s))) << s;
    }
}

// Random patches built by the grammar's rules, half of them then mutated (a byte dropped or
// changed, a piece inserted): the automaton and the line checker agree on every one.
TEST(LarkGrammar, ApplyPatchAgreesWithALineCheckerOnRandomAndMutatedText) {
    const auto re = whole(kApplyPatch);
    std::mt19937 rng(7);
    auto pick = [&](const std::vector<std::string>& v) {
        return v[std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng)];
    };
    auto upto = [&](int n) { return std::uniform_int_distribution<int>(0, n)(rng); };
    const std::vector<std::string> names = {"a.txt", "src/x y.cpp", "\xc3\xa9", "-", "@@"};
    const std::vector<std::string> texts = {"", "x", "*** End Patch", " a", "\r", "@@"};
    const std::vector<std::string> junk = {
        "*** End Patch\n", "@@\n", "+\n", "x\n", "\n", "*** End of File\n", "*** Move to: m\n"};
    int accepted = 0;
    for (int n = 0; n < 3000; ++n) {
        std::string s = "*** Begin Patch\n";
        for (int h = upto(2); h >= 0; --h) {
            switch (upto(2)) {
                case 0:
                    s.append("*** Add File: ").append(pick(names)).append("\n");
                    for (int k = upto(2); k >= 0; --k)
                        s.append("+").append(pick(texts)).append("\n");
                    break;
                case 1:
                    s.append("*** Delete File: ").append(pick(names)).append("\n");
                    break;
                default: {
                    s.append("*** Update File: ").append(pick(names)).append("\n");
                    if (upto(1)) s.append("*** Move to: ").append(pick(names)).append("\n");
                    const int changes = upto(3);
                    for (int k = 0; k < changes; ++k) {
                        const int kind = upto(4);
                        if (kind == 0) {
                            s.append("@@");
                        } else if (kind == 1) {
                            s.append("@@ ").append(pick(names));
                        } else {
                            s.push_back("+- "[kind - 2]);
                            s.append(pick(texts));
                        }
                        s.append("\n");
                    }
                    if (changes > 0 && upto(1)) s += "*** End of File\n";
                }
            }
        }
        s += upto(1) ? "*** End Patch\n" : "*** End Patch";
        const std::size_t w = std::uniform_int_distribution<std::size_t>(0, s.size() - 1)(rng);
        if (n % 2 && static_cast<unsigned char>(s[w]) < 0x80) {  // the text stays UTF-8
            switch (upto(2)) {
                case 0:
                    s.erase(w, 1);
                    break;
                case 1:
                    s[w] = "+- @\n*x"[w % 7];
                    break;
                default: {
                    const std::size_t line = s.rfind('\n', w);
                    s.insert(line == std::string::npos ? 0 : line + 1, pick(junk));
                }
            }
        }
        const bool expected = is_apply_patch(s);
        accepted += expected;
        ASSERT_EQ(re->matches(test::code_points(s)), expected) << s;
    }
    // Both answers came up often.
    EXPECT_GT(accepted, 1600);
    EXPECT_LT(accepted, 2900);
}

TEST(LarkGrammar, TheRestOfTheSyntax) {
    struct Case {
        const char* grammar;
        std::vector<std::string> yes, no;
    };
    const std::vector<Case> cases = {
        // Alternatives on continuation lines, aliases, optional [ ], ?-rules, priorities.
        {"?start: greeting name\n"
         "greeting: \"hi \" -> hi\n"
         "        | \"hello \"\n"
         "name.2: [\"dr \"] WORD\n"
         "%import common.WORD\n",
         {"hi bob", "hello dr Ann"},
         {"hi ", "hey bob", "hi bob1"}},
        // Case-insensitive literals, literal ranges, ~ repetition.
        {"start: \"select\"i \" \" ID\nID: \"a\"..\"c\" ~ 2..3\n",
         {"SELECT ab", "Select cca"},
         {"select a", "select abcd", "selekt ab"}},
        // common terminals, a named group in Python's spelling, an escaped slash, // comments.
        {"// a comment\n"
         "start: SIGNED_NUMBER WS_INLINE? path\n"
         "path: /(?P<dir>[a-z]+)\\//+  // one or more folders\n"
         "%import common (SIGNED_NUMBER, WS_INLINE)\n",
         {"-1.5e3 a/b/", "42 x/"},
         {"42", "4 2 a/", "1.5 A/"}},
        // ESCAPED_STRING and Python's "\n"-only dot.
        {"start: ESCAPED_STRING /./\n%import common.ESCAPED_STRING\n",
         {"\"a\\\"b\"x", "\"\"\r"},
         {"\"a\"b\"x", "\"\"\n"}},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.grammar);
        const auto re = whole(c.grammar);
        for (const std::string& s : c.yes) EXPECT_TRUE(re->matches(test::code_points(s))) << s;
        for (const std::string& s : c.no) EXPECT_FALSE(re->matches(test::code_points(s))) << s;
    }
}

TEST(LarkGrammar, WhatOneAutomatonCannotExpressIsRefusedByName) {
    const std::vector<std::pair<const char*, const char*>> cases = {
        {"start: \"(\" start \")\" | \"x\"\n", "recursive rule 'start'"},
        {"start: a\na: \"[\" b \"]\"\nb: a?\n", "recursive rule"},
        {"start: WORD+\n%import common.WORD\n%ignore \" \"\n", "%ignore"},
        {"start: /abc/i\n", "flags"},
        {"start: x{\"a\"}\nx{t}: t t\n", "template"},
        {"start: C_COMMENT\n%import common.C_COMMENT\n", "common.C_COMMENT"},
        {"start: X\n%import other.X\n", "module other than common"},
        {"start: \"a\"\n%declare B\n", "%declare"},
    };
    for (const auto& [grammar, what] : cases) {
        try {
            lark_to_regex(grammar);
            ADD_FAILURE() << "accepted: " << grammar;
        } catch (const RegexError& e) {
            EXPECT_TRUE(e.unsupported()) << grammar;
            EXPECT_THAT(e.what(), HasSubstr(what)) << grammar;
        }
    }
}

TEST(LarkGrammar, SyntaxErrorsNameTheirLine) {
    for (const auto& [grammar, what] : std::vector<std::pair<const char*, const char*>>{
             {"start: \"a\n", "line 1"},
             {"start: a\n", "'a' is not defined"},
             {"a: \"x\"\n", "no 'start' rule"},
             {"start: \"a\"\nstart: \"b\"\n", "line 2"},
             {"start: (\"a\"\n", "')' expected"},
             {"start \"a\"\n", "':' after 'start'"}}) {
        try {
            lark_to_regex(grammar);
            ADD_FAILURE() << "accepted: " << grammar;
        } catch (const RegexError& e) {
            EXPECT_FALSE(e.unsupported()) << grammar;
            EXPECT_THAT(e.what(), HasSubstr(what)) << grammar;
        }
    }
}

// The recogniser of a text grammar reads raw UTF-8 (no quotes, no escapes) and says what may
// still come; its shortest completion always completes.
TEST(TextGrammar, TheRecogniserReadsRawTextAndCompletesIt) {
    const auto g = JsonSchemaGrammar::text(whole(kApplyPatch));
    JsonRecognizer r(*g);
    EXPECT_FALSE(r.complete());
    const std::string begin = r.shortest_completion();
    EXPECT_TRUE(is_apply_patch(begin)) << begin;
    EXPECT_TRUE(r.feed("*** Begin Patch\n*** Add File: caf\xc3"));  // inside a character
    EXPECT_FALSE(r.complete());
    JsonRecognizer probe = r;
    const std::string rest = probe.shortest_completion();
    EXPECT_TRUE(probe.feed(rest) && probe.complete()) << rest;
    EXPECT_TRUE(is_apply_patch("*** Begin Patch\n*** Add File: caf\xc3" + rest)) << rest;
    EXPECT_TRUE(r.feed("\xa9\n+x\n*** End Patch"));
    EXPECT_TRUE(r.complete());
    EXPECT_EQ(r.shortest_completion(), "");
    JsonRecognizer more = r;
    EXPECT_TRUE(more.feed('\n'));
    EXPECT_FALSE(more.feed('x'));  // nothing after the end

    JsonRecognizer bad(*g);
    EXPECT_FALSE(bad.feed("{\"input\""));  // not JSON: the text itself
    const auto any = JsonSchemaGrammar::text(RegexAutomaton::compile("^[^a]+$"));
    EXPECT_FALSE(JsonRecognizer(*any).feed("\xc0"));      // an overlong form never starts one
    EXPECT_TRUE(JsonRecognizer(*any).feed("\xed\x9f"));   // U+D7C0..U+D7FF
    EXPECT_FALSE(JsonRecognizer(*any).feed("\xed\xa0"));  // a surrogate (U+D800..)
    EXPECT_FALSE(JsonRecognizer(*any).feed("\xf4\x90"));  // past U+10FFFF
}

}  // namespace
}  // namespace neural::chat
