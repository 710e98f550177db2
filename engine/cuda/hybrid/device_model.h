// The model on the GPU as the backend's parts see it: the model's shape, one layer's weights,
// K/V cache and router outputs in VRAM (allocated by setup.cpp from the VRAM plan's rows), and
// the expert records and embeddings in RAM (records.cpp).
#pragma once

#include <cstdint>
#include <functional>

#include "backend/forward.h"
#include "cpu/kernels/expert_kernel.h"

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

// The expert records and embeddings as the parts read them (the backend's records.cpp): a
// token's embedding row widened into dst [hidden]; a raw store's record (the slot image, checked
// the first time); the CPU kernel's input for (layer, expert) in router choice `choice`'s
// assembly buffer; a record assembled as a slot image into dst.
struct ExpertRecords {
    std::function<void(TokenId id, float* dst)> embed;
    std::function<const std::uint8_t*(int layer, int expert)> raw_record;
    std::function<cpu::ExpertInput(int layer, int expert, int choice)> cpu_input;
    std::function<void(int layer, int expert, std::uint8_t* dst)> fill_record;
};

}  // namespace neural::hybrid
