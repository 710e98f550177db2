// The JSON-schema recogniser: whole texts that match or do not, byte-by-byte prefixes, the
// shortest completion of any accepted prefix, and the keywords compile() refuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <regex>

#include "chat/json_schema_grammar.h"
#include "support/fixtures.h"

namespace neural::chat {
namespace {

using Json = nlohmann::ordered_json;
using ::testing::HasSubstr;

bool accepts(const JsonSchemaGrammar& g, std::string_view text) {
    JsonRecognizer r(g);
    return r.feed(text) && r.complete();
}

// A person: nested object, array of enums with bounds, required and optional fields.
const Json kPerson = Json::parse(R"({
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer"},
    "height": {"type": "number"},
    "admin": {"type": "boolean"},
    "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]},
             "minItems": 1, "maxItems": 3},
    "address": {"type": "object",
                "properties": {"city": {"type": "string"}, "zip": {"type": ["string", "null"]}},
                "required": ["city"], "additionalProperties": false},
    "kind": {"const": "person"}
  },
  "required": ["name", "age", "tags", "address"],
  "additionalProperties": false
})");

TEST(JsonSchemaGrammar, AcceptsMatchingTexts) {
    auto g = JsonSchemaGrammar::compile(kPerson);
    for (const char* text : {
             R"({"name":"Ann","age":31,"tags":["red"],"address":{"city":"Oslo"}})",
             R"({ "age" : -4, "name" : "B\"o\\b\u00e9", "tags" : [ "blue" , "green" ],
                 "address" : { "zip" : null, "city" : "Ås" }, "height": 1.5e3, "admin": false,
                 "kind": "person" })",
             R"({"name":"","age":0,"tags":["red","red","red"],"address":{"city":"x","zip":"1"}})",
         }) {
        EXPECT_TRUE(accepts(*g, text)) << text;
        EXPECT_TRUE(Json::accept(text)) << text;
    }
}

TEST(JsonSchemaGrammar, RefusesTextsThatDoNotMatch) {
    auto g = JsonSchemaGrammar::compile(kPerson);
    for (const char* text : {
             R"({"name":"Ann","age":31,"tags":["red"]})",                           // no address
             R"({"name":"Ann","age":31.5,"tags":["red"],"address":{"city":"O"}})",  // not integer
             R"({"name":"Ann","age":31,"tags":[],"address":{"city":"O"}})",         // minItems
             R"({"name":"A","age":1,"tags":["red","red","red","red"],"address":{"city":"O"}})",
             R"({"name":"Ann","age":31,"tags":["pink"],"address":{"city":"O"}})",       // enum
             R"({"name":"Ann","age":31,"tags":["red"],"address":{"city":"O"},"x":1})",  // extra
             R"({"name":"Ann","name":"Bo","age":31,"tags":["red"],"address":{"city":"O"}})",
             R"({"name":"Ann","age":31,"tags":["red"],"address":{"city":"O","zip":3}})",
             R"({"name":"Ann","age":31,"tags":["red"],"address":{"city":"O"}} x)",  // trailing
             R"({"name":"Ann","age":031,"tags":["red"],"address":{"city":"O"}})",   // leading 0
             R"({"name":"A\x","age":1,"tags":["red"],"address":{"city":"O"}})",     // escape
             R"({"name":"Ann","age":1,"tags":["red"],"address":{"city":"O"},"kind":"dog"})",
             R"({"name":"Ann","age":1,"tags":["red"],"address":{"city":"O"},})",
             R"(["name"])",
             "",
         }) {
        EXPECT_FALSE(accepts(*g, text)) << text;
    }
    // A control character and invalid UTF-8 inside a string.
    EXPECT_FALSE(accepts(*g, std::string("{\"name\":\"a\nb\"")));
    EXPECT_FALSE(accepts(*g, std::string("{\"name\":\"\xC0\xAF\"")));
    EXPECT_FALSE(accepts(*g, std::string("{\"name\":\"\xED\xA0\x80\"")));  // a surrogate
    // \u escapes of surrogates only in pairs (nlohmann::json and others refuse lone ones).
    auto str = JsonSchemaGrammar::compile(Json{{"type", "string"}});
    EXPECT_TRUE(accepts(*str, R"("\ud83d\ude00 \uD7FF \uE000")"));
    EXPECT_FALSE(accepts(*str, R"("\uda00")"));
    EXPECT_FALSE(accepts(*str, R"("\uda00x")"));
    EXPECT_FALSE(accepts(*str, R"("\udc00")"));
    EXPECT_FALSE(accepts(*str, R"("\ud83d\u0041")"));
    for (const char* prefix : {"\"\\", "\"\\u", "\"\\ud8", "\"\\ud83d", "\"\\ud83d\\",
                               "\"\\ud83d\\u", "\"\\ud83d\\ud", "\"\\ud83d\\ude"}) {
        JsonRecognizer r(*str);
        ASSERT_TRUE(r.feed(prefix)) << prefix;
        const std::string whole = std::string(prefix) + r.shortest_completion();
        EXPECT_TRUE(accepts(*str, whole)) << whole;
        EXPECT_TRUE(Json::accept(whole)) << whole;
    }
}

TEST(JsonSchemaGrammar, PrefixesOfValidTextsStayAcceptedAndCompleteToValidTexts) {
    auto g = JsonSchemaGrammar::compile(kPerson);
    const std::string text =
        R"({"address":{"city":"Ås","zip":null},"age":-12,"height":-0.5E+2,"name":"x\ty\u0041",)"
        R"("tags":["green","blue"],"admin":true})";
    JsonRecognizer r(*g);
    for (std::size_t i = 0; i < text.size(); ++i) {
        const std::string completed = text.substr(0, i) + r.shortest_completion();
        EXPECT_TRUE(accepts(*g, completed)) << "prefix " << i << ": " << completed;
        EXPECT_TRUE(Json::accept(completed)) << completed;
        ASSERT_TRUE(r.feed(text[i])) << "byte " << i << " of " << text;
    }
    EXPECT_TRUE(r.complete());
    EXPECT_EQ(r.shortest_completion(), "");
    EXPECT_FALSE(JsonRecognizer(r).feed(' '));  // nothing after the value
}

