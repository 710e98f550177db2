// Shapes, the tensor plan, config files and the weight generator of `neural synth`.
#include "synth/synth.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/bf16.h"
#include "neural/error.h"

namespace neural::synth {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// Hub limit per shard in convert_gpt_oss_weights_to_hf.py (save_sharded_model): 4.8 GB.
constexpr std::uint64_t kHubShardBytes = 4'800'000'000ull;
constexpr int kVocab = 201088;

// --- counter-based random stream ------------------------------------------------------------

constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ull;  // splitmix64 increment

// splitmix64's output function: a bijective 64-bit mixer.
inline std::uint64_t mix64(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Stream key of one tensor: seed and FNV-1a of its name, mixed. Word w of the stream is
// mix64(key + (w + 1) * kGamma), i.e. splitmix64 started at `key`, evaluated at any index
// directly (so any chunk of any tensor can be generated independently).
std::uint64_t stream_key(std::uint64_t seed, const std::string& name) {
    std::uint64_t h = 0xCBF29CE484222325ull;
    for (unsigned char c : name) h = (h ^ c) * 0x100000001B3ull;
    return mix64(seed * kGamma ^ mix64(h));
}

inline std::uint64_t stream_word(std::uint64_t key, std::uint64_t w) {
    return mix64(key + (w + 1) * kGamma);
}

// One 8-byte store on little-endian hosts (GCC does not merge the byte loop by itself).
inline void store_le64(std::uint64_t v, std::uint8_t* dst) {
    if constexpr (std::endian::native == std::endian::little) {
        std::memcpy(dst, &v, 8);
    } else {
        for (int i = 0; i < 8; ++i) dst[i] = static_cast<std::uint8_t>(v >> (8 * i));
    }
}

// --- shapes ---------------------------------------------------------------------------------

Shape make_shape(const char* name, int h, int inter, int layers, int experts, int heads,
                 int kv_heads, int window, bool sharded) {
    Shape s;
    s.name = name;
    s.hidden_size = h;
    s.intermediate_size = inter;
    s.num_layers = layers;
    s.num_experts = experts;
    s.experts_per_token = 4;
    s.num_heads = heads;
    s.num_kv_heads = kv_heads;
    s.head_dim = 64;
    s.sliding_window = window;
    s.vocab_size = kVocab;
    s.sharded = sharded;
    return s;
}

const std::vector<Shape>& shapes() {
    // docs/MODEL.md (the shapes table); tiny = the shared test fixture's dimensions.
    static const std::vector<Shape> all = {
        make_shape("tiny", 32, 96, 4, 8, 4, 2, 16, false),
        make_shape("gpt-oss-20b", 2880, 2880, 24, 32, 64, 8, 128, true),
        make_shape("gpt-oss-120b", 2880, 2880, 36, 128, 64, 8, 128, true),
    };
    return all;
}

// E2M1 codes drawn uniformly from all 16 have RMS sqrt(mean(v^2)) = sqrt(8.5625) = 2.926, and
// the jitter {-1, 0, +1} on the exponent multiplies the RMS by sqrt((1/4 + 1 + 4) / 3) = 1.323.
// A row of K such weights times a unit-RMS input then has a dot product of std
// 2.926 * 1.323 * sqrt(K) * 2^e; this picks the e that brings it nearest to 1.
int unit_exponent(int k) {
    const double rms = std::sqrt(8.5625) * std::sqrt(5.25 / 3.0) * std::sqrt(double(k));
    return static_cast<int>(std::lround(std::log2(1.0 / rms)));
}

// Power of two that scales the residual branches (attention output and expert down
// projections): 2^e ~ 1/sqrt(2L), like GPT-2's residual init. With unit-scale branches the
// part of the residual stream shared by all positions (context averages from attention, fed back
// through every later layer) outgrows the token-specific part with depth ("rank collapse"): at
// 24 layers every token then routes to the same few experts. Scaled branches keep the token's
// own embedding a large part of the stream at every depth, so routing stays token-dependent.
int branch_exponent(int layers) {
    return -static_cast<int>(std::lround(std::log2(std::sqrt(2.0 * layers))));
}

std::string shard_name(int index, int count) {
    return fmt::format("model-{:05d}-of-{:05d}.safetensors", index, count - 1);
}

ordered_json config_json(const Shape& s) {
    ordered_json layer_types = ordered_json::array();
    for (int i = 0; i < s.num_layers; ++i) {
        layer_types.push_back(i % 2 == 0 ? "sliding_attention" : "full_attention");
    }
    // Values as in the Hub's config.json (docs/MODEL.md "config.json"), keys sorted as transformers
    // writes them.
    ordered_json j;
    j["architectures"] = {"GptOssForCausalLM"};
    j["attention_bias"] = true;
    j["attention_dropout"] = 0.0;
    j["eos_token_id"] = 200002;
    j["experts_per_token"] = s.experts_per_token;
    j["head_dim"] = s.head_dim;
    j["hidden_act"] = "silu";
    j["hidden_size"] = s.hidden_size;
    j["initial_context_length"] = 4096;
    j["initializer_range"] = 0.02;
    j["intermediate_size"] = s.intermediate_size;
    j["layer_types"] = layer_types;
    j["max_position_embeddings"] = 131072;
    j["model_type"] = "gpt_oss";
    j["num_attention_heads"] = s.num_heads;
    j["num_experts_per_tok"] = s.experts_per_token;
    j["num_hidden_layers"] = s.num_layers;
    j["num_key_value_heads"] = s.num_kv_heads;
    j["num_local_experts"] = s.num_experts;
    j["output_router_logits"] = false;
    j["pad_token_id"] = 199999;
    j["quantization_config"] = {{"modules_to_not_convert",
                                 {"model.layers.*.self_attn", "model.layers.*.mlp.router",
                                  "model.embed_tokens", "lm_head"}},
                                {"quant_method", "mxfp4"}};
    j["rms_norm_eps"] = 1e-05;
    j["rope_scaling"] = {{"beta_fast", 32.0},   {"beta_slow", 1.0},
                         {"factor", 32.0},      {"original_max_position_embeddings", 4096},
                         {"rope_type", "yarn"}, {"truncate", false}};
    j["rope_theta"] = 150000;
    j["router_aux_loss_coef"] = 0.9;
    j["sliding_window"] = s.sliding_window;
    j["swiglu_limit"] = 7.0;
    j["tie_word_embeddings"] = false;
    j["torch_dtype"] = "bfloat16";
    j["transformers_version"] = "4.55.0.dev0";
    j["use_cache"] = true;
    j["vocab_size"] = s.vocab_size;
    return j;
}

std::string generation_config_json() {
    ordered_json j;
    j["bos_token_id"] = 199998;
    j["do_sample"] = true;
    j["eos_token_id"] = {200002, 199999, 200012};
    j["pad_token_id"] = 199999;
    j["transformers_version"] = "4.55.0.dev0";
    return j.dump(2) + "\n";
}

void validate(const Options& o) {
    const Shape& s = o.shape;
    if (s.hidden_size <= 0 || s.intermediate_size <= 0 || s.num_layers <= 0 || s.num_experts <= 0 ||
        s.num_heads <= 0 || s.num_kv_heads <= 0 || s.head_dim <= 0 || s.vocab_size <= 0 ||
        s.sliding_window <= 0) {
        fail("synth shape \"{}\": every dimension must be positive", s.name);
    }
    if (s.hidden_size % 32 != 0 || s.intermediate_size % 32 != 0) {
        fail(
            "synth shape \"{}\": hidden and intermediate sizes must be multiples of 32 (MXFP4 "
            "blocks)",
            s.name);
    }
    if (s.experts_per_token <= 0 || s.experts_per_token > s.num_experts) {
        fail("synth shape \"{}\": experts per token must be in [1, {}]", s.name, s.num_experts);
    }
    if (s.num_heads % s.num_kv_heads != 0) {
        fail("synth shape \"{}\": query heads must be a multiple of KV heads", s.name);
    }
    if (!std::isfinite(o.router_skew) || o.router_skew < 0.0 || o.router_skew > 16.0) {
        fail("router skew must be between 0 and 16, got {}", o.router_skew);
    }
    if (o.shard_bytes && *o.shard_bytes == 0) fail("shard size must be positive");
}

// The tensors in Hub order (embedding, layers 0..L-1 in the order of docs/MODEL.md "Checkpoint
// files and tensor names", final norm, LM head) with their fill rules. Scales: norm gains ~1;
// linear weights std 1/sqrt(fan_in) so every projection maps unit-RMS inputs to unit-RMS outputs
// (MXFP4 exponents from unit_exponent()), except that the two residual branches' output projections
// are scaled down by 2^branch_exponent(L) ~ 1/sqrt(2L); small biases; embedding std 1 so the
// residual stream starts at RMS 1 and stays O(1) (~sqrt(2) after all layers).
std::vector<TensorPlan> list_tensors(const Shape& s) {
    const std::int64_t H = s.hidden_size, I = s.intermediate_size, E = s.num_experts;
    const std::int64_t q = std::int64_t(s.num_heads) * s.head_dim;
    const std::int64_t kv = std::int64_t(s.num_kv_heads) * s.head_dim;
    const std::int64_t V = s.vocab_size;
    std::vector<TensorPlan> out;
    auto add = [&](std::string name, DType dtype, std::vector<std::int64_t> shape, Fill fill,
                   double mean = 0.0, double std = 0.0, int exponent = 0) {
        TensorPlan t;
        t.name = std::move(name);
        t.dtype = dtype;
        t.shape = std::move(shape);
        t.nbytes = dtype_size(dtype);
        for (auto d : t.shape) t.nbytes *= static_cast<std::uint64_t>(d);
        t.fill = fill;
        t.mean = static_cast<float>(mean);
        t.mean_odd = t.mean;
        t.std = static_cast<float>(std);
        t.exponent = exponent;
        out.push_back(std::move(t));
    };
    auto bf16 = [&](std::string name, std::vector<std::int64_t> shape, double mean, double std) {
        add(std::move(name), DType::kBF16, std::move(shape), Fill::kUniformBf16, mean, std);
    };
    const double inv_h = 1.0 / std::sqrt(double(H));
    const int branch_shift = branch_exponent(s.num_layers);
    const double branch = std::ldexp(1.0, branch_shift);
    add("model.embed_tokens.weight", DType::kBF16, {V, H}, Fill::kUniformBf16, 0.0, 1.0);
    for (int l = 0; l < s.num_layers; ++l) {
        const std::string p = fmt::format("model.layers.{}.", l);
        bf16(p + "input_layernorm.weight", {H}, 1.0, 0.1);
        bf16(p + "self_attn.q_proj.weight", {q, H}, 0.0, inv_h);
        bf16(p + "self_attn.q_proj.bias", {q}, 0.0, 0.05);
        bf16(p + "self_attn.k_proj.weight", {kv, H}, 0.0, inv_h);
        bf16(p + "self_attn.k_proj.bias", {kv}, 0.0, 0.05);
        bf16(p + "self_attn.v_proj.weight", {kv, H}, 0.0, inv_h);
        bf16(p + "self_attn.v_proj.bias", {kv}, 0.0, 0.05);
        bf16(p + "self_attn.o_proj.weight", {H, q}, 0.0, branch / std::sqrt(double(q)));
        bf16(p + "self_attn.o_proj.bias", {H}, 0.0, 0.05 * branch);
        bf16(p + "self_attn.sinks", {s.num_heads}, 0.0, 1.0);
        bf16(p + "post_attention_layernorm.weight", {H}, 1.0, 0.1);
        add(p + "mlp.router.weight", DType::kBF16, {E, H}, Fill::kRouterWeight, 0.0, inv_h);
        add(p + "mlp.router.bias", DType::kBF16, {E}, Fill::kRouterBias);
        const std::string x = p + "mlp.experts.";
        add(x + "gate_up_proj_blocks", DType::kU8, {E, 2 * I, H / 32, 16}, Fill::kFp4Codes);
        add(x + "gate_up_proj_scales", DType::kU8, {E, 2 * I, H / 32}, Fill::kE8M0Scales, 0, 0,
            unit_exponent(s.hidden_size));
        // Rows interleave gate (even) and up (odd). The up bias is centred on -1 so that the
        // "+1" of the activation, a = g * sigmoid(1.702 g) * (u + 1), multiplies a zero-mean
        // term: E[a] = 0. Otherwise every expert adds a token-independent vector W2 E[a] to the
        // residual stream, which grows linearly with depth until all tokens look alike and the
        // routing collapses onto a few experts (seen at 4 layers already).
        bf16(x + "gate_up_proj_bias", {E, 2 * I}, 0.0, 0.1);
        out.back().mean_odd = -1.0f;
        add(x + "down_proj_blocks", DType::kU8, {E, H, I / 32, 16}, Fill::kFp4Codes);
        add(x + "down_proj_scales", DType::kU8, {E, H, I / 32}, Fill::kE8M0Scales, 0, 0,
            unit_exponent(s.intermediate_size) + branch_shift);
        bf16(x + "down_proj_bias", {E, H}, 0.0, 0.05 * branch);
    }
    bf16("model.norm.weight", {H}, 1.0, 0.1);
    bf16("lm_head.weight", {V, H}, 0.0, inv_h);
    return out;
}

// u64 LE length + compact JSON header, padded with spaces so the data starts 8-byte aligned
// (what the safetensors library writes).
std::string shard_header(const Plan& plan, const ShardPlan& shard) {
    json h = json::object();
    for (std::size_t i : shard.tensors) {
        const TensorPlan& t = plan.tensors[i];
        h[t.name] = {{"dtype", dtype_name(t.dtype)},
                     {"shape", t.shape},
                     {"data_offsets", {t.offset, t.offset + t.nbytes}}};
    }
    h["__metadata__"] = {{"format", "pt"}};
    std::string text = h.dump();
    text.append((8 - (8 + text.size()) % 8) % 8, ' ');
    std::string out(8, '\0');
    for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
    return out + text;
}

// Router biases of one layer, bf16 bit patterns [E].
//
// Skew formula: a per-layer random permutation gives every expert a rank r_e in 0..E-1, and
//     bias_e = -S * (sqrt(6) / pi) * ln(r_e + 1).
// Why: the router logits w_e . h have std ~1 across experts (weights std 1/sqrt(H), h unit RMS).
// If those logits were Gumbel-distributed with scale beta, P(expert e ranks first) would be
// proportional to exp(bias_e / beta) exactly; a unit-std Gaussian is close to a Gumbel with
// beta = sqrt(6) / pi (the Gumbel std is beta * pi / sqrt(6)), so the top-1 popularity is about
// (r_e + 1)^-S, Zipf with exponent S. The top-4 choices flatten it somewhat. S = 0 gives zero
// biases: uniform popularity.
std::vector<std::uint16_t> router_bias(const Plan& plan, const TensorPlan& t) {
    const auto E = static_cast<std::size_t>(t.shape[0]);
    std::vector<std::uint32_t> perm(E);
    std::iota(perm.begin(), perm.end(), 0u);
    const std::uint64_t key = stream_key(plan.options.seed, t.name + "#permutation");
    for (std::size_t i = E; i-- > 1;) {  // Fisher-Yates; the modulo bias is irrelevant here
        std::swap(perm[i], perm[stream_word(key, i) % (i + 1)]);
    }
    const double scale = -plan.options.router_skew * std::sqrt(6.0) / 3.14159265358979323846;
    std::vector<std::uint16_t> out(E);
    for (std::size_t rank = 0; rank < E; ++rank) {
        out[perm[rank]] = float_to_bf16(static_cast<float>(scale * std::log(double(rank) + 1.0)));
    }
    return out;
}

// Router weights [E, H], bf16 bit patterns. Drawn like any uniform tensor, then every row is
// rescaled to an RMS of exactly `std`: an expert whose row happened to be longer would win the
// top-k more often (with H = 32 the row norms vary by ~12 %, enough to make the tiny model's
// routing visibly uneven at router skew 0).
std::vector<std::uint16_t> router_weight(const Plan& plan, const TensorPlan& t) {
    const auto rows = static_cast<std::size_t>(t.shape[0]);
    const auto cols = static_cast<std::size_t>(t.shape[1]);
    const std::uint64_t key = stream_key(plan.options.seed, t.name);
    std::vector<double> row(cols);
    std::vector<std::uint16_t> out(rows * cols);
    for (std::size_t r = 0; r < rows; ++r) {
        double sum_sq = 0.0;
        for (std::size_t c = 0; c < cols; ++c) {
            const std::size_t i = r * cols + c;  // element i: 16-bit lane i % 4 of word i / 4
            const auto bits = (stream_word(key, i / 4) >> (16 * (i % 4))) & 0xffff;
            row[c] = (double(bits) + 0.5) / 32768.0 - 1.0;
            sum_sq += row[c] * row[c];
        }
        const double scale = double(t.std) / std::sqrt(sum_sq / double(cols));
        for (std::size_t c = 0; c < cols; ++c) {
            out[r * cols + c] = float_to_bf16(static_cast<float>(double(t.mean) + row[c] * scale));
        }
    }
    return out;
}

// The 8 bytes of word w of a uniform bf16 tensor: four elements from 16 random bits each,
// v = mean + std * sqrt(3) * (2 u - 1) with u = (r + 0.5) / 65536 (a uniform with that std).
// Element 4w + lane is even for lanes 0 and 2 (offset c0) and odd for 1 and 3 (c0_odd).
inline void uniform_word(std::uint64_t r, double c0, double c0_odd, double c1, std::uint8_t* out) {
    std::uint64_t v = 0;
    for (int lane = 0; lane < 4; ++lane) {
        const auto bits = static_cast<std::uint32_t>((r >> (16 * lane)) & 0xffff);
        const double base = lane % 2 == 0 ? c0 : c0_odd;
        v |= std::uint64_t(float_to_bf16(static_cast<float>(base + c1 * bits))) << (16 * lane);
    }
    store_le64(v, out);
}

// The 8 bytes of word w of a scales tensor: E8M0 byte 127 + exponent + jitter, jitter in
// {-1, 0, +1} from the word's bytes; kept within 1..254 (0 would be 2^-127, 255 is NaN).
inline void scales_word(std::uint64_t r, int exponent, std::uint8_t* out) {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) {
        const int jitter = static_cast<int>(((r >> (8 * i)) & 0xff) % 3) - 1;
        v |= std::uint64_t(std::clamp(127 + exponent + jitter, 1, 254)) << (8 * i);
    }
    store_le64(v, out);
}

// Bytes [begin, end) of a tensor whose stream word w becomes its bytes [8w, 8w + 8) through
// word(r, dst): whole words go straight to `out`, partial words at either end via a scratch copy.
template <typename Word>
void fill_words(std::uint64_t key, std::uint64_t begin, std::uint64_t end, std::uint8_t* out,
                Word&& word) {
    std::uint64_t b = begin;
    std::uint8_t tmp[8];
    while (b < end) {
        const std::uint64_t w = b / 8;
        const std::uint64_t lo = b - 8 * w;
        if (lo == 0 && end - b >= 8) {
            const std::uint64_t words = (end - b) / 8;
            for (std::uint64_t k = 0; k < words; ++k) word(stream_word(key, w + k), out + 8 * k);
            out += 8 * words;
            b += 8 * words;
            continue;
        }
        word(stream_word(key, w), tmp);
        const std::uint64_t hi = std::min<std::uint64_t>(8, lo + (end - b));
        std::memcpy(out, tmp + lo, hi - lo);
        out += hi - lo;
        b += hi - lo;
    }
}

}  // namespace

