#include "cuda/hybrid/kv_checkpoints.h"

#include <algorithm>

#include "neural/error.h"

namespace neural {

std::int64_t common_prefix(std::span<const std::int32_t> a, std::span<const std::int32_t> b) {
    const std::size_t n = std::min(a.size(), b.size());
    std::size_t i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return static_cast<std::int64_t>(i);
}

KvCheckpoints::KvCheckpoints(std::uint64_t budget_bytes, std::uint64_t floats_per_position,
                             std::uint64_t ring_floats_per_position, std::int64_t window)
    : budget_(budget_bytes),
      per_position_(floats_per_position),
      ring_per_position_(ring_floats_per_position),
      window_(window) {
    if (per_position_ == 0) fail("KvCheckpoints: a position must hold some K/V");
    if (ring_per_position_ > 0 && window_ < 1)
        fail("KvCheckpoints: ring layers need their window (got {})", window_);
}

namespace {
// The shortest prefix an entry of n positions, whose ring part holds the last ring_rows, can
// restore: the ring layers need the window before it (header: "Ring checkpoints").
std::int64_t shortest_restorable(std::int64_t n, std::int64_t ring_rows, std::int64_t window) {
    return ring_rows >= n ? 0 : n - ring_rows + window - 1;
}
}  // namespace

std::int64_t KvCheckpoints::Entry::min_restore(std::int64_t window) const {
    return shortest_restorable(static_cast<std::int64_t>(tokens.size()), ring_rows, window);
}

bool KvCheckpoints::save(std::uint64_t id, std::vector<std::int32_t> tokens,
                         std::vector<float> data, std::int64_t ring_rows) {
    erase(id);
    if (tokens.empty()) return false;
    const auto n = static_cast<std::int64_t>(tokens.size());
    if (ring_per_position_ == 0 || ring_rows < 0) ring_rows = n;
    if (ring_rows > n)
        fail("KvCheckpoints: {} ring positions of a {}-position sequence", ring_rows, n);
    const std::uint64_t want = static_cast<std::uint64_t>(n) * per_position_ +
                               static_cast<std::uint64_t>(ring_rows) * ring_per_position_;
    if (data.size() != want) {
        fail(
            "KvCheckpoints: {} floats for {} positions ({} of them in the ring layers; expected "
            "{})",
            data.size(), n, ring_rows, want);
    }
    // A ring part that cannot serve even the whole sequence is not worth keeping.
    if (shortest_restorable(n, ring_rows, window_) > n) return false;
    const std::uint64_t need = data.size() * sizeof(float);
    if (need > budget_) return false;
    while (bytes_ + need > budget_ && !entries_.empty()) {
        const auto lru = std::min_element(
            entries_.begin(), entries_.end(),
            [](const Entry& a, const Entry& b) { return a.last_use < b.last_use; });
        bytes_ -= entry_bytes(*lru);
        entries_.erase(lru);
    }
    Entry e;
    e.id = id;
    e.tokens = std::move(tokens);
    e.data = std::move(data);
    e.ring_rows = ring_rows;
    e.last_use = ++clock_;
    bytes_ += need;
    entries_.push_back(std::move(e));
    return true;
}

KvCheckpoints::Match KvCheckpoints::best(std::uint64_t id, std::span<const std::int32_t> tokens,
                                         std::int64_t limit) {
    Match m;
    for (Entry& e : entries_) {
        const std::int64_t len = std::min(common_prefix(e.tokens, tokens), limit);
        if (len <= 0 || len < e.min_restore(window_)) continue;
        bool better;
        if (m.entry == nullptr || len > m.length) {
            better = true;
        } else if (len < m.length) {
            better = false;
        } else if ((e.id == id) != (m.entry->id == id)) {
            better = e.id == id;
        } else {
            better = e.last_use > m.entry->last_use;
        }
        if (better) {
            m.entry = &e;
            m.length = len;
        }
    }
    if (m.entry != nullptr) const_cast<Entry*>(m.entry)->last_use = ++clock_;
    return m;
}

void KvCheckpoints::erase(std::uint64_t id) {
    for (auto it = entries_.begin(); it != entries_.end();) {
        if (it->id == id) {
            bytes_ -= entry_bytes(*it);
            it = entries_.erase(it);
        } else {
            ++it;
        }
    }
}

}  // namespace neural
