// Typed, validated views of a gpt-oss checkpoint's tensors (HF names). Every tensor is checked
// against config.json for dtype and shape when bound; the views point into the mapped shards.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/expert_source.h"
#include "model/safetensors.h"

namespace neural {

// A bf16 matrix [rows, cols] (row-major, PyTorch nn.Linear layout [out, in]) or vector.
struct Bf16View {
    const std::uint8_t* data = nullptr;
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    float at(std::int64_t r, std::int64_t c) const;
    float at(std::int64_t i) const;
    const std::uint8_t* row(std::int64_t r) const { return data + 2 * r * cols; }
};

struct GgmlExperts;  // model/gguf.h

// MXFP4 weights of all experts of one projection: blocks [E, rows, cols/32, 16] U8,
// scales [E, rows, cols/32] U8, bias [E, rows] BF16. From a GGUF checkpoint `blocks` and
// `scales` are null and `ggml` converts rows into this layout (row_blocks/row_scales must not
// be used then: copy_row / copy_expert serve both).
struct Mxfp4Experts {
    const std::uint8_t* blocks = nullptr;
    const std::uint8_t* scales = nullptr;
    const GgmlExperts* ggml = nullptr;
    Bf16View bias;  // [E, rows]
    std::int64_t rows = 0;
    std::int64_t cols = 0;
    std::int64_t blocks_per_row() const { return cols / 32; }
    const std::uint8_t* row_blocks(std::int64_t e, std::int64_t r) const {
        return blocks + ((e * rows + r) * blocks_per_row()) * 16;
    }
    const std::uint8_t* row_scales(std::int64_t e, std::int64_t r) const {
        return scales + (e * rows + r) * blocks_per_row();
    }
    // Row r of expert e in the checkpoint layout: points into the mapping, or (GGUF) is converted
    // into `blocks_buf` (blocks_per_row() * 16 bytes) and `scales_buf` (blocks_per_row() bytes).
    ExpertRow row(std::int64_t e, std::int64_t r, std::uint8_t* blocks_buf,
                  std::uint8_t* scales_buf) const;
    // The whole expert e in the checkpoint layout: rows * G * 16 code bytes, rows * G scales.
    void copy_expert(std::int64_t e, std::uint8_t* blocks_out, std::uint8_t* scales_out) const;
};

struct LayerWeights {
    Bf16View input_norm;  // [H]
    Bf16View q_w, q_b;    // [nq*d, H], [nq*d]
    Bf16View k_w, k_b;    // [nkv*d, H], [nkv*d]
    Bf16View v_w, v_b;
    Bf16View o_w, o_b;            // [H, nq*d], [H]
    Bf16View sinks;               // [nq]
    Bf16View post_norm;           // [H]
    Bf16View router_w, router_b;  // [E, H], [E]
    Mxfp4Experts gate_up;         // rows 2I (interleaved gate/up), cols H
    Mxfp4Experts down;            // rows H, cols I
};

struct ModelWeights {
    Bf16View embed;       // [V, H]
    Bf16View final_norm;  // [H]
    Bf16View lm_head;     // [V, H]
    std::vector<LayerWeights> layers;

    // Views of every tensor the config names, each checked for dtype and shape. A tensor of the
    // checkpoint that the config does not name is an error too: config and weights disagree.
    static ModelWeights bind(const Checkpoint& ckpt, const ModelConfig& config);
};

// The checkpoint's config: its folder's config.json, or a GGUF's metadata.
ModelConfig checkpoint_config(const Checkpoint& ckpt);
// Its generation config: generation_config.json (optional), or a GGUF's metadata.
GenerationConfig checkpoint_generation(const Checkpoint& ckpt);

}  // namespace neural
