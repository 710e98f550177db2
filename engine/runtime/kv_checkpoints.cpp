#include "runtime/kv_checkpoints.h"

#include <algorithm>

#include "neural/error.h"

namespace neural {

std::int64_t common_prefix(std::span<const std::int32_t> a, std::span<const std::int32_t> b) {
    const std::size_t n = std::min(a.size(), b.size());
    std::size_t i = 0;
    while (i < n && a[i] == b[i]) ++i;
    return static_cast<std::int64_t>(i);
}

KvCheckpoints::KvCheckpoints(std::uint64_t budget_bytes, std::uint64_t floats_per_position)
    : budget_(budget_bytes), per_position_(floats_per_position) {
    if (per_position_ == 0) fail("KvCheckpoints: a position must hold some K/V");
}

bool KvCheckpoints::save(std::uint64_t id, std::vector<std::int32_t> tokens, std::vector<float> data) {
    erase(id);
    if (tokens.empty()) return false;
    if (data.size() != tokens.size() * per_position_) {
        fail("KvCheckpoints: {} floats for {} positions (expected {} per position)", data.size(),
             tokens.size(), per_position_);
    }
    const std::uint64_t need = data.size() * sizeof(float);
    if (need > budget_) return false;
    while (bytes_ + need > budget_ && !entries_.empty()) {
        const auto lru = std::min_element(entries_.begin(), entries_.end(),
                                          [](const Entry& a, const Entry& b) { return a.last_use < b.last_use; });
        bytes_ -= entry_bytes(*lru);
        entries_.erase(lru);
    }
    Entry e;
    e.id = id;
    e.tokens = std::move(tokens);
    e.data = std::move(data);
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
        if (len <= 0) continue;
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
