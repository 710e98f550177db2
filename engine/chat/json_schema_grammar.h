// Structured output: a JSON Schema compiled into a grammar, and an incremental recogniser that
// reads generated text byte by byte and says whether it can still become a value matching the
// schema. The sampler (runtime/constraint.h) walks the recogniser over candidate tokens to mask
// those that would break the schema, so a constrained answer always parses and validates.
//
// Supported: type (one or a list of object, array, string, number, integer, boolean, null;
// OpenAPI's nullable), properties, required, additionalProperties (true, false or a schema),
// items, minItems, maxItems, enum, const, minimum / maximum / exclusiveMinimum /
// exclusiveMaximum, minLength / maxLength, the string formats email, uuid, date and date-time
// (format_status(); with minLength / maxLength only where the format's length is fixed), pattern
// (an ECMA-262 expression compiled into an automaton, regex_automaton.h, stepped over the decoded
// code points of the string; with a format, the two automata's intersection; with minLength /
// maxLength, only lengths some matching string can still have), anyOf / oneOf (alternatives
// told apart by their first byte; alternatives that start alike are enforced as their union),
// allOf of one schema, $ref to a JSON pointer in the schema ($defs, definitions; recursion is
// bounded by the recogniser's depth, kMaxDepth), and the annotations title, description,
// default, examples, other formats, $schema, $id, $comment (not enforced). Any other keyword (or
// a pattern feature no automaton expresses, such as a backreference) cannot be enforced:
// compile() refuses it with an error naming it, or, given a list for them, records it there and
// leaves it out of the constraint. The recogniser accepts JSON with at most kMaxWhitespaceRun whitespace bytes in a row,
// numbers of at most kMaxNumberLength characters with exponents of at most 2 digits (so they fit
// a double), known property names in their canonical
// (nlohmann::json) spelling, and nothing after the top-level value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/regex_automaton.h"
#include "neural/error.h"

namespace neural::chat {

// A schema the grammar cannot enforce: the message names the keywords (with their JSON pointer)
// or the invalid value.
class SchemaError : public Error {
public:
    explicit SchemaError(const std::string& message) : Error(message) {}
};

class JsonSchemaGrammar {
public:
    static constexpr std::size_t kMaxProperties = 64;  // per object (the recogniser's bitmask)
    static constexpr std::size_t kMaxNodes = 4096;     // schema nodes in one grammar

    // Compiles `schema`; throws SchemaError. With `ignored`, keywords the grammar cannot enforce
    // are listed there ("pattern (at /properties/x/pattern)") and left out of the constraint
    // instead of refused; a schema no value can match is still refused.
    static std::shared_ptr<const JsonSchemaGrammar> compile(
        const nlohmann::ordered_json& schema, std::vector<std::string>* ignored = nullptr);
    // Any JSON object (response_format json_object).
    static std::shared_ptr<const JsonSchemaGrammar> any_object();
    // Plain text instead of JSON: the whole text, as UTF-8, must be a string `re` accepts (the
    // caller anchors the expression at both ends). The input of a freeform tool with a grammar
    // (lark_grammar.h); the recogniser then reads code points and steps the automaton.
    static std::shared_ptr<const JsonSchemaGrammar> text(std::shared_ptr<const RegexAutomaton> re);
    // The automaton of a text grammar; null for a JSON grammar.
    const RegexAutomaton* text_automaton() const { return text_.get(); }

    enum class Kind : std::uint8_t { object, array, string, number, integer, literal, types };
    // String formats enforced while sampling (format_status() below says which texts match).
    enum class Format : std::uint8_t { none, email, uuid, date, date_time };
    struct Property {
        std::string key;  // the name as it appears between the quotes (JSON-escaped)
        int node = -1;
        bool required = false;
    };
    // number / integer: minimum and maximum (JSON Schema's exclusive forms set the flags).
    struct Bounds {
        bool has_min = false, has_max = false;
        bool min_exclusive = false, max_exclusive = false;
        double min = 0, max = 0;
        bool any() const { return has_min || has_max; }
    };
    struct Node {
        Kind kind = Kind::literal;
        Bounds bounds;                      // number, integer
        std::size_t min_length = 0;         // string, in code points
        std::size_t max_length = SIZE_MAX;  // string
        Format format = Format::none;       // string
        int pattern = -1;                   // string: index into patterns()
        std::vector<Property> properties;   // object
        int additional = -1;                // object: schema of other keys; -1: none allowed
        int items = -1;                     // array: schema of the items
        std::size_t min_items = 0;
        std::size_t max_items = SIZE_MAX;
        std::vector<std::string> literals;  // literal: the accepted values, serialized
        // types: the alternative for a value starting with '{', '[', '"', '-' or a digit, 't' or
        // 'f', 'n' (-1: not allowed).
        int on_object = -1, on_array = -1, on_string = -1, on_number = -1, on_bool = -1,
            on_null = -1;
    };

    // A string's pattern: its automaton and, with minLength / maxLength, the lengths each state
    // can still reach.
    struct Pattern {
        std::shared_ptr<const RegexAutomaton> re;
        std::shared_ptr<const RegexLengths> lengths;  // null: no length limits
    };
    const Pattern& pattern(int index) const { return patterns_[static_cast<std::size_t>(index)]; }

