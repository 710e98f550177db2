// The identity of a checkpoint's expert tensors, as a store records it: names, dtypes, shapes,
// sizes, per-tensor hashes, an overall hash and a cheap sample hash (docs/STORE_FORMAT.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/config.h"
#include "model/safetensors.h"

namespace neural::store {

struct ExpertTensorId {
    std::string name;
    std::string dtype;  // safetensors dtype name ("U8")
    std::vector<std::int64_t> shape;
    std::uint64_t nbytes = 0;
    std::uint64_t hash = 0;  // XXH3-64 of the tensor's bytes
};

struct CheckpointId {
    std::vector<ExpertTensorId> tensors;  // sorted by name (bytewise)
    // XXH3-64 of the tensors' hashes (u64 little-endian each) in name order.
    std::uint64_t hash = 0;
    // XXH3-64 over, per tensor in name order, its first and last min(4096, nbytes) bytes: cheap
    // enough to compare at every load (a few hundred KiB at 120b), catches other weights of the
    // same shape.
    std::uint64_t sample_hash = 0;
};

// "model.layers.{l}.mlp.experts.{gate_up_proj,down_proj}_{blocks,scales}" for every layer,
// sorted bytewise (so "layers.10" precedes "layers.2").
std::vector<std::string> expert_tensor_names(const ModelConfig& config);

// Names, dtypes, shapes, sizes and the sample hash of `ckpt`'s expert tensors (the full hashes
// are left 0: computing them reads every expert byte). Throws when a tensor is missing.
CheckpointId describe_experts(const Checkpoint& ckpt, const ModelConfig& config);

// Combines per-tensor hashes (in name order) into CheckpointId::hash.
std::uint64_t combine_hashes(const std::vector<ExpertTensorId>& tensors);

nlohmann::json to_json(const CheckpointId& id);
// Throws neural::Error naming `source` on a malformed object.
CheckpointId checkpoint_id_from_json(const nlohmann::json& j, const std::string& source);

}  // namespace neural::store
