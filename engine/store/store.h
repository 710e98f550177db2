// A memory-mapped expert store (docs/STORE_FORMAT.md). open() validates the whole structure
// (magic, version, kind, metadata, index, record offsets and sizes, header checksum) so that
// every record access afterwards is in bounds; record checksums are checked on demand
// (record_checksum_ok, `neural verify-store`). The store serves expert rows to the CPU engine
// in place (ExpertSource): raw scales are read from the mapping, packed ones decoded per row.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/expert_source.h"
#include "model/safetensors.h"
#include "platform/mapped_file.h"
#include "store/format.h"
#include "store/identity.h"

namespace neural::store {

// The model fields a store records (metadata "model").
struct StoreShape {
    std::string model_type;
    int hidden_size = 0;
    int intermediate_size = 0;
    int num_layers = 0;
    int num_experts = 0;
};

class ExpertStore final : public ExpertSource {
 public:
    // Maps and validates `path`. Throws neural::Error naming the file: not a store (foreign file),
    // truncated, a format version from the future, an unknown kind, a bad header checksum, or
    // offsets/sizes that do not fit the recorded shape.
    static ExpertStore open(const std::filesystem::path& path);

    ExpertStore(ExpertStore&&) noexcept = default;
    ExpertStore& operator=(ExpertStore&&) noexcept = default;

    const std::filesystem::path& path() const { return map_.path(); }
    StoreKind kind() const { return layout_.kind; }
    const StoreShape& shape() const { return shape_; }
    const CheckpointId& checkpoint() const { return checkpoint_; }
    const std::string& created_by() const { return created_by_; }
    const RecordLayout& layout() const { return layout_; }
    std::uint64_t file_bytes() const { return map_.size(); }
    int num_layers() const { return shape_.num_layers; }
    int num_experts() const { return shape_.num_experts; }

    const IndexEntry& entry(int layer, int expert) const {
        return index_[static_cast<std::size_t>(layer) *
                          static_cast<std::size_t>(shape_.num_experts) +
                      static_cast<std::size_t>(expert)];
    }
    // The record's payload bytes (inside the mapping).
    std::span<const std::uint8_t> record(int layer, int expert) const;
    bool record_checksum_ok(int layer, int expert) const;
    // Packed: every escaped row's offset lies in the record's escape area and the escape count
    // matches the index. Throws neural::Error naming the layer and expert. Raw: nothing to check.
    void check_escapes(int layer, int expert) const;

    // Throws neural::Error unless this store was made from a checkpoint with `config`'s shape and
    // exactly `ckpt`'s expert tensors (names, dtypes, shapes, sizes and, with `compare_sample`,
    // the sample hash). Cheap: the full hash is only compared by verify-store.
    void check_matches(const Checkpoint& ckpt, const ModelConfig& config,
                       bool compare_sample = true) const;

    // ExpertSource: prepare() = check_escapes(); row() reads in place.
    void prepare(int layer, int expert) const override { check_escapes(layer, expert); }
    ExpertRow row(int layer, Projection projection, int expert, std::int64_t row,
                  std::uint8_t* scale_buf) const override {
        const ProjectionLayout& p = layout_[projection];
        const std::uint8_t* payload = map_.data() + entry(layer, expert).offset;
        const std::uint8_t* blocks =
            payload + p.blocks_offset + static_cast<std::uint64_t>(row * p.groups) * 16;
        const std::uint8_t* slot =
            payload + p.scales_offset + static_cast<std::uint64_t>(row) * p.scale_stride;
        if (layout_.kind == StoreKind::kRaw) return {blocks, slot};
        return {blocks, unpack_scales(slot, p.groups, payload, scale_buf)};
    }

 private:
    ExpertStore() = default;

    MappedFile map_;
    StoreShape shape_;
    CheckpointId checkpoint_;
    std::string created_by_;
    RecordLayout layout_;
    std::vector<IndexEntry> index_;  // layer-major
};

// One line for messages: "packed store (format 1) of gpt_oss: 24 layers x 32 experts, ...".
std::string describe_store(const ExpertStore& store);

}  // namespace neural::store
