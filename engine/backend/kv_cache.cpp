#include "backend/kv_cache.h"

namespace neural {

KvCache::KvCache(const ModelConfig& c)
    : kv_dim_(c.kv_dim()),
      k_(static_cast<size_t>(c.num_layers)),
      v_(static_cast<size_t>(c.num_layers)) {}

std::int64_t KvCache::reserve_more(std::int64_t n) {
    const auto need = static_cast<size_t>((size_ + n) * kv_dim_);
    for (size_t l = 0; l < k_.size(); ++l) {
        if (k_[l].size() < need) {
            // Geometric growth keeps appends amortized O(1) during decode.
            size_t cap = k_[l].size() < 1024 ? 1024 : k_[l].size();
            while (cap < need) cap *= 2;
            k_[l].resize(cap);
            v_[l].resize(cap);
        }
    }
    return size_;
}

std::uint64_t KvCache::bytes() const {
    std::uint64_t n = 0;
    for (size_t l = 0; l < k_.size(); ++l) n += (k_[l].size() + v_[l].size()) * sizeof(float);
    return n;
}

}  // namespace neural
