// What every forward pass takes besides the tokens and the K/V cache: the token id type, the
// options of one call and the observer that sees the router's choices. The CPU reference
// (cpu/reference_model.h), the hybrid CUDA backend (cuda/hybrid/) and everything above
// Model::forward share these, so none of them depends on another backend's header.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace neural {

using TokenId = std::int32_t;

// The penalties a consumer applies to the logits before ranking them (runtime/sampler.h's
// TokenPenalties): the ids they change, ascending, and one id's penalised value, a
// non-decreasing function of the logit (which the screened lm_head relies on).
class LogitPenalties {
public:
    virtual std::vector<std::int32_t> ids() const = 0;
    virtual float apply_one(std::int32_t id, float logit) const = 0;

protected:
    ~LogitPenalties() = default;
};

// What the consumer of a forward pass's logits reads, so that a backend may compute the exact
// logits of only the vocabulary rows that can matter to it and leave the others at -infinity
// (the CPU backend's screened lm_head: docs/KERNELS.md "Screened lm_head"). Built by
// logits_screen_for (runtime/sampler.h) only where the sampler's pick from such logits is
// provably the pick from the full logits; a backend may always return the full logits instead.
struct LogitsScreen {
    std::size_t valid = 0;  // ids [0, valid) may be read; the rest never are
    // Exact values of every id that can rank among the top_k largest (1: the argmax) ...
    int top_k = 1;
    // ... or, with window > 0, of every id whose value can lie within `window` of the largest.
    double window = 0;
    // The penalties the consumer applies to the logits before ranking them (nullptr: none).
    const LogitPenalties* penalties = nullptr;
};

// Receives the router decision of every (layer, position) during a forward pass.
class RouterObserver {
public:
    virtual ~RouterObserver() = default;
    virtual void on_route(int layer, std::int64_t position, std::span<const int> experts,
                          std::span<const float> weights) = 0;
    // Whether the observer must see the routing of every new position. A backend that could
    // reuse a new position's K/V from another sequence (the CUDA backend's K/V checkpoints)
    // computes it anyway when this is true (`neural rank`, `neural logits`); the learned
    // statistics (runtime/routing_stats.h) answer false: a skipped position is just not learned.
    virtual bool needs_every_route() const { return true; }
};

struct ForwardOptions {
    bool all_logits = false;  // logits of every new position, else only the last
    RouterObserver* observer = nullptr;
    // Checked per prompt block and layer, per attention row and per expert; throws Cancelled.
    const std::atomic<bool>* cancel = nullptr;
    // Single-position passes only (the last position's logits): what the consumer reads;
    // nullptr: every logit exact (neural logits, logprobs, constrained output, the API's
    // distributions).
    const LogitsScreen* screen = nullptr;
    // The tokens are (the rest of) a prompt: a backend whose prompt path gives other bits than
    // decode (Backend::prompt_matches_decode) runs them on the prompt path even when there is one
    // token, so a prompt's bits do not depend on how much of it came from a cache. Passes of two
    // or more tokens always take the prompt path.
    bool prompt = false;
    // Where the conversation's context ends (chat::context_end: the position after its first
    // `<|start|>assistant`), as an absolute position. A backend with a context prompt path (the
    // CPU's `--prompt-kernel auto`, docs/KERNELS.md "Context prompts") computes every position
    // before it there and every later one with decode's bits, whatever the pass: the bits of a
    // position depend on its place, not on which pass or cache computed it. The rule must be
    // the same for every pass of a sequence. 0 (the default): no position is context.
    std::int64_t context_end = 0;
};

}  // namespace neural
