// Freeform (custom) tools with a Lark grammar (the Responses API's `format: {type: "grammar",
// syntax: "lark"}`, e.g. Codex CLI's apply_patch): a grammar without recursion describes a
// regular language, so it is translated into one regular expression, which regex_automaton.h
// compiles and the sampler enforces on the call's text (docs/API.md "Freeform tools").
//
// Supported: rules and terminals (`name: ...`, `NAME: ...`, with the ?, ! and _ prefixes and
// .priority suffixes, which do not change the language), alternatives on one line or on
// continuation lines starting with `|`, aliases (`-> name`, ignored), grouping ( ), optional
// [ ], the operators ? * + and `~ n` / `~ n..m`, string literals ("...", with Python's escapes),
// literal ranges ("a".."z"), regular expressions /.../ without flags (the subset
// regex_automaton.h accepts; Python's (?P<name>...) is read as a named group), comments (//),
// `%import common.NAME` / `%import common (A, B)` for the usual terminals of Lark's common.lark,
// and `start` as the root. Lark matches a sequence of terminals against the whole text with its
// dynamic lexer, which for a grammar without %ignore is the concatenation of the terminals'
// languages: the translation's language.
//
// Not expressible by one automaton, or not supported: recursive rules, %ignore (text skipped
// between any two tokens), %declare, %override, %extend, templates, regular-expression flags,
// and imports from other files. lark_to_regex() throws RegexError (unsupported) naming the
// construct; the caller passes such a tool on unenforced.
#pragma once

#include <string>
#include <string_view>

namespace neural::chat {

// The regular expression (ECMA-262, regex_automaton.h's subset) of the whole language of
// `grammar`'s start rule, not anchored. Throws RegexError: unsupported() for the constructs
// above, else a syntax error with its line.
std::string lark_to_regex(std::string_view grammar);

}  // namespace neural::chat
