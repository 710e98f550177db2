// K/V checkpoints of the GPU backend: the GPU holds one sequence's K/V at a time. When
// it switches to another sequence, the outgoing one's K/V of positions [0, n) is copied to host
// memory here together with its tokens; a sequence that comes back, or a new one that starts with
// the same tokens (the server's requests sharing a system prompt, a conversation branched in the
// desktop app), restores the longest matching prefix instead of re-processing it. K/V of position
// p depends only on tokens [0, p], so any entry whose tokens match a prefix is valid for it.
//
// Ring checkpoints: with a K/V ring (--kv-ring) the sliding-window layers hold only their last
// positions, so an entry keeps every position of the full layers but only the last `ring_rows`
// positions of the ring layers. A prefix of length m can be restored from it only when the ring
// part covers the window before m: m >= n - ring_rows + window - 1 (n = the entry's positions),
// or the ring part holds all n positions. In the usual case -- a conversation that comes back and
// goes on, a request that repeats a whole earlier one -- m = n and that always holds.
//
// Bounded by a byte budget; the least recently used entries are dropped first. No CUDA here: the
// backend moves the bytes, this class keeps and picks them (unit-tested without a GPU).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace neural {

class KvCheckpoints {
public:
    // floats_per_position: what one position's K/V takes over the layers that keep every position
    // (layers * 2 * kv_dim without a ring); ring_floats_per_position: the same over the ring layers
    // (0: no ring); window: the ring layers' attention window (positions a query sees, itself
    // included).
    KvCheckpoints(std::uint64_t budget_bytes, std::uint64_t floats_per_position,
                  std::uint64_t ring_floats_per_position = 0, std::int64_t window = 0);

    struct Entry {
        std::uint64_t id = 0;
        std::vector<std::int32_t> tokens;  // positions [0, tokens.size())
        // Layer-major: layer l's K, then its V, of positions [0, n) for a full layer and
        // [n - ring_rows, n) for a ring layer, each [positions][kv_dim].
        std::vector<float> data;
        std::int64_t ring_rows = 0;  // == tokens.size() without a ring
        std::uint64_t last_use = 0;
        // The shortest prefix this entry can restore (0: any).
        std::int64_t min_restore(std::int64_t window) const;
    };

    // Keeps `tokens.size()` positions of `data` for sequence `id` (replacing its older entry),
    // dropping least recently used entries to stay within the budget; the ring layers' part holds
    // the last `ring_rows` positions (-1: all; ignored without a ring). Returns false (nothing
    // kept) when the entry alone is larger than the budget, empty, or a ring part too short to
    // restore even the whole sequence (fewer than window - 1 positions of a longer sequence).
    bool save(std::uint64_t id, std::vector<std::int32_t> tokens, std::vector<float> data,
              std::int64_t ring_rows = -1);

    struct Match {
        const Entry* entry = nullptr;  // null: nothing matches
        std::int64_t length = 0;       // positions of entry->data usable for the query
    };
    // The entry sharing the longest restorable token prefix with `tokens` (at most `limit`
    // positions; ties go to sequence `id`'s own entry, then to the most recently used). Marks it used.
    Match best(std::uint64_t id, std::span<const std::int32_t> tokens, std::int64_t limit);

    void erase(std::uint64_t id);
    std::uint64_t bytes() const { return bytes_; }
    std::uint64_t budget() const { return budget_; }
    std::size_t size() const { return entries_.size(); }

private:
    std::uint64_t entry_bytes(const Entry& e) const { return e.data.size() * sizeof(float); }
    std::uint64_t budget_;
    std::uint64_t per_position_;
    std::uint64_t ring_per_position_;
    std::int64_t window_;
    std::uint64_t bytes_ = 0;
    std::uint64_t clock_ = 0;
    std::vector<Entry> entries_;
};

// Length of the common prefix of a and b.
std::int64_t common_prefix(std::span<const std::int32_t> a, std::span<const std::int32_t> b);

}  // namespace neural
