#include "model/weights.h"

#include <fmt/format.h>

#include "model/bf16.h"
#include "neural/error.h"

namespace neural {

float Bf16View::at(std::int64_t r, std::int64_t c) const { return load_bf16(data, r * cols + c); }
float Bf16View::at(std::int64_t i) const { return load_bf16(data, i); }

namespace {

Bf16View matrix(const Checkpoint& ck, const std::string& name, std::int64_t rows,
                std::int64_t cols) {
    const TensorInfo& t = ck.require(name, DType::kBF16, {rows, cols});
    return Bf16View{t.data, rows, cols};
}

Bf16View vec(const Checkpoint& ck, const std::string& name, std::int64_t n) {
    const TensorInfo& t = ck.require(name, DType::kBF16, {n});
    return Bf16View{t.data, 1, n};
}

Mxfp4Experts experts(const Checkpoint& ck, const std::string& prefix, std::int64_t e,
                     std::int64_t rows, std::int64_t cols) {
    // A dequantized checkpoint stores `experts.gate_up_proj` instead of the MXFP4 pair.
    if (ck.find(prefix + "_blocks") == nullptr && ck.find(prefix) != nullptr) {
        fail("{}: tensor \"{}\" is dequantized; Neural needs the MXFP4 checkpoint "
             "(\"{}_blocks\" / \"{}_scales\")",
             ck.dir().string(), prefix, prefix, prefix);
    }
    Mxfp4Experts x;
    x.rows = rows;
    x.cols = cols;
    x.blocks = ck.require(prefix + "_blocks", DType::kU8, {e, rows, cols / 32, 16}).data;
    x.scales = ck.require(prefix + "_scales", DType::kU8, {e, rows, cols / 32}).data;
    x.bias = matrix(ck, prefix + "_bias", e, rows);
    return x;
}

}  // namespace

ModelWeights ModelWeights::bind(const Checkpoint& ck, const ModelConfig& c) {
    const std::int64_t H = c.hidden_size, V = c.vocab_size, E = c.num_experts;
    const std::int64_t Q = c.q_dim(), KV = c.kv_dim(), I = c.intermediate_size;
    ModelWeights w;
    w.embed = matrix(ck, "model.embed_tokens.weight", V, H);
    w.final_norm = vec(ck, "model.norm.weight", H);
    w.lm_head = matrix(ck, "lm_head.weight", V, H);
    w.layers.resize(static_cast<size_t>(c.num_layers));
    for (int i = 0; i < c.num_layers; ++i) {
        const std::string p = fmt::format("model.layers.{}.", i);
        LayerWeights& l = w.layers[static_cast<size_t>(i)];
        l.input_norm = vec(ck, p + "input_layernorm.weight", H);
        l.q_w = matrix(ck, p + "self_attn.q_proj.weight", Q, H);
        l.k_w = matrix(ck, p + "self_attn.k_proj.weight", KV, H);
        l.v_w = matrix(ck, p + "self_attn.v_proj.weight", KV, H);
        l.o_w = matrix(ck, p + "self_attn.o_proj.weight", H, Q);
        if (c.attention_bias) {
            l.q_b = vec(ck, p + "self_attn.q_proj.bias", Q);
            l.k_b = vec(ck, p + "self_attn.k_proj.bias", KV);
            l.v_b = vec(ck, p + "self_attn.v_proj.bias", KV);
            l.o_b = vec(ck, p + "self_attn.o_proj.bias", H);
        }
        l.sinks = vec(ck, p + "self_attn.sinks", c.num_heads);
        l.post_norm = vec(ck, p + "post_attention_layernorm.weight", H);
        l.router_w = matrix(ck, p + "mlp.router.weight", E, H);
        l.router_b = vec(ck, p + "mlp.router.bias", E);
        l.gate_up = experts(ck, p + "mlp.experts.gate_up_proj", E, 2 * I, H);
        l.down = experts(ck, p + "mlp.experts.down_proj", E, H, I);
    }
    return w;
}

}  // namespace neural
