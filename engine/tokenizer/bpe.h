// Byte-pair encoding over raw byte strings, tiktoken style: a token's id is also its merge rank,
// so the pair to merge next is the adjacent pair whose concatenation has the smallest id.
// tokenizer.json's merges list is not needed: for o200k it is sorted by the id of the merged
// token (no inversions over its 446,189 entries), so ranking by id gives the same merges, and
// tiktoken, the reference implementation, ranks by id.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace neural::bpe {

using Rank = std::int32_t;
inline constexpr Rank kNoRank = -1;

// Raw bytes -> id for the ordinary (mergeable) tokens. An open-addressing table over one byte
// arena: the BPE inner loop does a lookup per candidate pair, so it has to be cheap.
class VocabIndex {
public:
    // `tokens[id]` are raw bytes; only ids with `use[id] != 0` are indexed. Returns the first id
    // whose bytes were already indexed under another id (a malformed vocab), or kNoRank.
    Rank build(const std::vector<std::string>& tokens, const std::vector<std::uint8_t>& use);

    Rank find(std::string_view bytes) const;
    std::size_t size() const { return count_; }

private:
    struct Slot {
        std::uint32_t tag;  // high hash bits, compared before the bytes
        Rank id;            // kNoRank when empty
    };
    std::vector<Slot> slots_;
    std::uint64_t mask_ = 0;
    std::string arena_;
    std::vector<std::uint32_t> offsets_;  // [id] start in arena_; [id + 1] its end
    std::size_t count_ = 0;
};

// Appends the tokens of `piece` (one pre-token) to `out`. Every single byte must be in the index.
void encode_piece(const VocabIndex& index, std::string_view piece, std::vector<Rank>& out);

// The two merge strategies encode_piece picks between by length; exposed so tests can check
// that they agree. scan: O(n^2), fastest for short pieces. heap: O(n log n) for long ones.
void merge_scan(const VocabIndex& index, std::string_view piece, std::vector<Rank>& out);
void merge_heap(const VocabIndex& index, std::string_view piece, std::vector<Rank>& out);

}  // namespace neural::bpe
