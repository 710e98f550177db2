// Token sampling: greedy, temperature, top-k, top-p (nucleus), min-p; seeded, so the same seed
// and the same logits give the same tokens.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>

namespace neural {

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy
  int top_k = 0;             // 0 = off
  float top_p = 1.0f;        // 1 = off
  float min_p = 0.0f;        // 0 = off; keeps tokens with p >= min_p * p_max
  std::uint64_t seed = 0;

  // Throws neural::Error naming the field when a value is out of range.
  void validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // Picks a token from logits[0, n). `valid` limits the choice to ids [0, valid) (the lm_head
  // has rows past the tokenizer's last id; they must never be emitted).
  std::int32_t sample(std::span<const float> logits, std::size_t valid = SIZE_MAX);

  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
};

// Index of the largest value; the lowest index wins ties.
std::int32_t argmax(std::span<const float> values);

}  // namespace neural
