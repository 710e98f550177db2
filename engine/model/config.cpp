#include "model/config.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "neural/error.h"

namespace neural {

using nlohmann::json;

namespace {

std::string read_text(const std::filesystem::path& path, const char* what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("{} not found or unreadable: {}", what, path.string());
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

json parse_json(const std::string& text, const std::filesystem::path& path) {
    try {
        return json::parse(text);
    } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e999
        fail("{}: invalid JSON: {}", path.string(), e.what());
    }
}

// Field readers: a wrong type or an out-of-range value names the file and the key.
const json* find(const json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return nullptr;
    return &*it;
}

std::int64_t get_int(const json& j, const char* key, const std::string& src, bool required,
                     std::int64_t fallback = 0) {
    const json* v = find(j, key);
    if (v == nullptr) {
        if (required) fail("{}: missing required field \"{}\"", src, key);
        return fallback;
    }
    if (v->is_number_integer() || v->is_number_unsigned()) return v->get<std::int64_t>();
    if (v->is_number_float()) {
        // 16.0 counts as an integer; casting a double outside int64's range (1e300) is undefined
        // behaviour, so the range is checked first (same rule as openai.cpp's get_integer).
        const double d = v->get<double>();
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15)
            return static_cast<std::int64_t>(d);
    }
    fail("{}: field \"{}\" must be an integer, got {}", src, key, v->dump());
}

double get_double(const json& j, const char* key, const std::string& src, bool required,
                  double fallback = 0.0) {
    const json* v = find(j, key);
    if (v == nullptr) {
        if (required) fail("{}: missing required field \"{}\"", src, key);
        return fallback;
    }
    if (!v->is_number()) fail("{}: field \"{}\" must be a number, got {}", src, key, v->dump());
    return v->get<double>();
}

int positive(std::int64_t v, const char* key, const std::string& src, std::int64_t max = 1 << 24) {
    if (v <= 0 || v > max) fail("{}: field \"{}\" = {} is out of range (1..{})", src, key, v, max);
    return static_cast<int>(v);
}

std::vector<std::int32_t> token_list(const json& j, const char* key, const std::string& src) {
    std::vector<std::int32_t> ids;
    const json* v = find(j, key);
    if (v == nullptr) return ids;
    auto one = [&](const json& x) {
        if (!x.is_number_integer() || x.get<std::int64_t>() < 0 ||
            x.get<std::int64_t>() > INT32_MAX) {
            fail("{}: field \"{}\" must hold non-negative token ids, got {}", src, key, x.dump());
        }
        ids.push_back(x.get<std::int32_t>());
    };
    if (v->is_array()) {
        for (const auto& x : *v) one(x);
    } else {
        one(*v);
    }
    return ids;
}

RopeScaling parse_rope(const json& r, const std::string& src) {
    if (!r.is_object()) fail("{}: rope scaling must be an object, got {}", src, r.dump());
    RopeScaling rope;
    const json* type = find(r, "rope_type");
    if (type == nullptr) type = find(r, "type");
    if (type != nullptr) {
        if (!type->is_string()) fail("{}: rope_type must be a string", src);
        rope.type = type->get<std::string>();
    }
    if (rope.type != "yarn" && rope.type != "default") {
        fail("{}: unsupported rope_type \"{}\" (gpt-oss uses \"yarn\")", src, rope.type);
    }
    rope.factor = get_double(r, "factor", src, rope.type == "yarn", 1.0);
    rope.beta_fast = get_double(r, "beta_fast", src, false, 32.0);
    rope.beta_slow = get_double(r, "beta_slow", src, false, 1.0);
    rope.original_max_position_embeddings =
        get_double(r, "original_max_position_embeddings", src, rope.type == "yarn", 4096);
    if (const json* t = find(r, "truncate")) {
        if (!t->is_boolean()) fail("{}: rope \"truncate\" must be true or false", src);
        rope.truncate = t->get<bool>();
    }
    if (find(r, "attention_factor") != nullptr) {
        rope.attention_factor = get_double(r, "attention_factor", src, true);
    }
    if (rope.type == "yarn") {
        if (!(rope.factor >= 1.0)) fail("{}: rope factor must be >= 1, got {}", src, rope.factor);
        if (!(rope.original_max_position_embeddings > 0)) {
            fail("{}: original_max_position_embeddings must be positive", src);
        }
        if (!(rope.beta_fast > 0) || !(rope.beta_slow > 0)) {
            fail("{}: rope beta_fast/beta_slow must be positive", src);
        }
    }
    return rope;
}

// Two keys that name the same quantity (a checkpoint written by different tools carries both
// spellings): when both are given they must agree, else the checkpoint disagrees with itself and
// which one a runtime reads decides the answers. The error names both keys and both values.
void same_quantity(const json* a, const char* key_a, const json* b, const char* key_b,
                   const char* what, const std::string& src) {
    if (a == nullptr || b == nullptr) return;
    const bool equal =
        (a->is_number() && b->is_number()) ? a->get<double>() == b->get<double>() : *a == *b;
    if (!equal) {
        fail(
            "{}: {} = {} and {} = {} disagree (both give the {}); the checkpoint contradicts "
            "itself, fix its config.json",
            src, key_a, a->dump(), key_b, b->dump(), what);
    }
}

void same_quantity(const json& j, const char* key_a, const char* key_b, const char* what,
                   const std::string& src) {
    same_quantity(find(j, key_a), key_a, find(j, key_b), key_b, what, src);
}

// rope_scaling (transformers v4) and rope_parameters (v5) side by side: every field both give
// must agree, and within one object "type" and "rope_type".
void check_rope_objects(const json* rs, const json* rp, const json& j, const std::string& src) {
    for (const json* r : {rs, rp}) {
        if (r == nullptr || !r->is_object()) continue;
        const std::string name = r == rs ? "rope_scaling" : "rope_parameters";
        same_quantity(find(*r, "rope_type"), (name + ".rope_type").c_str(), find(*r, "type"),
                      (name + ".type").c_str(), "RoPE scaling type", src);
    }
    if (rs != nullptr && rp != nullptr && rs->is_object() && rp->is_object()) {
        for (const auto& [key, value] : rs->items()) {
            const json* other = find(*rp, key.c_str());
            if (value.is_null() || other == nullptr) continue;
            same_quantity(&value, ("rope_scaling." + key).c_str(), other,
                          ("rope_parameters." + key).c_str(), "RoPE scaling field", src);
        }
    }
    if (rp != nullptr && rp->is_object()) {
        same_quantity(find(*rp, "rope_theta"), "rope_parameters.rope_theta", find(j, "rope_theta"),
                      "rope_theta", "RoPE base", src);
    }
}

// A double as the config writes it: 4096 rather than 4096.0.
std::string format_real_text(double d) {
    json v =
        d == std::floor(d) && std::fabs(d) < 9.0e15 ? json(static_cast<std::int64_t>(d)) : json(d);
    return v.dump();
}

}  // namespace

