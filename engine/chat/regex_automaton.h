// JSON Schema's `pattern` for structured output: an ECMA-262 regular expression compiled into a
// deterministic automaton over Unicode code points, which the JSON recogniser
// (json_schema_grammar.h) steps through character by character while a string is generated.
//
// Supported (docs/API.md, "Structured output"): literals and escapes (\t \n \v \f \r \0 \cX \xHH
// \uHHHH \u{H...}, escaped syntax characters), the classes \d \w \s and their negations, character
// classes with ranges and negation, `.` (any code point but a line terminator), groups ((...),
// (?:...), (?<name>...)), alternation, the quantifiers ? * + {n} {n,} {n,m} (greedy or lazy: the
// same language), and the anchors ^ and $. As JSON Schema says, a pattern is not anchored: a
// string matches when the expression matches some part of it. Backreferences, lookaround, word
// boundaries, Unicode property escapes and inline modifiers cannot be expressed by an automaton
// or are not supported: compile() refuses them with an error naming the feature.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "neural/error.h"

namespace neural::chat {

// A pattern compile() does not accept: `unsupported` for a valid expression it cannot enforce,
// either because it uses a feature no automaton expresses (`feature`; the message names it: "a
// backreference \\1 at offset 5") or because it exceeds a size limit; else a syntax error or a
// pattern that no string matches.
class RegexError : public Error {
public:
    RegexError(const std::string& message, bool unsupported, bool feature = false)
        : Error(message), unsupported_(unsupported), feature_(feature) {}
    bool unsupported() const { return unsupported_; }
    bool feature() const { return feature_; }

private:
    bool unsupported_;
    bool feature_;
};

class RegexAutomaton {
public:
    static constexpr std::size_t kMaxStates = 4096;      // automaton states
    static constexpr std::size_t kMaxNfaStates = 65536;  // before determinisation
    static constexpr std::uint32_t kMaxRepeat = 1000;    // {n,m} counts
    static constexpr char32_t kMaxCodePoint = 0x10FFFF;
    static constexpr std::size_t kMaxPatternBytes = 16384;

    // `pattern` is UTF-8. Throws RegexError.
    static std::shared_ptr<const RegexAutomaton> compile(std::string_view pattern);
    // The strings both accept. Throws RegexError when the product is too large or empty.
    static std::shared_ptr<const RegexAutomaton> intersect(const RegexAutomaton& a,
                                                           const RegexAutomaton& b);

    int start() const { return 0; }
    // The state after `cp`, or -1 when no accepted string continues with it (every state
    // returned can still reach acceptance). Surrogate code points never step.
    int step(int state, char32_t cp) const;
    bool accepting(int state) const { return accept_[static_cast<std::size_t>(state)] != 0; }
    std::size_t states() const { return accept_.size(); }
    // The whole string (code points) is accepted.
    bool matches(std::u32string_view text) const;

    // The input alphabet: ranges of code points that every state treats alike.
    std::size_t classes() const { return bounds_.size() - 1; }
    char32_t class_first(std::size_t c) const { return bounds_[c]; }
    char32_t class_last(std::size_t c) const { return bounds_[c + 1] - 1; }
    int target(int state, std::size_t c) const {
        return trans_[static_cast<std::size_t>(state) * classes() + c];
    }
    // Fewest code points from `state` to acceptance.
    std::uint32_t shortest(int state) const { return shortest_[static_cast<std::size_t>(state)]; }

private:
    friend class RegexBuilder;
    std::vector<char32_t> bounds_;  // class i is [bounds_[i], bounds_[i + 1])
    std::vector<int> trans_;        // states x classes
    std::vector<std::uint8_t> accept_;
    std::vector<std::uint32_t> shortest_;
    void finish();  // removes dead states, numbers the start 0, fills shortest_
};

// Which lengths (in code points) of the rest of a string each state can still accept, for a
// string with minLength / maxLength and a pattern. A path longer than minLength + states() can be
// shortened by a cycle, so lengths up to that bound answer every question.
class RegexLengths {
public:
    // Throws RegexError (unsupported) when the table would be too large.
    RegexLengths(const RegexAutomaton& re, std::size_t min_length, std::size_t max_length);
    // Some accepted rest of length in [lo, hi] exists from `state`.
    bool can_finish(int state, std::size_t lo, std::size_t hi) const;

private:
    std::size_t bound_ = 0;            // lengths 0..bound_ are tabled
    std::size_t words_ = 0;            // 64-bit words per state
    std::vector<std::uint64_t> bits_;  // state-major: bit L of state s = a rest of length L
};

}  // namespace neural::chat
