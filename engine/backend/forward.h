// What every forward pass takes besides the tokens and the K/V cache: the token id type, the
// options of one call and the observer that sees the router's choices. The CPU reference
// (cpu/reference_model.h), the hybrid CUDA backend (cuda/hybrid/) and everything above
// Model::forward share these, so none of them depends on another backend's header.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>

namespace neural {

using TokenId = std::int32_t;

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
};

}  // namespace neural
