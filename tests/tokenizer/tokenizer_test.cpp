// Encoding and decoding with the real o200k_harmony tokenizer.json of the tiny fixture model.
#include "tokenizer/tokenizer.h"

#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "neural/error.h"
#include "support/fixtures.h"

namespace neural {
namespace {

// Loaded once per process: ctest runs each TEST in its own process, and tests only read it.
const Tokenizer& o200k() {
    static const Tokenizer tokenizer = Tokenizer::load(test::tiny_model_dir() / "tokenizer.json");
    return tokenizer;
}

std::string utf8(char32_t cp) {
    std::string s;
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else if (cp < 0x800) {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        s += static_cast<char>(0xE0 | (cp >> 12));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        s += static_cast<char>(0xF0 | (cp >> 18));
        s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
}

std::vector<TokenId> ids_of(const nlohmann::json& array) {
    std::vector<TokenId> ids;
    for (const auto& v : array) ids.push_back(v.get<TokenId>());
    return ids;
}

TEST(Tokenizer, MatchesAllFixtureCases) {
    const nlohmann::json cases =
        test::read_json(test::shared_dir() / "fixtures" / "tokenizer-cases.json")["cases"];
    ASSERT_EQ(cases.size(), 62u);
    std::size_t passed = 0;
    for (std::size_t i = 0; i < cases.size(); ++i) {
        const std::string text = cases[i]["text"].get<std::string>();
        const std::vector<TokenId> expected = ids_of(cases[i]["ids"]);
        SCOPED_TRACE(testing::Message() << "case " << i << ": \"" << text << "\"");
        // The fixture encodes special-token text as plain text.
        const std::vector<TokenId> got = o200k().encode(text);
        EXPECT_EQ(got, expected);
        EXPECT_EQ(o200k().decode(expected), text);
        if (got == expected) ++passed;
    }
    EXPECT_EQ(passed, cases.size());
}

TEST(Tokenizer, WhitespaceIsUnicodeWhiteSpace) {
    // Expected ids from a reference (Python `regex` with the tokenizer.json pattern and
    // tiktoken's merge rule): \s is Unicode White_Space, so U+0085 is whitespace and U+180E
    // (PCRE2 calls it a space) is not; case-insensitive contractions fold U+017F and U+212A.
    const Tokenizer& t = o200k();
    const std::pair<const char*, std::vector<TokenId>> cases[] = {
        {"a\u180e b", {64, 157, 254, 236, 287}},
        {"a \u180e\u180e b", {64, 220, 157, 254, 236, 157, 254, 236, 287}},
        {"x\u0085\u0085y  \u0085z", {87, 126, 227, 126, 227, 88, 256, 126, 227, 89}},
        {"it'S \u017f's \u212a's", {278, 31233, 20757, 123, 885, 23966, 103, 885}},
        {"Hello\u2028World\u3000!", {13225, 51008, 13046, 1397, 0}},
    };
    for (const auto& [text, ids] : cases) EXPECT_EQ(t.encode(text), ids) << text;
}

TEST(Tokenizer, VocabularyShape) {
    const Tokenizer& t = o200k();
    EXPECT_EQ(t.vocab_size(), 200019u);
    EXPECT_TRUE(t.is_valid(0));
    EXPECT_TRUE(t.is_valid(199997));
    EXPECT_TRUE(t.is_valid(200018));
    EXPECT_FALSE(t.is_valid(200019));
    EXPECT_FALSE(t.is_valid(-1));
    EXPECT_FALSE(t.is_special(199997));
    EXPECT_EQ(t.token_bytes(220), " ");
    EXPECT_EQ(t.token_bytes(198), "\n");
    EXPECT_EQ(t.token_bytes(2499), "\n\n\n");
}

TEST(Tokenizer, SpecialTokenIds) {
    const Tokenizer& t = o200k();
    const std::pair<const char*, TokenId> expected[] = {
        {"<|startoftext|>", 199998}, {"<|endoftext|>", 199999},       {"<|return|>", 200002},
        {"<|constrain|>", 200003},   {"<|channel|>", 200005},         {"<|start|>", 200006},
        {"<|end|>", 200007},         {"<|message|>", 200008},         {"<|call|>", 200012},
        {"<|endofprompt|>", 200018}, {"<|reserved_200000|>", 200000},
    };
    for (const auto& [name, id] : expected) {
        EXPECT_EQ(t.special_id(name), id) << name;
        EXPECT_TRUE(t.is_special(id)) << name;
        EXPECT_EQ(t.token_bytes(id), name);
    }
    int specials = 0;
    for (TokenId id = 0; id < static_cast<TokenId>(t.vocab_size()); ++id) {
        specials += t.is_special(id);
    }
    EXPECT_EQ(specials, 21);
    EXPECT_FALSE(t.special_id("<|start"));
    EXPECT_FALSE(t.special_id("start"));
    EXPECT_FALSE(t.special_id(""));
}

TEST(Tokenizer, HandyOrdinaryIds) {
    // Ids quoted in docs/CHAT_FORMAT.md "Tokens".
    const Tokenizer& t = o200k();
    const std::pair<const char*, TokenId> expected[] = {
        {"system", 17360},   {"user", 1428},   {"developer", 77944}, {"assistant", 173781},
        {"analysis", 35644}, {"final", 17196}, {"functions", 44580}, {" to", 316},
        {"=", 28},           {"json", 4108},   {" json", 5701},      {" ", 220},
        {"\n", 198},
    };
    for (const auto& [text, id] : expected) {
        EXPECT_EQ(t.encode(text), std::vector<TokenId>{id}) << text;
    }
    const std::vector<TokenId> commentary = t.encode("commentary");
    ASSERT_GT(commentary.size(), 1u);
    EXPECT_EQ(commentary[0], 12606);
    EXPECT_EQ(t.decode(commentary), "commentary");
}

TEST(Tokenizer, SpecialTextIsPlainByDefault) {
    const Tokenizer& t = o200k();
    for (const char* text : {"<|start|>", "<|end|>", "<|return|>", "a<|call|>b"}) {
        const std::vector<TokenId> ids = t.encode(text);
        EXPECT_GT(ids.size(), 1u) << text;
        for (TokenId id : ids) EXPECT_FALSE(t.is_special(id)) << text;
        EXPECT_EQ(t.decode(ids), text);
    }
}

TEST(Tokenizer, SpecialTextBecomesIdsWhenAllowed) {
    const Tokenizer& t = o200k();
    std::vector<TokenId> expected = {200006, 1428, 200008};
    for (TokenId id : t.encode("hi")) expected.push_back(id);
    expected.push_back(200007);
    const std::string prompt = "<|start|>user<|message|>hi<|end|>";
    EXPECT_EQ(t.encode(prompt, true), expected);
    EXPECT_EQ(t.decode(expected), prompt);

    // Adjacent specials, specials at both ends, and nothing else.
    EXPECT_EQ(t.encode("<|start|><|end|>", true), (std::vector<TokenId>{200006, 200007}));
    EXPECT_EQ(t.encode("<|return|>", true), std::vector<TokenId>{200002});
    // Text around a special token is split exactly there and encoded as usual.
    std::vector<TokenId> around = t.encode("x ");
    around.push_back(200012);
    for (TokenId id : t.encode(" y")) around.push_back(id);
    EXPECT_EQ(t.encode("x <|call|> y", true), around);
    // Incomplete or unknown special-looking text stays plain.
    EXPECT_EQ(t.encode("<|start", true), t.encode("<|start"));
    EXPECT_EQ(t.encode("<|refusal|>", true), t.encode("<|refusal|>"));
    EXPECT_EQ(t.encode("<|<|end|>", true).back(), 200007);
}

TEST(Tokenizer, AllowSpecialWithoutSpecialsChangesNothing) {
    const Tokenizer& t = o200k();
    const std::string text = "Hello, world! 12345 <div>|</div> naïve 東京";
    EXPECT_EQ(t.encode(text, true), t.encode(text, false));
}

TEST(Tokenizer, EverySpecialRoundTripsWhenAllowed) {
    const Tokenizer& t = o200k();
    std::string text;
    std::vector<TokenId> ids;
    for (TokenId id = 199998; id <= 200018; ++id) {
        text += t.token_bytes(id) + "x";
        ids.push_back(id);
        ids.push_back(t.encode("x")[0]);
    }
    EXPECT_EQ(t.encode(text, true), ids);
    EXPECT_EQ(t.decode(ids), text);
}

TEST(Tokenizer, RandomBytesRoundTrip) {
    // Arbitrary bytes, mostly invalid UTF-8: byte-level BPE must encode all of them losslessly.
    const Tokenizer& t = o200k();
    std::mt19937 rng(1234);
    std::uniform_int_distribution<int> byte(0, 255);
    std::uniform_int_distribution<int> length(0, 200);
    for (int iter = 0; iter < 500; ++iter) {
        std::string text(static_cast<std::size_t>(length(rng)), '\0');
        for (char& c : text) c = static_cast<char>(byte(rng));
        const std::vector<TokenId> ids = t.encode(text);
        for (TokenId id : ids) ASSERT_FALSE(t.is_special(id));
        ASSERT_EQ(t.decode(ids), text) << "iteration " << iter;
    }
}

TEST(Tokenizer, InvalidUtf8IsEncodedBytewise) {
    const Tokenizer& t = o200k();
    for (const std::string& text :
         {std::string("\xff"), std::string("abc\xc3"), std::string("\xc3(x"),
          std::string("\xed\xa0\x80 surrogate"), std::string("over\xf8\x88\x80\x80\x80long"),
          std::string("nul\0byte", 8), std::string("\xe2\x82 cut \xf0\x9f\x98")}) {
        const std::vector<TokenId> ids = t.encode(text);
        EXPECT_FALSE(ids.empty());
        EXPECT_EQ(t.decode(ids), text);
    }
    // A lone invalid byte is its own single-byte token.
    const std::vector<TokenId> ff = t.encode("\xff");
    ASSERT_EQ(ff.size(), 1u);
    EXPECT_EQ(t.token_bytes(ff[0]), "\xff");
}

TEST(Tokenizer, RandomUnicodeRoundTrip) {
    const Tokenizer& t = o200k();
    // Ranges that exercise every pre-tokenizer alternative: ASCII, whitespace kinds, Latin with
    // combining marks, Greek/Cyrillic case pairs, CJK, Hangul, Arabic, digits of other
    // scripts, emoji with modifiers and joiners, and private use / astral planes.
    const std::pair<char32_t, char32_t> ranges[] = {
        {0x20, 0x7E},        {0x09, 0x0D},     {0xA0, 0x24F},      {0x300, 0x36F},
        {0x370, 0x3FF},      {0x400, 0x4FF},   {0x600, 0x6FF},     {0x966, 0x96F},
        {0x2000, 0x206F},    {0x3000, 0x30FF}, {0x4E00, 0x4FFF},   {0xAC00, 0xAD00},
        {0xE000, 0xE0FF},    {0xFE00, 0xFFFD}, {0x1F300, 0x1F6FF}, {0x1F3FB, 0x1F3FF},
        {0x10000, 0x10FFFF},
    };
    std::mt19937 rng(42);
    std::uniform_int_distribution<std::size_t> pick(0, std::size(ranges) - 1);
    std::uniform_int_distribution<int> length(0, 60);
    for (int iter = 0; iter < 500; ++iter) {
        std::string text;
        for (int n = length(rng); n > 0; --n) {
            const auto [lo, hi] = ranges[pick(rng)];
            char32_t cp = std::uniform_int_distribution<char32_t>(lo, hi)(rng);
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0x200D;  // surrogates are not characters
            text += utf8(cp);
        }
        const std::vector<TokenId> ids = t.encode(text);
        ASSERT_EQ(t.decode(ids), text) << "iteration " << iter;
        ASSERT_EQ(t.encode(text, true), ids);
    }
}

TEST(Tokenizer, LongRunsStayFastAndLossless) {
    // Pieces far longer than any vocab entry take the heap merge path; runs of one character
    // class are where a backtracking regex or a quadratic merge would show.
    const Tokenizer& t = o200k();
    std::string base64;
    std::mt19937 rng(7);
    const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 200000; ++i) base64 += alphabet[rng() % 64];
    for (const std::string& text :
         {std::string(200000, 'x'), std::string(200000, ' '), std::string(200000, '\n'),
          std::string(100000, '9'), std::string(100000, '!'), std::string(100000, 'A') + "a",
          std::string(50000, ' ') + "word", base64}) {
        const std::vector<TokenId> ids = t.encode(text);
        EXPECT_EQ(t.decode(ids), text);
    }
}

TEST(Tokenizer, DecodeRejectsUnknownIds) {
    const Tokenizer& t = o200k();
    for (TokenId bad : {200019, 201087, -1, 1 << 30}) {
        const std::vector<TokenId> ids = {220, bad};
        try {
            (void)t.decode(ids);
            FAIL() << "decode accepted id " << bad;
        } catch (const Error& e) {
            EXPECT_EQ(std::string(e.what()),
                      "token id " + std::to_string(bad) +
                          " is not in the tokenizer vocabulary (ids 0..200018)");
        }
        EXPECT_THROW((void)t.token_bytes(bad), Error);
    }
    EXPECT_EQ(t.decode(std::vector<TokenId>{}), "");
}

TEST(Tokenizer, DecodeGivesRawBytesAcrossTokenBoundaries) {
    // A multi-byte character may be split over tokens; decode of a prefix ends mid-sequence.
    const Tokenizer& t = o200k();
    const std::string text = "🚀🔥";
    const std::vector<TokenId> ids = t.encode(text);
    ASSERT_GT(ids.size(), 1u);
    std::string joined;
    for (TokenId id : ids) joined += t.decode(std::vector<TokenId>{id});
    EXPECT_EQ(joined, text);
}

TEST(Tokenizer, ConcurrentEncodeAgrees) {
    const Tokenizer& t = o200k();
    std::string text;
    for (int i = 0; i < 200; ++i) text += "The quick brown fox " + std::to_string(i) + " 東京 ";
    const std::vector<TokenId> expected = t.encode(text);
    std::vector<std::vector<TokenId>> results(4);
    std::vector<std::thread> threads;
    for (auto& r : results) {
        threads.emplace_back([&] {
            for (int i = 0; i < 20; ++i) r = t.encode(text);
        });
    }
    for (auto& th : threads) th.join();
    for (const auto& r : results) EXPECT_EQ(r, expected);
}

TEST(Tokenizer, MovedTokenizerStillWorks) {
    Tokenizer a = Tokenizer::load(test::tiny_model_dir() / "tokenizer.json");
    const std::vector<TokenId> ids = a.encode("Hello, world!");
    Tokenizer b = std::move(a);
    EXPECT_EQ(b.encode("Hello, world!"), ids);
    EXPECT_EQ(ids, (std::vector<TokenId>{13225, 11, 2375, 0}));
}

}  // namespace
}  // namespace neural