TEST(JsonSchemaGrammar, RandomWalksAlwaysCompleteToValidJson) {
    // Bytes the way a random model would pick them: the recogniser keeps the accepted ones.
    auto g = JsonSchemaGrammar::compile(kPerson);
    const std::string pool =
        "{}[],:\"\\ \n0123456789-+.eEtrufalsn"
        "abcdefghijklmnopqrstuvwxyz"
        "ABRÅ\xC3\xA5";
    std::mt19937 rng(5);
    for (int walk = 0; walk < 200; ++walk) {
        JsonRecognizer r(*g);
        std::string text;
        for (int step = 0; step < 300; ++step) {
            const char c = pool[rng() % pool.size()];
            JsonRecognizer probe = r;
            if (probe.feed(c)) {
                r = probe;
                text += c;
            }
        }
        const std::string completed = text + r.shortest_completion();
        ASSERT_TRUE(accepts(*g, completed)) << completed;
        const Json value = Json::parse(completed);
        EXPECT_TRUE(value.contains("name") && value.contains("age") && value.contains("tags") &&
                    value.contains("address"))
            << completed;
        EXPECT_TRUE(value["age"].is_number_integer()) << completed;
        EXPECT_TRUE(value["tags"].size() >= 1 && value["tags"].size() <= 3) << completed;
    }
}

TEST(JsonSchemaGrammar, AnyObjectAndUntypedSchemas) {
    auto obj = JsonSchemaGrammar::any_object();
    EXPECT_TRUE(accepts(*obj, R"({"a":[1,{"b":null}],"c":"d","e":true})"));
    EXPECT_TRUE(accepts(*obj, "{}"));
    EXPECT_FALSE(accepts(*obj, "[1]"));
    EXPECT_FALSE(accepts(*obj, "\"x\""));
    EXPECT_EQ(JsonRecognizer(*obj).shortest_completion(), "{}");

    auto any = JsonSchemaGrammar::compile(Json::object());
    for (const char* t : {"1", "-2.5e3", "\"s\"", "null", "false", "[]", "{\"k\":[]}"})
        EXPECT_TRUE(accepts(*any, t)) << t;
    // A top-level number is complete as soon as it can end.
    JsonRecognizer r(*any);
    ASSERT_TRUE(r.feed("12"));
    EXPECT_TRUE(r.complete());
    ASSERT_TRUE(r.feed("."));
    EXPECT_FALSE(r.complete());
    EXPECT_EQ(r.shortest_completion(), "0");

    auto numbers = JsonSchemaGrammar::compile(Json::parse(R"({"enum": [1, 12, "a"]})"));
    EXPECT_TRUE(accepts(*numbers, "1"));
    EXPECT_TRUE(accepts(*numbers, "12"));
    EXPECT_TRUE(accepts(*numbers, "\"a\""));
    EXPECT_FALSE(accepts(*numbers, "123"));
    EXPECT_FALSE(accepts(*numbers, "2"));
}

TEST(JsonSchemaGrammar, AdditionalPropertiesWithASchema) {
    auto g = JsonSchemaGrammar::compile(Json::parse(
        R"({"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],
            "additionalProperties":{"type":"string"}})"));
    EXPECT_TRUE(accepts(*g, R"({"id":1,"x":"y","idx":"z"})"));
    EXPECT_FALSE(accepts(*g, R"({"id":1,"x":2})"));
    EXPECT_FALSE(accepts(*g, R"({"x":"y"})"));
    EXPECT_FALSE(accepts(*g, R"({"id":"1"})"));
}

TEST(JsonSchemaGrammar, NumbersAndWhitespaceAreBounded) {
    auto g = JsonSchemaGrammar::compile(Json{{"type", "number"}});
    EXPECT_TRUE(accepts(*g, std::string(JsonRecognizer::kMaxNumberLength, '1')));
    EXPECT_FALSE(accepts(*g, std::string(JsonRecognizer::kMaxNumberLength + 1, '1')));
    // Exponents of two digits at most: every number fits a double.
    EXPECT_TRUE(accepts(*g, "-1.5e-99"));
    EXPECT_TRUE(accepts(*g, "1E+07"));
    EXPECT_FALSE(accepts(*g, "1e100"));
    auto arr = JsonSchemaGrammar::compile(Json{{"type", "array"}});
    EXPECT_TRUE(accepts(*arr, "[" + std::string(JsonRecognizer::kMaxWhitespaceRun, ' ') + "]"));
    EXPECT_FALSE(
        accepts(*arr, "[" + std::string(JsonRecognizer::kMaxWhitespaceRun + 1, ' ') + "]"));
}

