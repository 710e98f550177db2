#include "model/weights.h"

#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <cstring>

#include "model/bf16.h"
#include "model/gguf.h"
#include "neural/error.h"

namespace neural {

float Bf16View::at(std::int64_t r, std::int64_t c) const { return load_bf16(data, r * cols + c); }
float Bf16View::at(std::int64_t i) const { return load_bf16(data, i); }

ExpertRow Mxfp4Experts::row(std::int64_t e, std::int64_t r, std::uint8_t* blocks_buf,
                            std::uint8_t* scales_buf) const {
    if (ggml != nullptr) {
        ggml->convert_row(e, r, blocks_buf, scales_buf);
        return ExpertRow{blocks_buf, scales_buf};
    }
    return ExpertRow{row_blocks(e, r), row_scales(e, r)};
}

void Mxfp4Experts::copy_expert(std::int64_t e, std::uint8_t* blocks_out,
                               std::uint8_t* scales_out) const {
    const std::int64_t G = blocks_per_row();
    if (ggml == nullptr) {
        std::memcpy(blocks_out, row_blocks(e, 0), static_cast<std::size_t>(rows * G * 16));
        std::memcpy(scales_out, row_scales(e, 0), static_cast<std::size_t>(rows * G));
        return;
    }
    for (std::int64_t r = 0; r < rows; ++r) {
        ggml->convert_row(e, r, blocks_out + r * G * 16, scales_out + r * G);
    }
}

namespace {

// Binds tensors by name and remembers which ones the config asked for, so that a tensor it
// does not ask for (a layer past num_hidden_layers, biases with attention_bias false) is
// reported instead of silently ignored.
struct Binder {
    const Checkpoint& ck;
    std::set<std::string> used;

    const TensorInfo& require(const std::string& name, DType dtype,
                              std::initializer_list<std::int64_t> shape) {
        used.insert(name);
        return ck.require(name, dtype, shape);
    }
    Bf16View matrix(const std::string& name, std::int64_t rows, std::int64_t cols) {
        return Bf16View{require(name, DType::kBF16, {rows, cols}).data, rows, cols};
    }
    Bf16View vec(const std::string& name, std::int64_t n) {
        return Bf16View{require(name, DType::kBF16, {n}).data, 1, n};
    }
    Mxfp4Experts experts(const std::string& prefix, std::int64_t e, std::int64_t rows,
                         std::int64_t cols) {
        // A dequantized checkpoint stores `experts.gate_up_proj` instead of the MXFP4 pair.
        if (ck.find(prefix + "_blocks") == nullptr && ck.find(prefix) != nullptr) {
            fail(
                "{}: tensor \"{}\" is dequantized; Neural needs the MXFP4 checkpoint "
                "(\"{}_blocks\" / \"{}_scales\")",
                ck.dir().string(), prefix, prefix, prefix);
        }
        Mxfp4Experts x;
        x.rows = rows;
        x.cols = cols;
        const TensorInfo& blocks =
            require(prefix + "_blocks", DType::kU8, {e, rows, cols / 32, 16});
        const TensorInfo& scales = require(prefix + "_scales", DType::kU8, {e, rows, cols / 32});
        x.blocks = blocks.data;
        x.scales = scales.data;
        x.ggml = blocks.ggml;
        x.bias = matrix(prefix + "_bias", e, rows);
        return x;
    }
};

}  // namespace

ModelConfig checkpoint_config(const Checkpoint& ckpt) {
    if (ckpt.gguf() != nullptr) return ckpt.gguf()->config;
    return ModelConfig::load(ckpt.dir() / "config.json");
}

GenerationConfig checkpoint_generation(const Checkpoint& ckpt) {
    if (ckpt.gguf() != nullptr) return ckpt.gguf()->generation;
    return GenerationConfig::load(ckpt.dir() / "generation_config.json");
}

ModelWeights ModelWeights::bind(const Checkpoint& ck, const ModelConfig& c) {
    Binder b{ck, {}};
    const std::int64_t H = c.hidden_size, V = c.vocab_size, E = c.num_experts;
    const std::int64_t Q = c.q_dim(), KV = c.kv_dim(), I = c.intermediate_size;
    ModelWeights w;
    w.embed = b.matrix("model.embed_tokens.weight", V, H);
    w.final_norm = b.vec("model.norm.weight", H);
    w.lm_head = b.matrix("lm_head.weight", V, H);
    w.layers.resize(static_cast<size_t>(c.num_layers));
    for (int i = 0; i < c.num_layers; ++i) {
        const std::string p = fmt::format("model.layers.{}.", i);
        LayerWeights& l = w.layers[static_cast<size_t>(i)];
        l.input_norm = b.vec(p + "input_layernorm.weight", H);
        l.q_w = b.matrix(p + "self_attn.q_proj.weight", Q, H);
        l.k_w = b.matrix(p + "self_attn.k_proj.weight", KV, H);
        l.v_w = b.matrix(p + "self_attn.v_proj.weight", KV, H);
        l.o_w = b.matrix(p + "self_attn.o_proj.weight", H, Q);
        if (c.attention_bias) {
            l.q_b = b.vec(p + "self_attn.q_proj.bias", Q);
            l.k_b = b.vec(p + "self_attn.k_proj.bias", KV);
            l.v_b = b.vec(p + "self_attn.v_proj.bias", KV);
            l.o_b = b.vec(p + "self_attn.o_proj.bias", H);
        }
        l.sinks = b.vec(p + "self_attn.sinks", c.num_heads);
        l.post_norm = b.vec(p + "post_attention_layernorm.weight", H);
        l.router_w = b.matrix(p + "mlp.router.weight", E, H);
        l.router_b = b.vec(p + "mlp.router.bias", E);
        l.gate_up = b.experts(p + "mlp.experts.gate_up_proj", E, 2 * I, H);
        l.down = b.experts(p + "mlp.experts.down_proj", E, H, I);
    }
    // A tensor the config does not use means config and weights disagree (a config for another
    // model, a wrong num_hidden_layers or attention_bias): an error, not a model that silently
    // runs without part of its weights.
    std::vector<std::string> unused;
    for (const std::string& name : ck.tensor_names()) {
        if (b.used.count(name) == 0) unused.push_back(name);
    }
    if (!unused.empty()) {
        std::string list;
        for (std::size_t i = 0; i < unused.size() && i < 4; ++i)
            list += (i ? ", " : "") + unused[i];
        if (unused.size() > 4) list += fmt::format(", ... ({} in all)", unused.size());
        fail(
            "{}: the checkpoint holds tensors its {} does not use ({}): config and weights "
            "do not match (num_hidden_layers = {}, attention_bias = {}, "
            "num_local_experts = {})",
            ck.dir().string(), ck.gguf() ? "GGUF metadata" : "config.json", list, c.num_layers,
            c.attention_bias ? "true" : "false", c.num_experts);
    }
    return w;
}

}  // namespace neural
