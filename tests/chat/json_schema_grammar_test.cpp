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
                "b":{"anyOf":[{"type":"string"}]}},"minProperties":1})"));
    });
    EXPECT_THAT(e, HasSubstr("cannot enforce"));
    EXPECT_THAT(e, HasSubstr("pattern (at /properties/a/pattern)"));
    EXPECT_THAT(e, HasSubstr("anyOf (at /properties/b/anyOf)"));
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

}  // namespace
}  // namespace neural::chat