ModelConfig ModelConfig::load(const std::filesystem::path& config_json, bool allow_plain_rope) {
    json j = parse_json(read_text(config_json, "config.json"), config_json);
    return from_json(j, config_json.string(), allow_plain_rope);
}

ModelConfig ModelConfig::from_json(const json& j, const std::string& src, bool allow_plain_rope) {
    if (!j.is_object()) fail("{}: expected a JSON object at the top level", src);
    ModelConfig c;
    if (const json* mt = find(j, "model_type")) {
        if (!mt->is_string()) fail("{}: model_type must be a string", src);
        c.model_type = mt->get<std::string>();
        if (c.model_type != "gpt_oss") {
            fail("{}: model_type is \"{}\"; Neural runs gpt-oss checkpoints (\"gpt_oss\")", src,
                 c.model_type);
        }
    }
    c.hidden_size = positive(get_int(j, "hidden_size", src, true), "hidden_size", src);
    c.intermediate_size =
        positive(get_int(j, "intermediate_size", src, true), "intermediate_size", src);
    c.num_layers =
        positive(get_int(j, "num_hidden_layers", src, true), "num_hidden_layers", src, 4096);
    // Keys two tools spell differently for one quantity must agree where both are given.
    same_quantity(j, "num_local_experts", "num_experts", "number of experts", src);
    same_quantity(j, "num_experts_per_tok", "experts_per_token", "experts per token", src);
    std::int64_t experts = get_int(j, "num_local_experts", src, false, -1);
    if (experts < 0) experts = get_int(j, "num_experts", src, true);
    c.num_experts = positive(experts, "num_local_experts", src, 1 << 16);
    std::int64_t k = get_int(j, "num_experts_per_tok", src, false, -1);
    if (k < 0) k = get_int(j, "experts_per_token", src, true);
    c.experts_per_token = positive(k, "num_experts_per_tok", src, c.num_experts);
    c.num_heads =
        positive(get_int(j, "num_attention_heads", src, true), "num_attention_heads", src, 1 << 12);
    c.num_kv_heads = positive(get_int(j, "num_key_value_heads", src, false, c.num_heads),
                              "num_key_value_heads", src, c.num_heads);
    c.head_dim = positive(get_int(j, "head_dim", src, false, c.hidden_size / c.num_heads),
                          "head_dim", src, 1 << 12);
    c.vocab_size = positive(get_int(j, "vocab_size", src, true), "vocab_size", src, 1 << 24);
    if (c.num_heads % c.num_kv_heads != 0) {
        fail("{}: num_attention_heads ({}) must be a multiple of num_key_value_heads ({})", src,
             c.num_heads, c.num_kv_heads);
    }
    if (c.head_dim % 2 != 0) fail("{}: head_dim ({}) must be even for RoPE", src, c.head_dim);
    // MXFP4 blocks are 32 values along the input dimension of both expert projections.
    if (c.hidden_size % 32 != 0 || c.intermediate_size % 32 != 0) {
        fail(
            "{}: hidden_size ({}) and intermediate_size ({}) must be multiples of 32 (MXFP4 "
            "block size)",
            src, c.hidden_size, c.intermediate_size);
    }

    c.max_position_embeddings = get_int(j, "max_position_embeddings", src, false, 131072);
    if (c.max_position_embeddings <= 0) fail("{}: max_position_embeddings must be positive", src);
    c.sliding_window = static_cast<int>(get_int(j, "sliding_window", src, false, 0));
    if (c.sliding_window < 0) fail("{}: sliding_window must not be negative", src);

    c.layer_is_sliding.assign(static_cast<size_t>(c.num_layers), false);
    if (const json* lt = find(j, "layer_types")) {
        if (!lt->is_array() || lt->size() != static_cast<size_t>(c.num_layers)) {
            fail("{}: layer_types must list {} entries (num_hidden_layers)", src, c.num_layers);
        }
        for (size_t i = 0; i < lt->size(); ++i) {
            const json& t = (*lt)[i];
            if (t == "sliding_attention") {
                c.layer_is_sliding[i] = true;
            } else if (t != "full_attention") {
                fail(
                    "{}: layer_types[{}] = {} (expected \"sliding_attention\" or "
                    "\"full_attention\")",
                    src, i, t.dump());
            }
        }
    } else {
        // The HF default and the OpenAI reference rule: even layers slide.
        for (int i = 0; i < c.num_layers; ++i)
            c.layer_is_sliding[static_cast<size_t>(i)] = i % 2 == 0;
    }
    bool any_sliding = false;
    for (bool s : c.layer_is_sliding) any_sliding = any_sliding || s;
    if (any_sliding && c.sliding_window <= 0) {
        fail("{}: sliding layers need a positive sliding_window", src);
    }
    // A window with no layer to slide: layer_types and sliding_window describe different models.
    if (!any_sliding && c.sliding_window > 0 && find(j, "layer_types") != nullptr) {
        fail(
            "{}: sliding_window = {} but layer_types lists no \"sliding_attention\" layer; the "
            "two disagree about which layers slide",
            src, c.sliding_window);
    }

    // transformers v5 writes rope_parameters (with rope_theta inside); v4 rope_scaling +
    // top-level rope_theta. Accept both (reading only one silently disables YaRN).
    const json* rp = find(j, "rope_parameters");
    const json* rs = find(j, "rope_scaling");
    // rope_theta: inside rope_parameters (v5) or at the top level (v4). A value given must be a
    // real base (> 1: 0 is not "unset"); a checkpoint that gives none is refused rather than
    // run with a guessed base (gpt-oss uses 150000; a wrong one garbles every position).
    check_rope_objects(rs, rp, j, src);
    const json* theta = nullptr;
    if (rp != nullptr) {
        c.rope = parse_rope(*rp, src);
        theta = find(*rp, "rope_theta");
    } else if (rs != nullptr) {
        c.rope = parse_rope(*rs, src);
    }
    c.rope_scaling_given = rp != nullptr || rs != nullptr;
    // gpt-oss is trained with YaRN over 131072 positions: a config without it would run plain
    // RoPE and answer differently past the original context, so it is refused unless the user
    // chose plain RoPE explicitly (--plain-rope).
    if (!c.rope_scaling_given && !allow_plain_rope) {
        fail(
            "{}: no \"rope_scaling\" (or \"rope_parameters\"): gpt-oss uses YaRN (rope_type "
            "\"yarn\", factor 32); the checkpoint is incomplete. Pass --plain-rope 1 to run it "
            "with plain RoPE anyway (changes the answers)",
            src);
    }
    if (theta == nullptr) theta = find(j, "rope_theta");
    if (theta == nullptr) {
        fail("{}: missing required field \"rope_theta\" (the RoPE base; gpt-oss uses 150000)", src);
    }
    if (!theta->is_number()) fail("{}: rope_theta must be a number, got {}", src, theta->dump());
    c.rope_theta = theta->get<double>();
    if (!(c.rope_theta > 1.0) || !std::isfinite(c.rope_theta)) {
        fail("{}: rope_theta must be > 1, got {}", src, theta->dump());
    }

    // Context lengths: YaRN stretches original_max_position_embeddings by `factor` to the
    // model's context, and initial_context_length (the OpenAI reference's name) is the
    // pre-scaling length again.
    if (const json* icl = find(j, "initial_context_length")) {
        const std::int64_t n = get_int(j, "initial_context_length", src, true);
        if (n <= 0) fail("{}: initial_context_length must be positive, got {}", src, icl->dump());
        if (c.rope.type == "yarn" &&
            static_cast<double>(n) != c.rope.original_max_position_embeddings) {
            fail(
                "{}: initial_context_length = {} and rope original_max_position_embeddings = {} "
                "disagree (both give the context before YaRN scaling)",
                src, n, format_real_text(c.rope.original_max_position_embeddings));
        }
    }
    if (c.rope.type == "yarn" && find(j, "max_position_embeddings") != nullptr) {
        const double scaled = c.rope.factor * c.rope.original_max_position_embeddings;
        if (static_cast<double>(c.max_position_embeddings) != scaled) {
            fail(
                "{}: max_position_embeddings = {} but rope factor {} x "
                "original_max_position_embeddings {} = {}: the two disagree about the context "
                "length",
                src, c.max_position_embeddings, format_real_text(c.rope.factor),
                format_real_text(c.rope.original_max_position_embeddings),
                format_real_text(scaled));
        }
    }

    c.rms_norm_eps = static_cast<float>(get_double(j, "rms_norm_eps", src, false, 1e-5));
    if (!(c.rms_norm_eps > 0)) fail("{}: rms_norm_eps must be positive", src);
    c.swiglu_limit = static_cast<float>(get_double(j, "swiglu_limit", src, false, 7.0));
    if (!(c.swiglu_limit > 0)) fail("{}: swiglu_limit must be positive", src);
    if (const json* ab = find(j, "attention_bias")) {
        if (!ab->is_boolean()) fail("{}: attention_bias must be true or false", src);
        c.attention_bias = ab->get<bool>();
    }
    if (const json* tie = find(j, "tie_word_embeddings"); tie != nullptr && *tie == true) {
        fail("{}: tie_word_embeddings=true is not a gpt-oss checkpoint (it has its own lm_head)",
             src);
    }
    if (const json* q = find(j, "quantization_config")) {
        const json* method = find(*q, "quant_method");
        if (method != nullptr && *method != "mxfp4") {
            fail("{}: quantization method {} is not supported (expected \"mxfp4\")", src,
                 method->dump());
        }
    }
    c.eos_token_ids = token_list(j, "eos_token_id", src);
    auto pad = token_list(j, "pad_token_id", src);
    if (!pad.empty()) c.pad_token_id = pad.front();
    return c;
}

GenerationConfig GenerationConfig::load(const std::filesystem::path& path) {
    GenerationConfig g;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return g;
    json j = parse_json(read_text(path, "generation_config.json"), path);
    const std::string src = path.string();
    if (!j.is_object()) fail("{}: expected a JSON object at the top level", src);
    auto bos = token_list(j, "bos_token_id", src);
    if (!bos.empty()) g.bos_token_id = bos.front();
    g.eos_token_ids = token_list(j, "eos_token_id", src);
    auto pad = token_list(j, "pad_token_id", src);
    if (!pad.empty()) g.pad_token_id = pad.front();
    if (const json* s = find(j, "do_sample")) {
        if (!s->is_boolean()) fail("{}: do_sample must be true or false", src);
        g.do_sample = s->get<bool>();
    }
    if (find(j, "temperature")) g.temperature = get_double(j, "temperature", src, true);
    if (find(j, "top_p")) g.top_p = get_double(j, "top_p", src, true);
    if (find(j, "top_k")) g.top_k = static_cast<int>(get_int(j, "top_k", src, true));
    return g;
}

}  // namespace neural
