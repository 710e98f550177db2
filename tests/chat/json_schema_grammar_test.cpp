// The JSON-schema recogniser: whole texts that match or do not, byte-by-byte prefixes, the
// shortest completion of any accepted prefix, and the keywords compile() refuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

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
            R"({"type":"object","properties":{"a":{"type":"string","pattern":"^x"},
                "b":{"$ref":"http://example.com/s.json"}},"minProperties":1})"));
    });
    EXPECT_THAT(e, HasSubstr("cannot enforce"));
    EXPECT_THAT(e, HasSubstr("pattern (at /properties/a/pattern)"));
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
        Json::parse(R"({"type":"object","properties":{"e":{"type":"string","pattern":"^a"}},
                        "minProperties":1})"),
        &ignored);
    EXPECT_THAT(ignored, ::testing::UnorderedElementsAre("pattern (at /properties/e/pattern)",
                                                         "minProperties (at /minProperties)"));
    EXPECT_TRUE(accepts(*g, R"({"e":"zzz"})"));
    EXPECT_TRUE(accepts(*g, "{}"));
}

}  // namespace
}  // namespace neural::chat