Shape shape_named(const std::string& name) {
    for (const Shape& s : shapes()) {
        if (s.name == name) return s;
    }
    fail("unknown shape \"{}\" (choose {})", name, fmt::join(shape_names(), ", "));
}

std::vector<std::string> shape_names() {
    std::vector<std::string> names;
    for (const Shape& s : shapes()) names.push_back(s.name);
    return names;
}

const TensorPlan* Plan::find(const std::string& name) const {
    for (const auto& t : tensors) {
        if (t.name == name) return &t;
    }
    return nullptr;
}

Plan make_plan(const Options& options) {
    validate(options);
    Plan plan;
    plan.options = options;
    plan.tensors = list_tensors(options.shape);
    plan.indexed = options.shard_bytes.has_value() || options.shape.sharded;
    const std::uint64_t budget =
        options.shard_bytes.value_or(plan.indexed ? kHubShardBytes : UINT64_MAX);

    // Greedy in Hub order like save_sharded_model: a tensor that does not fit opens the next
    // shard (an oversized tensor gets a shard of its own rather than an empty shard before it).
    std::vector<ShardPlan> shards(1);
    for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
        TensorPlan& t = plan.tensors[i];
        if (!shards.back().tensors.empty() && shards.back().data_bytes + t.nbytes > budget) {
            shards.emplace_back();
        }
        t.shard = static_cast<int>(shards.size() - 1);
        t.offset = shards.back().data_bytes;
        shards.back().data_bytes += t.nbytes;
        shards.back().tensors.push_back(i);
        plan.tensor_bytes += t.nbytes;
    }
    const int n = static_cast<int>(shards.size());
    for (int i = 0; i < n; ++i) {
        shards[i].file_name = plan.indexed ? shard_name(i, n) : "model.safetensors";
        shards[i].header = shard_header(plan, shards[i]);
        plan.file_bytes += shards[i].file_bytes();
    }
    plan.shards = std::move(shards);

    plan.config_json = config_json(options.shape).dump(2) + "\n";
    plan.generation_config_json = generation_config_json();
    // Marks the folder as synthetic: apps show "random weights" instead of pretending it is a
    // real model (see kSynthMarkerFile).
    plan.marker_json = json{{"generator", "neural synth"},
                            {"shape", options.shape.name},
                            {"seed", options.seed},
                            {"router_skew", options.router_skew},
                            {"note", "random weights: the text this model writes is nonsense"}}
                           .dump(2) +
                       "\n";
    if (plan.indexed) {
        json weight_map = json::object();
        for (const auto& t : plan.tensors) weight_map[t.name] = plan.shards[t.shard].file_name;
        json index = {{"metadata", {{"total_size", plan.tensor_bytes}}},
                      {"weight_map", weight_map}};
        plan.index_json = index.dump(2) + "\n";
    }
    plan.file_bytes += plan.config_json.size() + plan.generation_config_json.size() +
                       plan.index_json.size() + plan.marker_json.size();
    return plan;
}

