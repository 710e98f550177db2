// `neural synth`: random-weight gpt-oss checkpoints in the real Hugging Face layout (config.json,
// generation_config.json, BF16 dense tensors, MXFP4 experts, Hub-style shards + index, tokenizer
// files), for tests and speed measurements without downloading 13-65 GB. The weights are
// deterministic in (seed, tensor name, element index), so the bytes never depend on the thread
// count, and scaled so activations stay O(1) through every layer; the text such a model
// generates is nonsense by design.
//
// make_plan() lists every tensor (name, dtype, shape, shard, offset) and every file without
// touching the disk; write_checkpoint() writes a plan into a temporary sibling folder and renames
// it into place only when every byte is on disk.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "model/safetensors.h"

namespace neural::synth {

// Written beside config.json in every synthetic checkpoint; its presence means random weights.
inline constexpr const char* kSynthMarkerFile = "neural-synth.json";

// Model dimensions (the config.json fields that vary between shapes).
struct Shape {
    std::string name;
    int hidden_size = 0;        // H
    int intermediate_size = 0;  // I (per expert)
    int num_layers = 0;
    int num_experts = 0;
    int experts_per_token = 0;
    int num_heads = 0;
    int num_kv_heads = 0;
    int head_dim = 0;
    int sliding_window = 0;
    int vocab_size = 0;
    bool sharded = false;  // Hub-style shards + index (20b/120b); false: one model.safetensors
};

// "tiny", "gpt-oss-20b" or "gpt-oss-120b"; anything else throws neural::Error listing them.
Shape shape_named(const std::string& name);
std::vector<std::string> shape_names();

struct Options {
    Shape shape;
    std::uint64_t seed = 0;
    // 0 = every expert equally popular; S > 0 = Zipf-like popularity with exponent ~S (router
    // biases, see router_bias() in synth.cpp for the formula).
    double router_skew = 0.0;
    // Tensor bytes per shard file (never splitting a tensor). Unset: the shape's layout (one
    // model.safetensors for tiny, 4.8 GB shards like the Hub for 20b/120b). Set: shards + index
    // for any shape (tests use it to shard the tiny model).
    std::optional<std::uint64_t> shard_bytes;
};

// How a tensor's bytes are generated (all from the counter-based stream of its name).
enum class Fill : std::uint8_t {
    kUniformBf16,   // bf16, uniform with the given mean and standard deviation
    kRouterWeight,  // bf16 [E, H], uniform rows rescaled to exactly the given std (see below)
    kRouterBias,    // bf16 [E], the router-skew biases of one layer
    kFp4Codes,      // MXFP4 blocks: uniformly random bytes (two E2M1 codes each)
    kE8M0Scales,    // MXFP4 scales: 127 + exponent + jitter in {-1, 0, +1}
};

struct TensorPlan {
    std::string name;  // exact HF name
    DType dtype = DType::kBF16;
    std::vector<std::int64_t> shape;
    std::uint64_t nbytes = 0;
    int shard = 0;             // index into Plan::shards
    std::uint64_t offset = 0;  // begin of its bytes in the shard's data area
    Fill fill = Fill::kUniformBf16;
    float mean = 0.0f;      // kUniformBf16: mean of even-indexed elements
    float mean_odd = 0.0f;  // kUniformBf16: mean of odd-indexed elements (gate/up interleave)
    float std = 0.0f;       // kUniformBf16, kRouterWeight
    int exponent = 0;       // kE8M0Scales: base power of two of the block scales
};

struct ShardPlan {
    std::string file_name;             // "model.safetensors" or "model-00000-of-00002.safetensors"
    std::vector<std::size_t> tensors;  // indexes into Plan::tensors, in data order
    std::string header;  // exact bytes before the data: u64 LE length + JSON padded to 8 bytes
    std::uint64_t data_bytes = 0;
    std::uint64_t file_bytes() const { return header.size() + data_bytes; }
};

struct Plan {
    Options options;
    std::vector<TensorPlan> tensors;
    std::vector<ShardPlan> shards;
    bool indexed = false;            // shards + model.safetensors.index.json
    std::uint64_t tensor_bytes = 0;  // sum of tensor data (= the index's total_size)
    std::uint64_t file_bytes = 0;    // every byte write_checkpoint writes except the tokenizer
    std::string config_json;
    std::string generation_config_json;
    std::string index_json;   // empty unless indexed
    std::string marker_json;  // kSynthMarkerFile: generator, shape, seed, skew

    const TensorPlan* find(const std::string& name) const;
};

// Lists tensors, shards, headers and JSON files. Throws neural::Error for invalid options.
Plan make_plan(const Options& options);

struct Progress {
    std::uint64_t bytes_done = 0;
    std::uint64_t bytes_total = 0;
    double seconds = 0.0;  // since writing started
};

struct WriteOptions {
    int threads = 0;     // generator threads; 0 = all hardware threads
    bool force = false;  // replace a non-empty output folder
    // tokenizer.json to copy (or a folder holding it); tokenizer_config.json and
    // chat_template.jinja beside it are copied too when present. Required.
    std::filesystem::path tokenizer;
    // Called from the calling thread about once a second once writing takes longer than that.
    std::function<void(const Progress&)> on_progress;
    const std::atomic<bool>* cancel = nullptr;  // checked between chunks; throws Cancelled
};

struct WriteResult {
    std::filesystem::path dir;  // absolute output folder
    std::uint64_t bytes = 0;    // bytes written (tokenizer files included)
    double seconds = 0.0;
};

// Writes `plan` to `out_dir`. Refuses a non-empty out_dir unless `force`, checks free disk space
// first, writes into a temporary sibling folder and renames it into place at the end (an existing
// out_dir is replaced only then). On any error or cancel the temporary folder is removed and
// out_dir is left as it was; the error names the file and the reason (e.g. "disk full").
WriteResult write_checkpoint(const Plan& plan, const std::filesystem::path& out_dir,
                             const WriteOptions& options);

// Bytes [begin, end) of tensor `index` of `plan` (what write_checkpoint stores there).
void fill_tensor(const Plan& plan, std::size_t index, std::uint64_t begin, std::uint64_t end,
                 std::uint8_t* out);

}  // namespace neural::synth
