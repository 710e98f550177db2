// Loading tokenizer.json: small synthetic files for the format variants, and malformed files
// that must fail with a message naming the file and the problem.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neural/error.h"
#include "support/fixtures.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace neural {
namespace {

using testing::AllOf;
using testing::HasSubstr;

// The byte-level vocab key for raw bytes (the inverse of what the loader does).
std::string key_for(std::string_view bytes) {
    std::string key;
    for (unsigned char b : bytes) {
        const char32_t cp = byte_level::byte_to_code_point(b);
        if (cp < 0x80) {
            key += static_cast<char>(cp);
        } else {
            key += static_cast<char>(0xC0 | (cp >> 6));
            key += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }
    return key;
}

// A minimal valid tokenizer: every byte is its own id, then "ab" = 256 and "bc" = 257, and one
// special token.
nlohmann::json tiny_tokenizer(bool merges_as_arrays) {
    nlohmann::json vocab = nlohmann::json::object();
    for (int b = 0; b < 256; ++b) vocab[key_for(std::string(1, static_cast<char>(b)))] = b;
    vocab["ab"] = 256;
    vocab["bc"] = 257;
    nlohmann::json merges = merges_as_arrays ? nlohmann::json::parse(R"([["a","b"],["b","c"]])")
                                             : nlohmann::json::parse(R"(["a b","b c"])");
    return {
        {"version", "1.0"},
        {"added_tokens",
         {{{"id", 258}, {"content", "<|end|>"}, {"special", true}, {"lstrip", false}}}},
        {"normalizer", nullptr},
        {"model", {{"type", "BPE"}, {"ignore_merges", true}, {"vocab", vocab}, {"merges", merges}}},
    };
}

class TokenizerLoad : public testing::Test {
protected:
    std::filesystem::path write(const std::string& text) {
        const std::filesystem::path path = dir_ / "tokenizer.json";
        test::write_file(path, text);
        return path;
    }
    std::filesystem::path write(const nlohmann::json& j) { return write(j.dump()); }

    // Loads `path` expecting failure; returns the message.
    static std::string load_error(const std::filesystem::path& path) {
        try {
            (void)Tokenizer::load(path);
        } catch (const Error& e) {
            return e.what();
        }
        ADD_FAILURE() << "loading " << path << " succeeded";
        return "";
    }

    test::TempDir dir_;
};

TEST_F(TokenizerLoad, AcceptsMergesAsStringsAndAsArrays) {
    for (bool arrays : {false, true}) {
        SCOPED_TRACE(arrays ? "array merges" : "string merges");
        const Tokenizer t = Tokenizer::load(write(tiny_tokenizer(arrays)));
        EXPECT_EQ(t.vocab_size(), 259u);
        // Lowest id first, leftmost on ties: "abc" -> ab|c, "bcab" -> b|c|ab -> bc|ab.
        EXPECT_EQ(t.encode("abc"), (std::vector<TokenId>{256, 'c'}));
        EXPECT_EQ(t.encode("bcab"), (std::vector<TokenId>{257, 256}));
        EXPECT_EQ(t.encode(" ab"), (std::vector<TokenId>{' ', 256}));
        EXPECT_EQ(t.encode("x<|end|>", true), (std::vector<TokenId>{'x', 258}));
        EXPECT_EQ(t.special_id("<|end|>"), 258);
        EXPECT_EQ(t.decode(std::vector<TokenId>{256, 258, 0xC3, 0xA9}), "ab<|end|>\xc3\xa9");
    }
}

TEST_F(TokenizerLoad, AddedTokensMayComeBeforeOrAfterModel) {
    // HF writes added_tokens first; nlohmann's dump sorts keys, which happens to agree. Write
    // the other order by hand.
    const nlohmann::json j = tiny_tokenizer(true);
    const std::string text =
        "{\"model\":" + j["model"].dump() + ",\"added_tokens\":" + j["added_tokens"].dump() + "}";
    const Tokenizer t = Tokenizer::load(write(text));
    EXPECT_EQ(t.special_id("<|end|>"), 258);
    EXPECT_EQ(t.encode("ab<|end|>", true), (std::vector<TokenId>{256, 258}));
}

TEST_F(TokenizerLoad, AcceptsTheO200kPreTokenizerPattern) {
    nlohmann::json j = tiny_tokenizer(false);
    const nlohmann::json real = test::read_json(test::tiny_model_dir() / "tokenizer.json");
    j["pre_tokenizer"] = real["pre_tokenizer"];
    EXPECT_NO_THROW((void)Tokenizer::load(write(j)));
}

TEST_F(TokenizerLoad, MissingFile) {
    const std::filesystem::path path = dir_ / "nope" / "tokenizer.json";
    EXPECT_EQ(load_error(path), "tokenizer file " + path.string() + " does not exist");
}

TEST_F(TokenizerLoad, DirectoryInsteadOfFile) {
    EXPECT_EQ(load_error(dir_.path()),
              "tokenizer file " + dir_.path().string() + " is a directory");
}

TEST_F(TokenizerLoad, InvalidJson) {
    for (const char* text : {"", "{\"model\": {\"vocab\": {", "{} trailing", "{'a': 1}"}) {
        const std::filesystem::path path = write(std::string(text));
        EXPECT_THAT(load_error(path),
                    AllOf(HasSubstr(path.string() + ": invalid JSON: "), HasSubstr("parse error")))
            << text;
    }
}

TEST_F(TokenizerLoad, TopLevelNotAnObject) {
    for (const char* text : {"[]", "42", "\"tokenizer\""}) {
        const std::filesystem::path path = write(std::string(text));
        EXPECT_EQ(load_error(path), path.string() + ": the top level is not a JSON object");
    }
}

TEST_F(TokenizerLoad, MissingVocab) {
    for (const char* text : {"{}", R"({"model": {"type": "BPE", "merges": []}})",
                             R"({"vocab": {"a": 0}})", R"({"model": 5})"}) {
        const std::filesystem::path path = write(std::string(text));
        EXPECT_EQ(load_error(path), path.string() + ": missing model.vocab") << text;
    }
}

TEST_F(TokenizerLoad, VocabNotAnObject) {
    for (const char* text : {R"({"model": {"vocab": [1, 2]}})", R"({"model": {"vocab": 3}})"}) {
        const std::filesystem::path path = write(std::string(text));
        EXPECT_EQ(load_error(path), path.string() + ": model.vocab is not an object") << text;
    }
}

TEST_F(TokenizerLoad, BadVocabValue) {
    for (const char* value : {"\"7\"", "-1", "1.5", "null", "[1]"}) {
        const std::filesystem::path path =
            write(std::string(R"({"model": {"vocab": {"a": 0, "b": )") + value + "}}}");
        EXPECT_EQ(load_error(path),
                  path.string() + ": model.vocab value for \"b\" is not a non-negative integer")
            << value;
    }
}

TEST_F(TokenizerLoad, BadVocabKey) {
    // U+20AC is not in the byte-level alphabet, so the key stands for no bytes.
    const std::filesystem::path path = write(std::string(R"({"model": {"vocab": {"€": 0}}})"));
    EXPECT_EQ(load_error(path),
              path.string() + ": model.vocab key \"€\" (id 0) is not a byte-level token");
}

TEST_F(TokenizerLoad, DuplicateIdsAndBytes) {
    nlohmann::json j = tiny_tokenizer(false);
    j["model"]["vocab"]["xy"] = 7;
    std::filesystem::path path = write(j);
    EXPECT_EQ(load_error(path), path.string() + ": model.vocab uses id 7 twice");

    // A JSON object may repeat a key; two ids for the same bytes cannot both be the rank.
    std::string text = tiny_tokenizer(false).dump();
    text.replace(text.find("\"ab\":256"), 8, "\"ab\":256,\"ab\":300");
    path = write(text);
    EXPECT_EQ(load_error(path),
              path.string() + ": model.vocab id 300 repeats the bytes of an earlier id");
}

TEST_F(TokenizerLoad, MissingSingleByte) {
    nlohmann::json j = tiny_tokenizer(false);
    j["model"]["vocab"].erase(key_for("\x80"));
    const std::filesystem::path path = write(j);
    EXPECT_EQ(load_error(path),
              path.string() + ": model.vocab has no token for the single byte 0x80");
}

TEST_F(TokenizerLoad, BadMerges) {
    const char* bad[] = {
        R"(["a b", "ab"])", R"(["a b", "a b c"])", R"([["a", "b"], ["a"]])", R"([["a", "b", "c"]])",
        R"([3])",           R"([["a", 1]])",       R"([{"a": "b"}])"};
    for (const char* merges : bad) {
        nlohmann::json j = tiny_tokenizer(false);
        j["model"]["merges"] = nlohmann::json::parse(merges);
        const std::filesystem::path path = write(j);
        EXPECT_THAT(load_error(path),
                    AllOf(HasSubstr(path.string() + ": model.merges entry "),
                          HasSubstr(" is neither \"left right\" nor a 2-element array")))
            << merges;
    }
    nlohmann::json j = tiny_tokenizer(false);
    j["model"]["merges"] = nlohmann::json::parse(R"(["a b", "b c", "c"])");
    const std::filesystem::path path = write(j);
    EXPECT_EQ(load_error(path), path.string() +
                                    ": model.merges entry 2 is neither \"left right\" nor a "
                                    "2-element array");
}

// A merge must name two vocab tokens whose concatenation is a token too: merges that disagree
// with the vocab mean a damaged file or one of another tokenizer.
TEST_F(TokenizerLoad, MergesNamingTokensTheVocabLacksAreAnError) {
    for (bool arrays : {false, true}) {
        SCOPED_TRACE(arrays ? "array merges" : "string merges");
        nlohmann::json j = tiny_tokenizer(arrays);
        j["model"]["merges"].push_back(arrays ? nlohmann::json::parse(R"(["x", "y"])")
                                              : nlohmann::json("x y"));  // "xy" is no token
        const std::filesystem::path path = write(j);
        EXPECT_EQ(load_error(path), path.string() +
                                        ": model.merges entry 2 (\"x y\") names a token that "
                                        "model.vocab does not have");
    }
    nlohmann::json j = tiny_tokenizer(false);
    j["model"]["vocab"].erase("bc");
    j["added_tokens"][0]["id"] = 257;
    const std::filesystem::path path = write(j);
    EXPECT_THAT(load_error(path), HasSubstr("model.merges entry 1 (\"b c\") names a token"));
}

TEST_F(TokenizerLoad, BadAddedTokens) {
    nlohmann::json j = tiny_tokenizer(false);
    j["added_tokens"] = nlohmann::json::parse(R"([{"id": 258, "content": "<|a|>"}, {"id": 259}])");
    std::filesystem::path path = write(j);
    EXPECT_EQ(load_error(path), path.string() + ": added_tokens entry 1 has no \"content\"");

    j["added_tokens"] = nlohmann::json::parse(R"([{"content": "<|a|>"}])");
    path = write(j);
    EXPECT_EQ(load_error(path), path.string() + ": added_tokens entry 0 has no valid \"id\"");

    j["added_tokens"] = nlohmann::json::parse(R"([{"id": 256, "content": "<|a|>"}])");
    path = write(j);
    EXPECT_EQ(load_error(path), path.string() + ": added token \"<|a|>\" reuses vocab id 256");
}

TEST_F(TokenizerLoad, UnsupportedModelType) {
    nlohmann::json j = tiny_tokenizer(false);
    j["model"]["type"] = "WordPiece";
    const std::filesystem::path path = write(j);
    EXPECT_EQ(load_error(path),
              path.string() + ": model.type is \"WordPiece\", only BPE is supported");
}

TEST_F(TokenizerLoad, UnsupportedPreTokenizerPattern) {
    nlohmann::json j = tiny_tokenizer(false);
    j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}};
    const std::filesystem::path path = write(j);
    EXPECT_EQ(load_error(path), path.string() +
                                    ": unsupported pre-tokenizer pattern \"\\s+\" (only o200k is "
                                    "implemented)");
}

}  // namespace
}  // namespace neural