void fill_tensor(const Plan& plan, std::size_t index, std::uint64_t begin, std::uint64_t end,
                 std::uint8_t* out) {
    const TensorPlan& t = plan.tensors.at(index);
    if (begin > end || end > t.nbytes) {
        fail("synth: byte range [{}, {}) is outside tensor {} ({} bytes)", begin, end, t.name,
             t.nbytes);
    }
    if (t.fill == Fill::kRouterBias || t.fill == Fill::kRouterWeight) {
        // Small tensors computed whole (they need every element or a permutation).
        const std::vector<std::uint16_t> all =
            t.fill == Fill::kRouterBias ? router_bias(plan, t) : router_weight(plan, t);
        for (std::uint64_t b = begin; b < end; ++b) {
            const std::uint16_t v = all[b / 2];
            *out++ = static_cast<std::uint8_t>(b % 2 == 0 ? v & 0xff : v >> 8);
        }
        return;
    }
    const std::uint64_t key = stream_key(plan.options.seed, t.name);
    switch (t.fill) {
        case Fill::kUniformBf16: {
            const double a = double(t.std) * std::sqrt(3.0);
            const double c1 = 2.0 * a / 65536.0;
            const double c0 = double(t.mean) - a + 0.5 * c1;
            const double c0_odd = double(t.mean_odd) - a + 0.5 * c1;
            if (end - begin < (1u << 20)) {
                fill_words(key, begin, end, out, [&](std::uint64_t r, std::uint8_t* dst) {
                    uniform_word(r, c0, c0_odd, c1, dst);
                });
                return;
            }
            // Large ranges: the same values through a table of all 2^16 inputs (the per-element
            // float math dominates the generation of the 20b/120b dense tensors otherwise).
            std::vector<std::uint16_t> even(65536), odd(65536);
            for (std::uint32_t r = 0; r < 65536; ++r) {
                even[r] = float_to_bf16(static_cast<float>(c0 + c1 * r));
                odd[r] = float_to_bf16(static_cast<float>(c0_odd + c1 * r));
            }
            fill_words(key, begin, end, out, [&](std::uint64_t r, std::uint8_t* dst) {
                const std::uint64_t v = std::uint64_t(even[r & 0xffff]) |
                                        std::uint64_t(odd[(r >> 16) & 0xffff]) << 16 |
                                        std::uint64_t(even[(r >> 32) & 0xffff]) << 32 |
                                        std::uint64_t(odd[r >> 48]) << 48;
                store_le64(v, dst);
            });
            return;
        }
        case Fill::kE8M0Scales:
            fill_words(key, begin, end, out, [&](std::uint64_t r, std::uint8_t* dst) {
                scales_word(r, t.exponent, dst);
            });
            return;
        default:  // kFp4Codes
            fill_words(key, begin, end, out,
                       [](std::uint64_t r, std::uint8_t* dst) { store_le64(r, dst); });
            return;
    }
}

}  // namespace neural::synth
