// Helpers of the expert store tests: a small safetensors writer, a synthetic gpt-oss checkpoint
// with chosen dimensions, a fixture copy whose scales need escapes, file surgery.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "neural/error.h"
#include "runtime/model.h"
#include "support/fixtures.h"

namespace neural::test {

struct TensorData {
    std::string name;
    std::string dtype;  // "BF16", "U8"
    std::vector<std::int64_t> shape;
    std::string bytes;
};

// Writes one safetensors file (u64 LE header length, JSON header, data).
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorData>& tensors);

// A gpt-oss checkpoint with random weights and the given dimensions, written as two shards
// (layer 0 + globals, the other layers) with model.safetensors.index.json. Expert scales are
// random within a 16-step window, except for rows that `scale_rows` may rewrite.
struct SynthSpec {
    int hidden = 2880;
    int intermediate = 2880;
    int layers = 2;
    int experts = 2;
    int vocab = 64;
    std::uint32_t seed = 1;
    // (layer, projection 0 = gate_up / 1 = down, expert, row, scales of the row) -> may edit them.
    std::function<void(int, int, int, std::int64_t, std::uint8_t*, std::int64_t)> scale_rows;
};
void write_synthetic_checkpoint(const std::filesystem::path& dir, const SynthSpec& spec);

// Copies the tiny fixture (config, tokenizer, weights) into `dir`.
void copy_fixture(const std::filesystem::path& dir);
// copy_fixture() with down_proj row 0 of every expert of every layer given scales spanning more
// than 15 steps (block 0 lowered by 20), so a packed store must escape one row per record.
void copy_fixture_with_wide_scales(const std::filesystem::path& dir);

// Logits of every position of every golden prompt, concatenated (forward with all_logits).
std::vector<float> golden_logits(Model& model);

// Overwrites bytes at `offset` of the file.
void patch_file(const std::filesystem::path& path, std::uint64_t offset, const std::string& bytes);
// Recomputes the store header checksum after a test edited the header/metadata/index.
void reseal_store_header(const std::filesystem::path& path);
// Rewrites every record's index checksum to what its payload hashes to now, then reseals the
// header: a test's damage to records then passes the checksums.
void reseal_store_record_checksums(const std::filesystem::path& path);

}  // namespace neural::test
