// Token sampling: greedy, temperature, top-k, top-p (nucleus), min-p; seeded, so the same seed
// and the same logits give the same tokens. One uniform draw per token picks from the filtered
// distribution. The fast path (Sampler::pick) weighs the whole vocabulary with a vectorizable
// float exp and sorts only what top-k / top-p need; sample_reference is the plain path (double
// exp, sorted candidates) that tests compare it with (docs/ARCHITECTURE.md "Sampling").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/forward.h"

namespace neural {

namespace cpu {
enum class KernelIsa : std::uint8_t;  // cpu/kernels/expert_kernel.h
}

struct SamplingParams {
    float temperature = 1.0f;  // 0 = greedy
    int top_k = 0;             // 0 = off
    float top_p = 1.0f;        // 1 = off
    float min_p = 0.0f;        // 0 = off; keeps tokens with p >= min_p * p_max
    std::uint64_t seed = 0;
    // Penalties on tokens already generated in this turn (TokenPenalties), applied to the
    // logits before the filters above. OpenAI's: logit -= presence (once a token came) +
    // frequency * count, each in [-2, 2]. repetition_penalty (the Hugging Face / vLLM
    // extension, > 0, 1 = off) divides a positive logit of a token that came, multiplies a
    // negative one.
    float presence_penalty = 0.0f;
    float frequency_penalty = 0.0f;
    float repetition_penalty = 1.0f;

    bool penalised() const {
        return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f;
    }

    // Throws neural::Error naming the field when a value is out of range.
    void validate() const;
};

// A token id and its weight in a sampler's candidate list.
struct SampleCandidate {
    std::int32_t id;
    double p;  // unnormalized until the filters
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

    // The token that the uniform draw u in [0, 1) picks (sample() is pick() with the next draw
    // of the seeded generator). Greedy and top-k give the reference path's token for every u;
    // the others weigh tokens in float (relative error < 1e-5), so they may differ from it only
    // where u lies within that error of a boundary between two tokens.
    std::int32_t pick(std::span<const float> logits, std::size_t valid, double u);

private:
    std::int32_t pick_full(std::span<const float> view, double u);
    std::int32_t pick_top_p(std::span<const float> view, double total_raw, double u);

    SamplingParams params_;
    std::mt19937_64 rng_;
    cpu::KernelIsa isa_;               // the weights' variant: the fastest this CPU runs
    std::vector<float> work_;          // sample_constrained's copy of the logits
    std::vector<float> weights_;       // pick_full: per id, exp((logit - max) / T), min-p applied
    std::vector<double> block_sums_;   // pick_full: weights_ summed per block of ids
    std::vector<std::int32_t> order_;  // top-p: the sorted head's ids
    std::vector<SampleCandidate> candidates_;  // top-k: the k best, sorted
};

// The penalties of SamplingParams over the tokens generated so far: counts kept per token, so a
// step changes only the logits of tokens that came (apply_penalties_reference is the plain path
// that recounts the whole history for every id; the two give identical logits).
class TokenPenalties final : public LogitPenalties {
public:
    explicit TokenPenalties(const SamplingParams& params);
    bool active() const { return active_; }
    void add(std::int32_t id);
    void apply(std::span<float> logits) const;
    // The ids apply() changes, ascending, and one id's penalised value (the same function:
    // non-decreasing in the logit, which the screened lm_head relies on).
    std::vector<std::int32_t> ids() const override;
    float apply_one(std::int32_t id, float logit) const override;

private:
    float presence_, frequency_, repetition_;
    bool active_;
    std::unordered_map<std::int32_t, std::int32_t> counts_;
};

// The penalties recomputed from `generated` for every id of `logits`.
void apply_penalties_reference(const SamplingParams& params,
                               std::span<const std::int32_t> generated, std::span<float> logits);

// The plain path: the same filters with double weights over a sorted candidate list; what
// Sampler::pick is compared with. u in [0, 1) as for pick.
std::int32_t sample_reference(const SamplingParams& params, std::span<const float> logits,
                              std::size_t valid, double u);

// Log-probabilities for the API's logprobs: log-softmax of logits[0, valid) at temperature 1,
// computed in double over the whole range. Returns the log-probability of `chosen` and fills
// `top` with the `top_n` most likely ids (partial sort; higher first, the lower id on ties).
double token_logprobs(std::span<const float> logits, std::size_t valid, std::int32_t chosen,
                      int top_n, std::vector<std::pair<std::int32_t, double>>& top);
// The plain path: every id's log-probability, log(exp(l - max) / sum), for tests to compare.
std::vector<double> log_softmax_reference(std::span<const float> logits, std::size_t valid);

// What Sampler::sample reads from the logits under `params` (with `penalties` applied before
// it, or nullptr), as a LogitsScreen for the forward pass, where the screened logits (exact for
// every id that can matter, -infinity elsewhere) provably give the same token for the same
// draw: greedy and top_k == 1 (the argmax), top_k < valid (the k best, whatever top-p and min-p
// do inside them), min-p alone (top_p 1: ids far enough below the largest weigh exactly 0 in
// both). Nothing (the full logits) for top-p without top-k and plain temperature sampling,
// where every logit enters the normaliser. `penalties` must outlive the forward pass.
std::optional<LogitsScreen> logits_screen_for(const SamplingParams& params, std::size_t valid,
                                              const TokenPenalties* penalties);

// Index of the largest value; the lowest index wins ties.
std::int32_t argmax(std::span<const float> values);

}  // namespace neural
