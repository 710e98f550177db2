// Token sampling: greedy, temperature, top-k, top-p (nucleus), min-p; seeded, so the same seed
// and the same logits give the same tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <vector>

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

    // Picks a token that `allowed` accepts (constrained output, runtime/constraint.h): draws from
    // the distribution and checks the draw up to `tries` times, removing each rejected id; then
    // `mask` sets every id that may not come to -infinity and the draw is from what is left.
    // tries == 0 masks first (the reference path). `masked` (optional) tells whether the mask was
    // needed. Throws neural::Error when no id is left.
    std::int32_t sample_constrained(std::span<const float> logits, std::size_t valid,
                                    const std::function<bool(std::int32_t)>& allowed,
                                    const std::function<void(std::vector<float>&)>& mask, int tries,
                                    bool* masked = nullptr);

    const SamplingParams& params() const { return params_; }

private:
    SamplingParams params_;
    std::mt19937_64 rng_;
    std::vector<float> work_;  // sample_constrained's copy of the logits
};

// Index of the largest value; the lowest index wins ties.
std::int32_t argmax(std::span<const float> values);

}  // namespace neural
