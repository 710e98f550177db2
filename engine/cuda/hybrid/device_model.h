// The model on the GPU as the backend's parts see it: the model's shape and one layer's weights,
// K/V cache and router outputs in VRAM (allocated by setup.cpp from the VRAM plan's rows).
#pragma once

#include <cstdint>

namespace neural::hybrid {

// The model's shape (ModelConfig): hidden size, expert intermediate size, experts per layer,
// experts per token, layers, query and K/V heads, head dim, query and K/V widths, vocabulary.
struct ModelShape {
    int hidden = 0, intermediate = 0, experts = 0, top_k = 0, layers = 0, q_heads = 0, kv_heads = 0,
        head_dim = 0, q_width = 0, kv_width = 0, vocab = 0;
};

// One layer's weights and K/V cache in VRAM, and its router outputs.
struct LayerDevice {
    std::uint16_t *input_norm, *qkv_w, *qkv_b, *o_w, *o_b, *sinks, *post_norm, *router_w, *router_b,
        *gate_up_bias, *down_bias;
    float *k_cache, *v_cache;
    int ring = 0;  // > 0: a sliding layer's K/V ring of this many positions (--kv-ring)
    int *sel, *slot;
    float* gate;
};

}  // namespace neural::hybrid
