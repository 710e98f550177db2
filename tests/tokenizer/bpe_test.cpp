// The BPE building blocks: the byte-level alphabet and the two merge strategies.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "support/fixtures.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_json.h"

namespace neural {
namespace {

TEST(ByteLevel, AlphabetIsABijection) {
    std::vector<bool> seen(0x144, false);
    for (int b = 0; b < 256; ++b) {
        const char32_t cp = byte_level::byte_to_code_point(static_cast<std::uint8_t>(b));
        ASSERT_LT(cp, 0x144u);
        EXPECT_FALSE(seen[cp]);
        seen[cp] = true;
        EXPECT_EQ(byte_level::code_point_to_byte(cp), b);
    }
    EXPECT_EQ(byte_level::byte_to_code_point(' '), U'Ġ');
    EXPECT_EQ(byte_level::byte_to_code_point('\n'), U'Ċ');
    EXPECT_EQ(byte_level::byte_to_code_point('A'), U'A');
    EXPECT_EQ(byte_level::code_point_to_byte(0x144), -1);
    EXPECT_EQ(byte_level::code_point_to_byte(0x20), -1);  // space is written as U+0120
}

TEST(ByteLevel, DecodeKey) {
    std::string out;
    EXPECT_TRUE(byte_level::decode_key("ĠhelloĊ", out));
    EXPECT_EQ(out, " hello\n");
    out.clear();
    EXPECT_TRUE(byte_level::decode_key("Ã©", out));  // "é" as bytes C3 A9
    EXPECT_EQ(out, "\xc3\xa9");
    for (const char* bad : {"a b", "\xc3", "\xe2\x82\xac", "\xff"}) {
        out.clear();
        EXPECT_FALSE(byte_level::decode_key(bad, out)) << bad;
    }
}

TEST(PreTokenizer, SplitsCoverTheText) {
    const PreTokenizer pre;
    std::vector<std::string_view> pieces;
    pre.split("Hello, world!  I'm 12345 x\r\n\n  y", pieces);
    const std::vector<std::string_view> expected = {
        "Hello", ",", " world", "!", " ", " I'm", " ", "123", "45", " x", "\r\n\n", " ", " y"};
    EXPECT_EQ(pieces, expected);

    pieces.clear();
    pre.split("a\xff\xfe b\xc3", pieces);
    EXPECT_EQ(pieces, (std::vector<std::string_view>{"a", "\xff\xfe", " b", "\xc3"}));
}

class BpeMerge : public testing::Test {
protected:
    static void SetUpTestSuite() {
        const TokenizerFile file = read_tokenizer_json(test::tiny_model_dir() / "tokenizer.json");
        std::vector<std::uint8_t> use(file.tokens.size());
        for (std::size_t i = 0; i < use.size(); ++i) use[i] = file.kinds[i] == TokenKind::ordinary;
        index_ = new bpe::VocabIndex();
        ASSERT_EQ(index_->build(file.tokens, use), bpe::kNoRank);
    }
    static void TearDownTestSuite() {
        delete index_;
        index_ = nullptr;
    }
    static bpe::VocabIndex* index_;
};
bpe::VocabIndex* BpeMerge::index_ = nullptr;

TEST_F(BpeMerge, IndexFindsTokens) {
    EXPECT_EQ(index_->size(), 199998u);
    EXPECT_EQ(index_->find(" "), 220);
    EXPECT_EQ(index_->find("hello"), 24912);
    EXPECT_EQ(index_->find(""), bpe::kNoRank);
    EXPECT_EQ(index_->find("<|start|>"), bpe::kNoRank);
}

TEST_F(BpeMerge, ScanAndHeapAgree) {
    // Small alphabets give long merge chains and many equal-rank ties; random bytes give
    // pieces that barely merge.
    const std::string alphabets[] = {"ab", "abc ", "etaoin shrdlu", "0123456789", "\xe6\x9d\xb1"};
    std::mt19937 rng(99);
    std::uniform_int_distribution<int> length(1, 400);
    for (int iter = 0; iter < 2000; ++iter) {
        std::string piece;
        const int n = length(rng);
        const auto which = static_cast<std::size_t>(iter) % (std::size(alphabets) + 1);
        if (which == std::size(alphabets)) {
            for (int i = 0; i < n; ++i) piece += static_cast<char>(rng() & 0xFF);
        } else {
            const std::string& a = alphabets[which];
            for (int i = 0; i < n; ++i) piece += a[rng() % a.size()];
        }
        std::vector<bpe::Rank> scan, heap;
        bpe::merge_scan(*index_, piece, scan);
        bpe::merge_heap(*index_, piece, heap);
        ASSERT_EQ(scan, heap) << "iteration " << iter;
        for (bpe::Rank r : scan) ASSERT_NE(r, bpe::kNoRank);
    }
}

TEST_F(BpeMerge, WholeVocabEntriesAreNotRemerged) {
    // encode_piece emits a piece that is itself a token even where merging would split it.
    std::vector<bpe::Rank> out;
    bpe::encode_piece(*index_, " hello", out);
    EXPECT_EQ(out, std::vector<bpe::Rank>{index_->find(" hello")});
}

}  // namespace
}  // namespace neural
