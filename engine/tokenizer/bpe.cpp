#include "tokenizer/bpe.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <queue>

#include "platform/thread_scratch.h"

namespace neural::bpe {

namespace {

// Pieces up to this many bytes use the quadratic scan; the heap's bookkeeping costs more than
// it saves on typical words (measured on English text, where pieces are ~5 bytes).
constexpr std::size_t kScanLimit = 128;

// A small multiply-xorshift hash; vocab strings are short, so per-call setup matters more than
// throughput on long inputs.
inline std::uint64_t hash_bytes(const char* p, std::size_t n) {
    std::uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xFF51AFD7ED558CCDull);
    while (n >= 8) {
        std::uint64_t v;
        std::memcpy(&v, p, 8);
        h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
        p += 8;
        n -= 8;
    }
    std::uint64_t v = 0;
    if (n != 0) std::memcpy(&v, p, n);
    h = (h ^ v) * 0x94D049BB133111EBull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return h;
}

}  // namespace

Rank VocabIndex::build(const std::vector<std::string>& tokens,
                       const std::vector<std::uint8_t>& use) {
    arena_.clear();
    offsets_.assign(tokens.size() + 1, 0);
    count_ = 0;
    for (std::size_t id = 0; id < tokens.size(); ++id) {
        offsets_[id] = static_cast<std::uint32_t>(arena_.size());
        if (use[id] != 0) {
            arena_ += tokens[id];
            ++count_;
        }
    }
    offsets_[tokens.size()] = static_cast<std::uint32_t>(arena_.size());

    // Load factor <= 0.5 keeps probe chains short for failed lookups, which BPE does most.
    const std::size_t capacity = std::bit_ceil(std::max<std::size_t>(16, count_ * 2));
    slots_.assign(capacity, Slot{0, kNoRank});
    mask_ = capacity - 1;
    for (std::size_t id = 0; id < tokens.size(); ++id) {
        if (use[id] == 0) continue;
        const std::string& bytes = tokens[id];
        if (find(bytes) != kNoRank) return static_cast<Rank>(id);
        const std::uint64_t h = hash_bytes(bytes.data(), bytes.size());
        std::uint64_t i = h & mask_;
        while (slots_[i].id != kNoRank) i = (i + 1) & mask_;
        slots_[i] = Slot{static_cast<std::uint32_t>(h >> 32), static_cast<Rank>(id)};
    }
    return kNoRank;
}

Rank VocabIndex::find(std::string_view bytes) const {
    if (slots_.empty()) return kNoRank;
    const std::uint64_t h = hash_bytes(bytes.data(), bytes.size());
    const auto tag = static_cast<std::uint32_t>(h >> 32);
    for (std::uint64_t i = h & mask_;; i = (i + 1) & mask_) {
        const Slot& s = slots_[i];
        if (s.id == kNoRank) return kNoRank;
        if (s.tag != tag) continue;
        const std::uint32_t begin = offsets_[static_cast<std::size_t>(s.id)];
        const std::uint32_t end = offsets_[static_cast<std::size_t>(s.id) + 1];
        if (end - begin == bytes.size() &&
            std::memcmp(arena_.data() + begin, bytes.data(), bytes.size()) == 0) {
            return s.id;
        }
    }
}