    const std::vector<Node>& nodes() const { return nodes_; }
    const Node& node(int index) const { return nodes_[static_cast<std::size_t>(index)]; }
    int root() const { return root_; }
    // The shortest text that is a valid value of `node`.
    const std::string& minimal_text(int index) const {
        return minimal_[static_cast<std::size_t>(index)];
    }

private:
    friend class SchemaCompiler;
    std::vector<Node> nodes_;
    std::vector<std::string> minimal_;
    std::vector<Pattern> patterns_;
    int root_ = -1;
    std::shared_ptr<const RegexAutomaton> text_;
};

// The text of a formatted string (between the quotes, ASCII, no escapes) so far: -1 no value of
// the format starts with it, 0 a prefix of one, 1 a whole value (which may also go on).
int format_status(JsonSchemaGrammar::Format format, std::string_view text);
// The shortest text that, appended to `text` (format_status >= 0), makes a whole value.
std::string format_completion(JsonSchemaGrammar::Format format, std::string_view text);

// Reads text incrementally. Copyable (the sampler copies it to test a candidate token); it refers
// to the grammar, which must outlive it.
class JsonRecognizer {
public:
    static constexpr int kMaxWhitespaceRun = 32;
    static constexpr int kMaxNumberLength = 24;
    // Objects and arrays nested deeper than this are not accepted (bounds recursive schemas).
    static constexpr std::size_t kMaxDepth = 64;

    explicit JsonRecognizer(const JsonSchemaGrammar& grammar);

    // Reads one byte. False: no valid value continues the text with it; the recogniser is then
    // in an unspecified state (test candidates on a copy).
    bool feed(char c);
    bool feed(std::string_view text);
    // The text read so far is a whole value matching the schema.
    bool complete() const;
    // The shortest text that, appended, makes the value complete ("" when complete()).
    std::string shortest_completion() const;

private:
    enum State : std::uint8_t {
        // object
        obj_start,
        obj_key,
        obj_colon,
        obj_value,
        obj_in_value,
        obj_after_value,
        obj_expect_key,
        // array
        arr_start,
        arr_in_value,
        arr_after_value,
        arr_expect_value,
        // string
        str_body,
        // number
        num_minus,
        num_zero,
        num_int,
        num_dot,
        num_frac,
        num_exp,
        num_exp_sign,
        num_exp_digits,
        // literal
        lit_body,
    };
    // Escape and UTF-8 progress inside a string (a string value or an object key).
    struct StringState {
        std::uint8_t escape = 0;     // 1: after a backslash
        std::uint8_t hex = 0;        // \u digits still to come
        std::uint8_t utf8_need = 0;  // continuation bytes still to come
        std::uint8_t utf8_lead = 0;  // lead byte while its first continuation is due, else 0
        // \u escapes of UTF-16 surrogates come in pairs (parsers refuse a lone one): 0 none,
        // 1 the first digit was d, 2 in a high surrogate, 3-6 its low half must follow ("\", "u",
        // "d", one of c-f).
        std::uint8_t surrogate = 0;
    };
    struct Frame {
        int node = -1;
        State state = obj_start;
        std::uint64_t seen = 0;  // object: properties given so far
        int value_node = -1;     // object: schema of the current key's value
        // array: items so far; number: characters so far; string: code points so far
        std::uint32_t count = 0;
        StringState str;
        std::string text;  // object: the current key; literal, number: the text so far
        // string with a pattern: the automaton's state, and the code point being decoded (its
        // bits so far, its UTF-8 length, a high surrogate waiting for its low half).
        int re_state = 0;
        std::uint32_t cp_bits = 0;
        std::uint32_t high = 0;
        std::uint8_t utf8_length = 0;
    };

    bool start_value(int node, char c);
    void value_done();
    bool object_char(char c);
    bool array_char(char c);
    bool number_char(Frame& f, char c, bool& ended) const;
    bool literal_char(Frame& f, char c, bool& ended);
    bool whitespace();
    static bool string_char(StringState& s, char c, bool& closed);
    bool pattern_char(Frame& f, const JsonSchemaGrammar::Node& n, char c);
    std::string pattern_completion(const Frame& f) const;
    static std::string string_tail(const StringState& s);
    bool number_can_end(const Frame& f) const;
    bool literal_exact(const Frame& f) const;
    std::string object_rest(const Frame& f, std::uint64_t seen, bool has_member) const;
    std::string frame_completion(const Frame& f) const;

    // A text grammar: the automaton's state, and the code point being decoded (its bits so
    // far, the continuation bytes still due, its UTF-8 length).
    bool text_char(const RegexAutomaton& re, char c);
    std::string text_completion(const RegexAutomaton& re) const;
    int text_state_ = 0;
    std::uint32_t text_bits_ = 0;
    std::uint8_t text_need_ = 0;
    std::uint8_t text_length_ = 0;

    const JsonSchemaGrammar* grammar_;
    std::vector<Frame> stack_;
    bool root_done_ = false;
    int whitespace_run_ = 0;
};

}  // namespace neural::chat