TEST(JsonSchemaGrammar, UnsupportedKeywordsAreNamed) {
    const std::string e = test::error_of([] {
        JsonSchemaGrammar::compile(Json::parse(
            R"j({"type":"object","properties":{"a":{"type":"string","pattern":"a{1001}"},
                "b":{"$ref":"http://example.com/s.json"}},"minProperties":1})j"));
    });
    EXPECT_THAT(e, HasSubstr("cannot enforce"));
    EXPECT_THAT(e, HasSubstr("pattern with a repetition count above 1000 at offset 7 (at "
                             "/properties/a/pattern)"));
    EXPECT_THAT(e, HasSubstr("$ref 'http://example.com/s.json' outside this schema"));
    EXPECT_THAT(e, HasSubstr("minProperties (at /minProperties)"));
    EXPECT_THAT(test::error_of([] {
                    JsonSchemaGrammar::compile(
                        Json::parse(R"({"type":"object","properties":{"a":{}},"required":["b"]})"));
                }),
                HasSubstr("'b', which is not in 'properties'"));
    EXPECT_THAT(test::error_of([] {
                    JsonSchemaGrammar::compile(Json{{"type", "date"}});
                }),
                HasSubstr("unknown type 'date'"));
    EXPECT_THAT(
        test::error_of([] {
            JsonSchemaGrammar::compile(Json{{"type", "array"}, {"minItems", 3}, {"maxItems", 2}});
        }),
        HasSubstr("minItems 3 is larger than maxItems 2"));
    // Annotations are accepted (and not enforced).
    EXPECT_NO_THROW(JsonSchemaGrammar::compile(Json::parse(
        R"({"title":"T","description":"d","type":"string","format":"date-time","default":"x"})")));
}

// Every prefix of an accepted text is accepted and its shortest completion completes it; the
// completion of every accepted prefix of `texts` (accepted or not) gives a whole value.
void expect_completions_valid(const JsonSchemaGrammar& g, const std::vector<std::string>& texts) {
    for (const std::string& t : texts) {
        JsonRecognizer r(g);
        for (std::size_t i = 0; i < t.size(); ++i) {
            if (!r.feed(t[i])) break;
            JsonRecognizer done = r;
            const std::string rest = r.shortest_completion();
            EXPECT_TRUE(done.feed(rest) && done.complete())
                << "prefix '" << t.substr(0, i + 1) << "' + '" << rest << "'";
        }
    }
}

TEST(JsonSchemaGrammar, IntegerBoundsAsZodWritesThem) {
    // zod's .int() writes the safe-integer bounds; .min() / .max() narrower ones.
    auto safe = JsonSchemaGrammar::compile(Json::parse(
        R"({"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991})"));
    EXPECT_TRUE(accepts(*safe, "9007199254740991"));
    EXPECT_TRUE(accepts(*safe, "-9007199254740991"));
    EXPECT_TRUE(accepts(*safe, "0"));
    EXPECT_FALSE(accepts(*safe, "9007199254740992"));
    EXPECT_FALSE(accepts(*safe, "-9007199254740992"));
    EXPECT_FALSE(accepts(*safe, "90071992547409910"));
    EXPECT_FALSE(accepts(*safe, "1.5"));
    EXPECT_FALSE(accepts(*safe, "1e3"));

    auto range = JsonSchemaGrammar::compile(
        Json::parse(R"({"type":"integer","minimum":10,"exclusiveMaximum":20})"));
    EXPECT_TRUE(accepts(*range, "10"));
    EXPECT_TRUE(accepts(*range, "19"));
    EXPECT_FALSE(accepts(*range, "20"));
    EXPECT_FALSE(accepts(*range, "9"));
    JsonRecognizer r(*range);
    EXPECT_FALSE(JsonRecognizer(r).feed("3"));  // no number from 3 lies in [10, 20)
    EXPECT_FALSE(JsonRecognizer(r).feed("-"));
    EXPECT_TRUE(r.feed("1"));
    EXPECT_FALSE(r.complete());
    EXPECT_EQ(r.shortest_completion(), "0");
    EXPECT_EQ(range->minimal_text(range->root()), "10");

    auto negative =
        JsonSchemaGrammar::compile(Json::parse(R"({"type":"integer","minimum":-50,"maximum":-7})"));
    EXPECT_EQ(negative->minimal_text(negative->root()), "-7");
    EXPECT_TRUE(accepts(*negative, "-50"));
    EXPECT_FALSE(accepts(*negative, "-51"));
    EXPECT_FALSE(accepts(*negative, "-6"));
    expect_completions_valid(*negative, {"-1", "-5", "-49", "-0"});
    expect_completions_valid(*range, {"1", "19", "10"});
    expect_completions_valid(*safe, {"-", "-9007199254740991", "12345"});

    EXPECT_THAT(test::error_of([] {
                    JsonSchemaGrammar::compile(Json::parse(
                        R"({"type":"integer","exclusiveMinimum":1,"exclusiveMaximum":2})"));
                }),
                HasSubstr("no integer lies between"));
}

TEST(JsonSchemaGrammar, NumberBounds) {
    auto g = JsonSchemaGrammar::compile(
        Json::parse(R"({"type":"number","exclusiveMinimum":0,"maximum":1.5})"));
    EXPECT_TRUE(accepts(*g, "1.5"));
    EXPECT_TRUE(accepts(*g, "0.001"));
    EXPECT_FALSE(accepts(*g, "0"));
    EXPECT_FALSE(accepts(*g, "1.51"));
    EXPECT_FALSE(accepts(*g, "2"));
    EXPECT_FALSE(accepts(*g, "-0.5"));
    expect_completions_valid(*g, {"0.0", "0.", "1.", "1.4", "0"});
    // Draft 4's boolean exclusive flags.
    auto d4 = JsonSchemaGrammar::compile(
        Json::parse(R"({"type":"number","minimum":1,"exclusiveMinimum":true})"));
    EXPECT_FALSE(accepts(*d4, "1"));
    EXPECT_TRUE(accepts(*d4, "1.01"));
}