void merge_scan(const VocabIndex& index, std::string_view piece, std::vector<Rank>& out) {
    // bounds[i] is where part i starts (the last entry is piece.size()); ranks[i] is the rank of
    // part i joined with part i + 1, or kNoRank. This mirrors tiktoken's byte_pair_merge.
    struct Boundary {
        std::uint32_t start;
        Rank rank;
    };
    auto& parts = thread_scratch<std::vector<Boundary>>();
    parts.clear();
    const std::size_t n = piece.size();
    for (std::size_t i = 0; i <= n; ++i) parts.push_back({static_cast<std::uint32_t>(i), kNoRank});

    auto pair_rank = [&](std::size_t i) -> Rank {
        // Part i joined with part i + 1 spans [parts[i].start, parts[i + 2].start).
        if (i + 2 >= parts.size()) return kNoRank;
        return index.find(piece.substr(parts[i].start, parts[i + 2].start - parts[i].start));
    };
    for (std::size_t i = 0; i + 2 < parts.size(); ++i) parts[i].rank = pair_rank(i);

    while (parts.size() > 2) {
        // Leftmost lowest rank: strict < keeps the first of equal ranks, as tiktoken does.
        Rank best = kNoRank;
        std::size_t at = 0;
        for (std::size_t i = 0; i + 2 < parts.size(); ++i) {
            const Rank r = parts[i].rank;
            if (r != kNoRank && (best == kNoRank || r < best)) {
                best = r;
                at = i;
            }
        }
        if (best == kNoRank) break;
        parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
        parts[at].rank = pair_rank(at);
        if (at > 0) parts[at - 1].rank = pair_rank(at - 1);
    }
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
        out.push_back(
            index.find(piece.substr(parts[i].start, parts[i + 1].start - parts[i].start)));
    }
}

void merge_heap(const VocabIndex& index, std::string_view piece, std::vector<Rank>& out) {
    // Parts are named by their start byte; next[s] is the start of the following part (n at the
    // end), prev[s] the previous start (-1 at the front). A candidate pair is stored with the
    // end of its right part: when a popped candidate's left part still starts there and its right
    // neighbour still ends there, it spans the same bytes and so still has the same rank, which
    // lets stale candidates be recognised without deleting them from the heap.
    const auto n = static_cast<std::int64_t>(piece.size());
    if (n == 0) return;
    std::vector<std::int64_t> next(static_cast<std::size_t>(n)), prev(static_cast<std::size_t>(n));
    std::vector<std::uint8_t> alive(static_cast<std::size_t>(n), 1);
    for (std::int64_t i = 0; i < n; ++i) {
        next[static_cast<std::size_t>(i)] = i + 1;
        prev[static_cast<std::size_t>(i)] = i - 1;
    }
    auto end_of = [&](std::int64_t s) { return next[static_cast<std::size_t>(s)]; };

    struct Candidate {
        Rank rank;
        std::int64_t left;
        std::int64_t end;
        // Min-heap on (rank, left): lowest rank first, then leftmost.
        bool operator>(const Candidate& o) const {
            return rank != o.rank ? rank > o.rank : left > o.left;
        }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
    auto push = [&](std::int64_t left, std::int64_t end) {
        const Rank r = index.find(
            piece.substr(static_cast<std::size_t>(left), static_cast<std::size_t>(end - left)));
        if (r != kNoRank) heap.push({r, left, end});
    };
    for (std::int64_t i = 0; i + 1 < n; ++i) push(i, i + 2);

    while (!heap.empty()) {
        const Candidate c = heap.top();
        heap.pop();
        if (!alive[static_cast<std::size_t>(c.left)]) continue;
        const std::int64_t right = end_of(c.left);
        if (right >= n || end_of(right) != c.end) continue;
        // Merge: the right part disappears into the left one.
        alive[static_cast<std::size_t>(right)] = 0;
        next[static_cast<std::size_t>(c.left)] = c.end;
        if (c.end < n) prev[static_cast<std::size_t>(c.end)] = c.left;
        const std::int64_t before = prev[static_cast<std::size_t>(c.left)];
        if (before >= 0) push(before, c.end);
        if (c.end < n) push(c.left, end_of(c.end));
    }
    for (std::int64_t s = 0; s < n; s = end_of(s)) {
        out.push_back(index.find(
            piece.substr(static_cast<std::size_t>(s), static_cast<std::size_t>(end_of(s) - s))));
    }
}

void encode_piece(const VocabIndex& index, std::string_view piece, std::vector<Rank>& out) {
    if (piece.empty()) return;
    // Whole pre-tokens that are vocab entries are emitted as they are, before any merging
    // (tiktoken does this; HF reproduces it with ignore_merges). Most English words end here.
    if (const Rank whole = index.find(piece); whole != kNoRank) {
        out.push_back(whole);
        return;
    }
    if (piece.size() <= kScanLimit) {
        merge_scan(index, piece, out);
    } else {
        merge_heap(index, piece, out);
    }
}

}  // namespace neural::bpe
