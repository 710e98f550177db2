// gpt-oss config.json and generation_config.json. Nothing here assumes a particular size: the
// 20b, 120b and the tiny test shapes all come through the same fields.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace neural {

struct RopeScaling {
    // "yarn" (gpt-oss) or "default" (plain RoPE, no scaling).
    std::string type = "default";
    double factor = 1.0;
    double beta_fast = 32.0;
    double beta_slow = 1.0;
    double original_max_position_embeddings = 4096;
    bool truncate = true;  // HF's default; gpt-oss sets false (lo/hi stay real numbers)
    std::optional<double> attention_factor;  // overrides 0.1 ln(factor) + 1 when present
};

struct ModelConfig {
    std::string model_type;
    int hidden_size = 0;                 // H
    int intermediate_size = 0;           // I (per expert)
    int num_layers = 0;                  // L
    int num_experts = 0;                 // E
    int experts_per_token = 0;           // K
    int num_heads = 0;                   // query heads
    int num_kv_heads = 0;                // key/value heads (GQA)
    int head_dim = 0;                    // d
    int vocab_size = 0;                  // rows of embed_tokens / lm_head
    int sliding_window = 0;              // keys a sliding layer sees, including the current token
    std::vector<bool> layer_is_sliding;  // [L]
    double rope_theta = 10000.0;
    RopeScaling rope;
    std::int64_t max_position_embeddings = 0;
    float rms_norm_eps = 1e-5f;
    float swiglu_limit = 7.0f;
    float swiglu_alpha = 1.702f;  // not in the Hub config; a constant of the model
    bool attention_bias = true;
    std::vector<std::int32_t> eos_token_ids;
    std::optional<std::int32_t> pad_token_id;
    // Whether the config gave rope_scaling / rope_parameters (false: plain RoPE, only with the
    // explicit override).
    bool rope_scaling_given = true;

    // Reads and validates `dir/config.json` (throws neural::Error naming the file and field).
    // Keys that name one quantity twice (num_experts_per_tok / experts_per_token, the context
    // lengths, rope_scaling / rope_parameters, layer_types / sliding_window) must agree
    // (vocab_size against the tokenizer and the special ids: Model::load). A config without rope_scaling is refused unless
    // `allow_plain_rope` (the --plain-rope setting) says to run it with plain RoPE.
    static ModelConfig load(const std::filesystem::path& config_json,
                            bool allow_plain_rope = false);
    // Same from parsed JSON; `source` names the origin in error messages.
    static ModelConfig from_json(const nlohmann::json& j, const std::string& source,
                                 bool allow_plain_rope = false);

    int q_dim() const { return num_heads * head_dim; }
    int kv_dim() const { return num_kv_heads * head_dim; }
};

struct GenerationConfig {
    std::optional<std::int32_t> bos_token_id;
    std::vector<std::int32_t> eos_token_ids;
    std::optional<std::int32_t> pad_token_id;
    bool do_sample = false;
    std::optional<double> temperature;
    std::optional<double> top_p;
    std::optional<int> top_k;

    // Missing file -> defaults (the file is optional in checkpoints); a malformed one throws.
    static GenerationConfig load(const std::filesystem::path& generation_config_json);
};

}  // namespace neural