TEST(JsonSchemaGrammar, StringLengths) {
    auto g =
        JsonSchemaGrammar::compile(Json::parse(R"({"type":"string","minLength":2,"maxLength":3})"));
    EXPECT_FALSE(accepts(*g, R"("a")"));
    EXPECT_TRUE(accepts(*g, R"("ab")"));
    EXPECT_TRUE(accepts(*g, R"("a\u00e9")"));          // an escape is one character
    EXPECT_TRUE(accepts(*g, "\"\xc3\xa9\xc3\xa9\""));  // two code points, four bytes
    EXPECT_TRUE(accepts(*g, R"("\ud83d\ude00x")"));    // a surrogate pair is one character
    EXPECT_FALSE(accepts(*g, R"("abcd")"));
    EXPECT_EQ(g->minimal_text(g->root()), "\"aa\"");
    expect_completions_valid(*g, {R"("a)", R"("\)", R"("ab)"});
}

TEST(JsonSchemaGrammar, AnyOfOneOfAndNullable) {
    // zod's .nullable() / unions: alternatives told apart by their first byte.
    auto g = JsonSchemaGrammar::compile(Json::parse(R"({"type":"object","properties":{
        "a":{"anyOf":[{"type":"string","maxLength":2},{"type":"null"}]},
        "b":{"oneOf":[{"type":"integer","minimum":0},{"type":"array","items":{"type":"boolean"}}]},
        "c":{"type":"string","nullable":true}},
      "required":["a","b","c"],"additionalProperties":false})"));
    EXPECT_TRUE(accepts(*g, R"({"a":null,"b":3,"c":null})"));
    EXPECT_TRUE(accepts(*g, R"({"a":"xy","b":[true],"c":"s"})"));
    EXPECT_FALSE(accepts(*g, R"({"a":"xyz","b":3,"c":null})"));
    EXPECT_FALSE(accepts(*g, R"({"a":null,"b":-1,"c":null})"));
    EXPECT_FALSE(accepts(*g, R"({"a":null,"b":["x"],"c":null})"));

    // Two object alternatives start alike: their union is enforced and reported.
    std::vector<std::string> ignored;
    auto objects = JsonSchemaGrammar::compile(Json::parse(R"({"anyOf":[
            {"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number"}},
             "required":["kind","r"],"additionalProperties":false},
            {"type":"object","properties":{"kind":{"const":"square"},"side":{"type":"number"}},
             "required":["kind","side"],"additionalProperties":false}]})"),
                                              &ignored);
    ASSERT_EQ(ignored.size(), 1u);
    EXPECT_THAT(ignored[0], HasSubstr("enforced as their union (at /anyOf)"));
    EXPECT_TRUE(accepts(*objects, R"({"kind":"circle","r":1})"));
    EXPECT_TRUE(accepts(*objects, R"({"kind":"square","side":2})"));
    EXPECT_FALSE(accepts(*objects, R"({"kind":"oval"})"));
    EXPECT_FALSE(accepts(*objects, R"({"kind":"circle","x":1})"));
    EXPECT_THROW(JsonSchemaGrammar::compile(Json::parse(R"({"anyOf":[
            {"type":"object","properties":{"a":{"type":"string"}}},
            {"type":"object","properties":{"b":{"type":"string"}}}]})")),
                 SchemaError);
    // Literals of different alternatives join.
    auto lits = JsonSchemaGrammar::compile(
        Json::parse(R"({"anyOf":[{"const":"a"},{"enum":["b",1]},{"type":"boolean"}]})"));
    for (const char* ok : {R"("a")", R"("b")", "1", "true"}) EXPECT_TRUE(accepts(*lits, ok)) << ok;
    EXPECT_FALSE(accepts(*lits, R"("c")"));
}

