// Key/value cache of one sequence for the CPU reference backend: per layer, post-RoPE K and V of
// every position, fp32 [positions, kv_heads * head_dim]. Truncating it rewinds the sequence
// (edit/regenerate re-processes from the first changed token).
//
// The GPU backend keeps K/V in VRAM for one sequence at a time; for it a KvCache is the
// sequence's identity (id(), a fresh one per object and per copy) plus the token ids of its
// positions (tokens()), so switching to another conversation re-processes that one's tokens
// instead of reusing K/V that belong to a different sequence. The host K/V arrays stay empty.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "model/config.h"

namespace neural {

class KvCache {
public:
    explicit KvCache(const ModelConfig& config);
    KvCache(const KvCache& other) : KvCache(other, fresh_id()) {}
    KvCache& operator=(const KvCache& other) {
        if (this != &other) *this = KvCache(other, fresh_id());
        return *this;
    }
    KvCache(KvCache&&) noexcept = default;
    KvCache& operator=(KvCache&&) noexcept = default;

    std::uint64_t id() const { return id_; }
    // Token ids of positions [0, size()) as recorded by a backend that keeps K/V elsewhere.
    std::vector<std::int32_t>& tokens() { return tokens_; }

    std::int64_t size() const { return size_; }
    int kv_dim() const { return kv_dim_; }
    int layers() const { return static_cast<int>(k_.size()); }

    // Makes room for positions [size, size + n) and returns the old size; committed by commit().
    std::int64_t reserve_more(std::int64_t n);
    void commit(std::int64_t new_size) { size_ = new_size; }
    void truncate(std::int64_t n) {
        if (n < size_) size_ = n < 0 ? 0 : n;
    }
    void clear() {
        size_ = 0;
        tokens_.clear();
    }

    float* k(int layer, std::int64_t pos) { return k_[layer].data() + pos * kv_dim_; }
    float* v(int layer, std::int64_t pos) { return v_[layer].data() + pos * kv_dim_; }
    const float* k(int layer, std::int64_t pos) const { return k_[layer].data() + pos * kv_dim_; }
    const float* v(int layer, std::int64_t pos) const { return v_[layer].data() + pos * kv_dim_; }

    std::uint64_t bytes() const;

private:
    KvCache(const KvCache& other, std::uint64_t id)
        : kv_dim_(other.kv_dim_),
          size_(other.size_),
          k_(other.k_),
          v_(other.v_),
          tokens_(other.tokens_),
          id_(id) {}
    static std::uint64_t fresh_id() {
        static std::atomic<std::uint64_t> next{1};
        return next.fetch_add(1, std::memory_order_relaxed);
    }
    int kv_dim_;
    std::int64_t size_ = 0;
    std::vector<std::vector<float>> k_, v_;
    std::vector<std::int32_t> tokens_;
    std::uint64_t id_ = fresh_id();
};

}  // namespace neural
