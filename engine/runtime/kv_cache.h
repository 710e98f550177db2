// Key/value cache of one sequence for the CPU reference backend: per layer, post-RoPE K and V of
// every position, fp32 [positions, kv_heads * head_dim]. Truncating it rewinds the sequence
// (edit/regenerate re-processes from the first changed token).
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace neural {

class KvCache {
 public:
  explicit KvCache(const ModelConfig& config);

  std::int64_t size() const { return size_; }
  int kv_dim() const { return kv_dim_; }
  int layers() const { return static_cast<int>(k_.size()); }

  // Makes room for positions [size, size + n) and returns the old size; committed by commit().
  std::int64_t reserve_more(std::int64_t n);
  void commit(std::int64_t new_size) { size_ = new_size; }
  void truncate(std::int64_t n) { if (n < size_) size_ = n < 0 ? 0 : n; }
  void clear() { size_ = 0; }

  float* k(int layer, std::int64_t pos) { return k_[layer].data() + pos * kv_dim_; }
  float* v(int layer, std::int64_t pos) { return v_[layer].data() + pos * kv_dim_; }
  const float* k(int layer, std::int64_t pos) const { return k_[layer].data() + pos * kv_dim_; }
  const float* v(int layer, std::int64_t pos) const { return v_[layer].data() + pos * kv_dim_; }

  std::uint64_t bytes() const;

 private:
  int kv_dim_;
  std::int64_t size_ = 0;
  std::vector<std::vector<float>> k_, v_;
};

}  // namespace neural