TEST(JsonSchemaGrammar, RefsAndBoundedRecursion) {
    // zod's recursive schemas: a tree of nodes through $defs.
    auto tree = JsonSchemaGrammar::compile(Json::parse(R"({
      "$ref": "#/$defs/node",
      "$defs": {"node": {"type": "object",
        "properties": {"name": {"type": "string"},
                       "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "required": ["name"], "additionalProperties": false}}})"));
    EXPECT_TRUE(accepts(*tree, R"({"name":"a","children":[{"name":"b","children":[]}]})"));
    EXPECT_FALSE(accepts(*tree, R"({"name":"a","children":[{"nom":"b"}]})"));
    EXPECT_EQ(tree->minimal_text(tree->root()), R"({"name":""})");
    // Depth is bounded: the recogniser refuses nesting beyond kMaxDepth frames.
    std::string deep;
    for (std::size_t i = 0; i < JsonRecognizer::kMaxDepth; ++i)
        deep += R"({"name":"x","children":[)";
    JsonRecognizer r(*tree);
    EXPECT_FALSE(r.feed(deep));
    // definitions (draft 7) and pointers into properties.
    auto d7 = JsonSchemaGrammar::compile(Json::parse(R"({"type":"object",
        "properties":{"a":{"$ref":"#/definitions/pos"},"b":{"$ref":"#/properties/a"}},
        "definitions":{"pos":{"type":"integer","minimum":1}}})"));
    EXPECT_TRUE(accepts(*d7, R"({"a":1,"b":2})"));
    EXPECT_FALSE(accepts(*d7, R"({"b":0})"));
    EXPECT_THAT(test::error_of([] {
                    JsonSchemaGrammar::compile(Json::parse(R"({"$ref":"#/$defs/missing"})"));
                }),
                HasSubstr("cannot enforce: $ref '#/$defs/missing'"));
}

TEST(JsonSchemaGrammar, IgnoredKeywordsAreListedNotEnforced) {
    std::vector<std::string> ignored;
    auto g = JsonSchemaGrammar::compile(
        Json::parse(R"j({"type":"object","properties":{"e":{"type":"string","pattern":"a{1001}"}},
                        "minProperties":1})j"),
        &ignored);
    EXPECT_THAT(ignored, ::testing::UnorderedElementsAre(
                             "pattern with a repetition count above 1000 at offset 7 (at "
                             "/properties/e/pattern)",
                             "minProperties (at /minProperties)"));
    EXPECT_TRUE(accepts(*g, R"({"e":"zzz"})"));
    EXPECT_TRUE(accepts(*g, "{}"));
}

// The byte at which the recogniser first refuses `text` (npos: it reads all of it).
std::size_t first_refused(const JsonSchemaGrammar& g, std::string_view text) {
    JsonRecognizer r(g);
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (!r.feed(text[i])) return i;
    }
    return std::string::npos;
}

Json string_format(const char* format) { return Json{{"type", "string"}, {"format", format}}; }

// Independent references: the regular expressions zod 4 checks these formats with (uuid with its
// version and variant, dates with leap years), narrowed where the grammar is (date-time in UTC
// with seconds, fractions of 1-9 digits).
const char* const kDateRe =
    R"((?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29|)"
    R"(\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|)"
    R"((?:02)-(?:0[1-9]|1\d|2[0-8]))))";
std::regex format_reference(const std::string& format) {
    if (format == "uuid") {
        return std::regex(
            "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-"
            "[0-9a-fA-F]{12}$");
    }
    if (format == "date") return std::regex(std::string("^") + kDateRe + "$");
    if (format == "date-time") {
        return std::regex(std::string("^") + kDateRe +
                          R"(T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,9})?Z$)");
    }
    return std::regex(
        R"(^(?!\.)(?!.*\.\.)([A-Za-z0-9_'+\-\.]*)[A-Za-z0-9_+-]@([A-Za-z0-9][A-Za-z0-9\-]*\.)+[A-Za-z]{2,}$)");
}

TEST(JsonSchemaGrammar, StringFormatsAcceptValidValues) {
    const std::map<std::string, std::vector<std::string>> valid = {
        {"uuid",
         {"123e4567-e89b-12d3-a456-426614174000", "00000000-0000-4000-8000-000000000000",
          "FFFFFFFF-FFFF-8FFF-BFFF-FFFFFFFFFFFF"}},
        {"date", {"2024-02-29", "2000-02-29", "2023-12-31", "0001-01-01", "2023-04-30"}},
        {"date-time",
         {"2024-02-29T23:59:59Z", "1999-01-01T00:00:00.5Z", "2023-06-15T12:30:45.123456789Z"}},
        {"email",
         {"a@b.co", "first.last+tag@mail.example.com", "x_y-z@sub-domain.example.org",
          "me@127.example.io"}}};
    for (const auto& [format, values] : valid) {
        auto g = JsonSchemaGrammar::compile(string_format(format.c_str()));
        const std::regex ref = format_reference(format);
        for (const std::string& v : values) {
            ASSERT_TRUE(std::regex_match(v, ref)) << format << " reference: " << v;
            EXPECT_TRUE(accepts(*g, "\"" + v + "\"")) << format << ": " << v;
            EXPECT_EQ(format_status(g->node(g->root()).format, v), 1) << v;
        }
        // The shortest value is valid, and so is the completion of every prefix.
        const std::string minimal = g->minimal_text(g->root());
        EXPECT_TRUE(std::regex_match(minimal.substr(1, minimal.size() - 2), ref)) << minimal;
        std::vector<std::string> texts;
        for (const std::string& v : values) texts.push_back("\"" + v + "\"");
        expect_completions_valid(*g, texts);
    }
}

TEST(JsonSchemaGrammar, StringFormatsRefuseAtTheFirstImpossibleByte) {
    struct Case {
        const char* format;
        std::string text;     // the JSON text
        std::size_t refused;  // the byte refused
    };
    const std::vector<Case> cases = {
        {"uuid", R"("123e4567-e89b-02d3-a456-426614174000")", 15},  // version 0
        {"uuid", R"("123e4567-e89b-12d3-c456-426614174000")", 20},  // variant c
        {"uuid", R"("123e4567e89b)", 9},                            // no dash
        {"uuid", R"("123e4567-e89b-12d3-a456-42661417400")", 36},   // one digit short: no quote
        {"uuid", R"("123e4567-e89b-12d3-a456-4266141740000")", 37},
        {"uuid", R"("g)", 1},
        {"date", R"("2023-02-29")", 10},  // not a leap year
        {"date", R"("2023-02-30")", 9},   // February has no day 3x
        {"date", R"("2023-04-31")", 10},  // April has 30 days
        {"date", R"("2023-13-01")", 7},
        {"date", R"("2023-00-01")", 7},
        {"date", R"("2023-01-00")", 10},
        {"date", R"("2023-1-01")", 7},
        {"date", R"("2023-01-01T")", 11},
        {"date", R"("1900-02-29")", 10},                 // 1900 is not a leap year
        {"date-time", R"("2024-01-01 10:00:00Z")", 11},  // a space for T
        {"date-time", R"("2024-01-01T24:00:00Z")", 13},
        {"date-time", R"("2024-01-01T10:60:00Z")", 15},
        {"date-time", R"("2024-01-01T10:00Z")", 17},  // seconds are required
        {"date-time", R"("2024-01-01T10:00:00+01:00")", 20},
        {"date-time", R"("2024-01-01T10:00:00.Z")", 21},
        {"date-time", R"("2024-01-01T10:00:00.1234567890Z")", 30},
        {"date-time", R"("2024-01-01T10:00:00")", 20},  // no zone
        {"date-time", R"("2024-01-01T10:00:00Zx")", 21},
        {"email", R"(".a@b.co")", 1},
        {"email", R"("a..b@b.co")", 3},
        {"email", R"("a.@b.co")", 3},
        {"email", R"("a b@b.co")", 2},
        {"email", R"("a@b")", 4},  // one label
        {"email", R"("a@-b.co")", 3},
        {"email", R"("a@b-.co")", 5},
        {"email", R"("a@b.c")", 6},   // a one-letter top-level label
        {"email", R"("a@b.c1")", 7},  // digits in the top-level label: the quote is refused
        {"email", R"("a@b@c.co")", 4},
        {"email", R"("a\u0040b.co")", 2},  // no escapes
        {"email", "\"\xc3\xa9@b.co\"", 1},
    };
    for (const Case& c : cases) {
        auto g = JsonSchemaGrammar::compile(string_format(c.format));
        EXPECT_EQ(first_refused(*g, c.text), c.refused) << c.format << ": " << c.text;
        expect_completions_valid(*g, {c.text});
    }
    // A local part of 64 bytes, a label of 63, an address of 254 at most.
    auto email = JsonSchemaGrammar::compile(string_format("email"));
    EXPECT_TRUE(accepts(*email, "\"" + std::string(64, 'a') + "@b.co\""));
    EXPECT_EQ(first_refused(*email, "\"" + std::string(65, 'a')), 65u);
    EXPECT_EQ(first_refused(*email, "\"a@" + std::string(64, 'b')), 66u);
    EXPECT_EQ(first_refused(*email, "\"a@" + std::string(62, 'b') + "-"), 65u);
    std::string longest = "\"a@";
    for (int i = 0; i < 4; ++i) longest += std::string(60, 'b') + ".";
    EXPECT_EQ(first_refused(*email, longest + std::string(9, 'c')), 255u);  // byte 255
    EXPECT_TRUE(accepts(*email, longest + std::string(8, 'c') + "\""));
}

TEST(JsonSchemaGrammar, StringFormatRandomWalksMatchTheReference) {
    // Random bytes fed where the recogniser takes them: every value it completes (or that the
    // shortest completion finishes) matches the reference expression.
    const std::string alphabet = "0123456789abcdefABXZTz-:.@_+\" ";
    std::mt19937 rng(43);
    for (const char* format : {"uuid", "date", "date-time", "email"}) {
        auto g = JsonSchemaGrammar::compile(string_format(format));
        const std::regex ref = format_reference(format);
        int completed = 0;
        for (int walk = 0; walk < 300; ++walk) {
            JsonRecognizer r(*g);
            std::string text;
            for (int step = 0; step < 400 && !r.complete(); ++step) {
                const char c = alphabet[rng() % alphabet.size()];
                JsonRecognizer next = r;
                if (!next.feed(c)) continue;
                r = next;
                text += c;
            }
            if (r.complete()) ++completed;
            const std::string whole = text + r.shortest_completion();
            JsonRecognizer check(*g);
            ASSERT_TRUE(check.feed(whole) && check.complete()) << format << ": " << whole;
            const std::string value = Json::parse(whole).get<std::string>();
            EXPECT_TRUE(std::regex_match(value, ref)) << format << ": " << value;
        }
        EXPECT_GT(completed, 0) << format;
    }
}

TEST(JsonSchemaGrammar, StringFormatsWithLengthsAndInObjects) {
    // uuid / date have one length: lengths that allow it are implied, others match nothing.
    std::vector<std::string> ignored;
    auto ok = JsonSchemaGrammar::compile(
        Json::parse(R"({"type":"string","format":"uuid","minLength":36,"maxLength":36})"),
        &ignored);
    EXPECT_TRUE(ignored.empty());
    EXPECT_TRUE(accepts(*ok, R"("123e4567-e89b-12d3-a456-426614174000")"));
    EXPECT_THAT(test::error_of([] {
                    JsonSchemaGrammar::compile(
                        Json::parse(R"({"type":"string","format":"date","maxLength":8})"));
                }),
                HasSubstr("no date string has a length between minLength and maxLength"));
    // maxLength is enforced with the format: a byte is taken only while a value still fits.
    auto e = JsonSchemaGrammar::compile(
        Json::parse(R"({"type":"string","format":"email","minLength":3,"maxLength":8})"), &ignored);
    EXPECT_TRUE(ignored.empty());
    EXPECT_TRUE(accepts(*e, R"("ab@cd.ef")"));
    EXPECT_EQ(first_refused(*e, R"("abc@cd.ef")"), 6u);  // "abc@cd" needs ".aa"
    EXPECT_EQ(first_refused(*e, R"("abcdefg)"), 4u);     // "abcd" needs "@a.aa"
    expect_completions_valid(*e, {R"("ab@cd.ef")", R"("abc@cd.ef")", R"("a@b)"});
    auto dt = JsonSchemaGrammar::compile(
        Json::parse(R"({"type":"string","format":"date-time","maxLength":22})"));
    EXPECT_TRUE(accepts(*dt, R"("2024-01-01T00:00:00.1Z")"));
    EXPECT_EQ(first_refused(*dt, R"("2024-01-01T00:00:00.12Z")"), 22u);
    // A minLength above the format's shortest value is not enforced with it (listed).
    JsonSchemaGrammar::compile(Json::parse(R"({"type":"string","format":"email","minLength":10})"),
                               &ignored);
    EXPECT_THAT(ignored, ::testing::ElementsAre(
                             "minLength above 6 together with format 'email' (at /minLength)"));
    // Unknown formats stay annotations.
    auto uri = JsonSchemaGrammar::compile(string_format("uri"));
    EXPECT_TRUE(accepts(*uri, R"("not a uri")"));
    // What zod writes: formats inside an object, nullable through a type list.
    auto obj = JsonSchemaGrammar::compile(Json::parse(R"({"type":"object","properties":{
        "id":{"type":"string","format":"uuid"},"at":{"type":["string","null"],"format":"date-time"},
        "mail":{"type":"string","format":"email"}},"required":["id","at","mail"],
        "additionalProperties":false})"));
    EXPECT_TRUE(accepts(
        *obj, R"({"id":"123e4567-e89b-12d3-a456-426614174000","at":null,"mail":"a@b.co"})"));
    EXPECT_TRUE(accepts(
        *obj,
        R"({"id":"123e4567-e89b-12d3-a456-426614174000","at":"2024-01-01T00:00:00Z","mail":"a@b.co"})"));
    EXPECT_FALSE(accepts(*obj, R"({"id":"x","at":null,"mail":"a@b.co"})"));
    const std::string minimal = obj->minimal_text(obj->root());
    EXPECT_TRUE(accepts(*obj, minimal)) << minimal;
    EXPECT_EQ(minimal,
              R"({"id":"00000000-0000-4000-8000-000000000000","at":null,"mail":"a@a.aa"})");
}

TEST(JsonSchemaGrammar, AnAdditionalKeySpelledLikeAGivenPropertyCompletesToAnotherKey) {
    // Found by fuzz_json_schema (corpus seed-pattern): `"c` after a property c was given can only
    // become another key, and its completion must not close it as "c".
    auto g = JsonSchemaGrammar::compile(Json::parse(R"({"properties":{"c":{"type":"integer"}}})"));
    expect_completions_valid(*g, {R"({"c":1,"c")", R"({"c":1,"c_")"});
    EXPECT_FALSE(accepts(*g, R"({"c":1,"c":2})"));
}

// ---- pattern ----------------------------------------------------------------------------------

Json string_pattern(const std::string& pattern) {
    return Json{{"type", "string"}, {"pattern", pattern}};
}

std::u32string code_points(const std::string& utf8) {
    std::u32string out;
    for (std::size_t i = 0; i < utf8.size();) {
        const auto b = static_cast<unsigned char>(utf8[i]);
        const int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
        char32_t cp = n == 1 ? b : b & (0x7F >> n);
        for (int k = 1; k < n; ++k) cp = cp << 6 | (static_cast<unsigned char>(utf8[i + k]) & 0x3F);
        out += cp;
        i += static_cast<std::size_t>(n);
    }
    return out;
}

TEST(JsonSchemaGrammar, PatternsAreEnforcedOnTheDecodedString) {
    auto g = JsonSchemaGrammar::compile(string_pattern("^[a-z]+\\d{2}$"));
    EXPECT_TRUE(accepts(*g, R"("abc12")"));
    EXPECT_TRUE(accepts(*g, R"("\u0061b\u00312")"));  // escapes are the characters they write
    EXPECT_FALSE(accepts(*g, R"("ab1")"));
    EXPECT_EQ(first_refused(*g, R"("AB12")"), 1u);
    EXPECT_EQ(first_refused(*g, R"("ab1x")"), 4u);
    // \u004x can only be '@' or 'A'-'O': refused at its third digit.
    EXPECT_EQ(first_refused(*g, R"("ab\u0041)"), 7u);
    EXPECT_EQ(first_refused(*g, "\"ab\\n"), 4u);
    // Not anchored: the expression may match any part.
    auto at = JsonSchemaGrammar::compile(string_pattern("@"));
    EXPECT_TRUE(accepts(*at, R"("x@y")"));
    EXPECT_EQ(first_refused(*at, R"("xy")"), 3u);
    // Quotes, backslashes and code points beyond ASCII, raw or escaped (surrogate pairs too).
    auto quote = JsonSchemaGrammar::compile(string_pattern("^\"\\\\$"));
    EXPECT_TRUE(accepts(*quote, R"("\"\\")"));
    auto emoji = JsonSchemaGrammar::compile(string_pattern("^é+😀$"));
    EXPECT_TRUE(accepts(*emoji, "\"é\\u00e9😀\""));
    EXPECT_TRUE(accepts(*emoji, R"("\u00E9\ud83d\ude00")"));
    EXPECT_EQ(first_refused(*emoji, R"("é\ud83d\ude01")"), 14u);
    EXPECT_EQ(first_refused(*emoji, "\"\xc3\xaa"), 2u);  // ê: its last byte
    expect_completions_valid(*emoji, {R"("é\ud83d\ude00")", "\"é\xf0\x9f\x98\x80\""});
}

TEST(JsonSchemaGrammar, PatternsWithLengthsTakeOnlyLengthsThatCanStillMatch) {
    auto g = JsonSchemaGrammar::compile(
        Json::parse(R"({"type":"string","pattern":"^(ab)+$","minLength":3,"maxLength":5})"));
    EXPECT_TRUE(accepts(*g, R"("abab")"));
    EXPECT_EQ(first_refused(*g, R"("ab")"), 3u);     // too short to close
    EXPECT_EQ(first_refused(*g, R"("ababa")"), 5u);  // "ababab" would be too long
    EXPECT_EQ(g->minimal_text(g->root()), R"("abab")");
    EXPECT_THAT(test::error_of([] {
                    JsonSchemaGrammar::compile(
                        Json::parse(R"({"type":"string","pattern":"^a$","minLength":2})"));
                }),
                HasSubstr("no string matching the pattern has a length between minLength and "
                          "maxLength"));
    // The type is implied by the keyword, as for minLength.
    auto untyped = JsonSchemaGrammar::compile(Json::parse(R"({"pattern":"^z"})"));
    EXPECT_TRUE(accepts(*untyped, R"("zz")"));
    EXPECT_FALSE(accepts(*untyped, "1"));
}

TEST(JsonSchemaGrammar, PatternsTogetherWithFormatsAsZodWritesThem) {
    // zod 4's z.email(), z.uuid(), z.iso.datetime(), z.iso.date(): format and pattern both.
    const Json zod = Json::parse(R"({"type":"object","additionalProperties":false,
      "required":["e","u","d","dd"],"properties":{
      "e":{"type":"string","format":"email","pattern":"^(?:[A-Za-z0-9_'+\\-]+\\.)*[A-Za-z0-9_'+\\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\\-]*\\.)+[A-Za-z]{2,}$"},
      "u":{"type":"string","format":"uuid","pattern":"^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$"},
      "d":{"type":"string","format":"date-time","pattern":"^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))T(?:(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d+)?(?:Z))$"},
      "dd":{"type":"string","format":"date","pattern":"^(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|(?:02)-(?:0[1-9]|1\\d|2[0-8])))$"}}})");
    std::vector<std::string> ignored;
    auto g = JsonSchemaGrammar::compile(zod, &ignored);
    EXPECT_TRUE(ignored.empty()) << ignored.front();
    EXPECT_TRUE(accepts(*g, R"({"e":"a.b@c.de","u":"123e4567-e89b-12d3-a456-426614174000",
                               "d":"2024-02-29T10:00:00.5Z","dd":"2000-02-29"})"));
    // What only one of the two allows is refused: an apostrophe (the pattern's), a nil uuid
    // (the pattern's), a 1900-02-29.
    EXPECT_EQ(first_refused(*g, R"({"e":"a'b@c.de")"), 7u);
    EXPECT_EQ(first_refused(*g, R"({"e":"a@b.co","u":"00000000-0000-0)"), 33u);
    EXPECT_FALSE(accepts(*g, R"({"e":"a@b.co","u":"123e4567-e89b-12d3-a456-426614174000",
                                "d":"2024-01-01T00:00:00Z","dd":"1900-02-29"})"));
    const std::string minimal = g->minimal_text(g->root());
    EXPECT_TRUE(accepts(*g, minimal)) << minimal;
}

TEST(JsonSchemaGrammar, PatternRandomWalksAlwaysCompleteToMatchingStrings) {
    // Random bytes (ASCII, escapes, UTF-8) fed where the recogniser takes them; every text it
    // reads completes to a string the pattern matches (std::regex as the reference for ASCII
    // values) within its lengths.
    struct Case {
        const char* pattern;
        std::size_t min_length, max_length;
    };
    const std::vector<Case> cases = {
        {"^[a-c]{2,4}(-\\d+)?$", 0, SIZE_MAX},
        {"x+y|é", 0, 6},
        {"^(ab)+$", 3, 9},
        {"^\\w*$", 2, 5},
        {"[😀-😂]", 0, SIZE_MAX},
        {"^[^a]\\\\?\"", 0, SIZE_MAX},
        {"^(?:\\u00e9|\\d)+$", 4, SIZE_MAX},
    };
    const std::string alphabet = "abcxy-019\"\\u\\ude800 \xc3\xa9\xf0\x9f\x98\x81\xed\x9f";
    std::mt19937 rng(4343);
    int total = 0;
    for (const Case& c : cases) {
        Json schema = string_pattern(c.pattern);
        if (c.min_length) schema["minLength"] = c.min_length;
        if (c.max_length != SIZE_MAX) schema["maxLength"] = c.max_length;
        auto g = JsonSchemaGrammar::compile(schema);
        auto re = RegexAutomaton::compile(c.pattern);
        int completed = 0;
        for (int walk = 0; walk < 300; ++walk) {
            JsonRecognizer r(*g);
            std::string text;
            for (int step = 0; step < 60 && !r.complete(); ++step) {
                JsonRecognizer next = r;
                const char b = alphabet[rng() % alphabet.size()];
                if (!next.feed(b)) continue;
                r = next;
                text += b;
            }
            if (r.complete()) ++completed;
            const std::string whole = text + r.shortest_completion();
            JsonRecognizer check(*g);
            ASSERT_TRUE(check.feed(whole) && check.complete()) << c.pattern << ": " << whole;
            const std::string value = Json::parse(whole).get<std::string>();
            const std::u32string cps = code_points(value);
            EXPECT_TRUE(re->matches(cps)) << c.pattern << ": " << whole;
            EXPECT_GE(cps.size(), c.min_length) << whole;
            EXPECT_LE(cps.size(), c.max_length) << whole;
            auto ascii = [](std::string_view t) {
                return std::all_of(t.begin(), t.end(),
                                   [](char x) { return static_cast<unsigned char>(x) < 0x80; });
            };
            if (ascii(value) && ascii(c.pattern)) {
                EXPECT_TRUE(std::regex_search(value, std::regex(c.pattern))) << whole;
            }
        }
        total += completed;
    }
    EXPECT_GT(total, 0);  // some walks closed their string by themselves
}

TEST(JsonSchemaGrammar, PatternFeaturesNoAutomatonExpressesAreNamed) {
    // A feature no automaton expresses is refused with or without a list (never passed over);
    // a size limit is listed like other unenforceable keywords and the rest is enforced; syntax
    // errors always refuse.
    std::vector<std::string> list;
    EXPECT_THAT(test::error_of([] { JsonSchemaGrammar::compile(string_pattern("^(a)\\1$")); }),
                HasSubstr("'/pattern': the pattern uses a backreference \\1 at offset 6, which "
                          "structured output cannot enforce"));
    EXPECT_THAT(test::error_of([&] {
                    JsonSchemaGrammar::compile(
                        Json::parse(R"({"properties":{"w":{"pattern":"\\bx"}}})"), &list);
                }),
                HasSubstr("'/properties/w/pattern': the pattern uses a word boundary"));
    std::vector<std::string> ignored;
    auto g = JsonSchemaGrammar::compile(
        Json::parse(R"({"type":"string","pattern":"x{1001}","maxLength":2})"), &ignored);
    ASSERT_EQ(ignored.size(), 1u);
    EXPECT_THAT(ignored[0], HasSubstr("pattern with a repetition count above 1000"));
    EXPECT_TRUE(accepts(*g, R"("ab")"));
    EXPECT_FALSE(accepts(*g, R"("abc")"));
    for (const char* bad : {"(a", "[z-a]", "a{3,1}", "$a"}) {
        std::vector<std::string> list;
        EXPECT_THAT(test::error_of([&] { JsonSchemaGrammar::compile(string_pattern(bad), &list); }),
                    HasSubstr("'/pattern': "))
            << bad;
    }
    EXPECT_THAT(test::error_of([] {
                    JsonSchemaGrammar::compile(Json{{"type", "string"}, {"pattern", 5}});
                }),
                HasSubstr("'/pattern' must be a string"));
}

}  // namespace
}  // namespace neural::chat
