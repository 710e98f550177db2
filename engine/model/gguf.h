// GGUF container (llama.cpp's format, as LM Studio, Ollama and llama.cpp store gpt-oss), memory-
// mapped and validated before any tensor byte is touched, and the gpt-oss reading on top of it:
// the config from the metadata and the tensors under the checkpoint's (Hugging Face) names.
//
// File layout (all integers little-endian, version 2 and 3):
//   "GGUF", u32 version, u64 tensor_count, u64 kv_count,
//   kv_count x (string key, u32 value_type, value)      string = u64 length + UTF-8 bytes
//   tensor_count x (string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset)
//   padding to general.alignment (default 32), then the data area; offsets are relative to it.
// ne[0] is the contiguous dimension (the reverse of the safetensors shape).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/config.h"
#include "model/safetensors.h"
#include "platform/mapped_file.h"

namespace neural {

// ggml tensor types Neural reads or names. Every type ggml defines is known by name and block
// size (gguf.cpp) so that a file's layout can be checked whole; only these three are converted.
enum class GgmlType : std::uint32_t { kF32 = 0, kF16 = 1, kBF16 = 30, kMXFP4 = 39 };

// "F32", "Q4_K", "MXFP4", ...; "unknown type N" for an id ggml does not define.
std::string ggml_type_name(std::uint32_t type);

// GGUF metadata value types.
enum class GgufValueType : std::uint32_t {
    kU8 = 0,
    kI8 = 1,
    kU16 = 2,
    kI16 = 3,
    kU32 = 4,
    kI32 = 5,
    kF32 = 6,
    kBool = 7,
    kString = 8,
    kArray = 9,
    kU64 = 10,
    kI64 = 11,
    kF64 = 12,
};

// One metadata entry. Strings and arrays point into the mapping (validated at open).
struct GgufValue {
    GgufValueType type = GgufValueType::kU8;
    // Scalars: integers in `i` (u64 values above INT64_MAX are kept in `u`), floats in `f`.
    std::int64_t i = 0;
    std::uint64_t u = 0;
    double f = 0;
    std::string_view str;  // kString
    // kArray: element type, count and the first element's bytes.
    GgufValueType elem_type = GgufValueType::kU8;
    std::uint64_t count = 0;
    const std::uint8_t* elems = nullptr;

    bool is_integer() const;
    bool is_number() const {
        return is_integer() || type == GgufValueType::kF32 || type == GgufValueType::kF64;
    }
};

struct GgufTensor {
    std::string name;
    std::uint32_t type = 0;
    std::vector<std::uint64_t> ne;  // ggml order: ne[0] innermost
    std::uint64_t offset = 0;       // into the data area
    std::uint64_t nbytes = 0;
    const std::uint8_t* data = nullptr;  // points into the mapping
    const std::filesystem::path* file = nullptr;

    std::string ne_string() const;  // "[32, 96, 8]" (ggml order)
};

class GgufFile {
public:
    // Maps and validates `path`: magic, version, every count and length against the bytes left,
    // value types, tensor dimensions (1..4, no overflow), known ggml types, rows a whole number of
    // blocks, offsets aligned, inside the data area and not overlapping. Throws neural::Error
    // naming the file (and the key or tensor).
    static GgufFile open(const std::filesystem::path& path);

    const std::filesystem::path& path() const { return *path_; }
    std::uint32_t version() const { return version_; }
    const std::map<std::string, GgufValue, std::less<>>& metadata() const { return kv_; }
    const GgufValue* find(std::string_view key) const;
    const std::map<std::string, GgufTensor>& tensors() const { return tensors_; }
    const GgufTensor* find_tensor(const std::string& name) const;
    const MappedFile& mapping() const { return *map_; }

    // Typed metadata readers; a missing key (required) or a wrong type names the file and key.
    std::optional<std::int64_t> get_int(std::string_view key, bool required) const;
    std::optional<double> get_number(std::string_view key, bool required) const;
    std::optional<std::string> get_string(std::string_view key, bool required) const;
    // A string array's elements (views into the mapping); an error if `key` is not one.
    std::vector<std::string_view> get_strings(std::string_view key) const;
    // An integer array's elements; an error if `key` is not one.
    std::vector<std::int64_t> get_ints(std::string_view key) const;

private:
    std::unique_ptr<std::filesystem::path> path_;  // stable address for GgufTensor::file
    std::unique_ptr<MappedFile> map_;
    std::uint32_t version_ = 0;
    std::map<std::string, GgufValue, std::less<>> kv_;
    std::map<std::string, GgufTensor> tensors_;
};

// The parts of a GGUF checkpoint: `model.gguf`, or every `NAME-0000k-of-0000N.gguf` beside a
// split's first part (any part may be named). Metadata comes from the first part; each tensor
// must be in exactly one part.
std::vector<std::filesystem::path> gguf_parts(const std::filesystem::path& path);

// Whether `path` names a GGUF checkpoint (a file ending in .gguf).
bool is_gguf_path(const std::filesystem::path& path);

// Where one projection's MXFP4 experts lie in a GGUF. ggml stores each row as blocks of 17 bytes
// (the E8M0 scale, then 16 code bytes with element j in the low nibble of byte j and element
// j + 16 in its high nibble), and gate and up as two tensors [E, I, H/32 blocks]; the checkpoint
// layout has blocks [E, rows, G, 16] (element 2j low, 2j + 1 high), scales [E, rows, G] and gate
// and up rows interleaved (docs/STORE_FORMAT.md "GGUF").
struct GgmlExperts {
    const std::uint8_t* first = nullptr;   // gate (gate_up) or down
    const std::uint8_t* second = nullptr;  // up (gate_up), else null
    std::int64_t experts = 0;
    std::int64_t rows = 0;    // rows per expert in the checkpoint layout (2I or H)
    std::int64_t groups = 0;  // blocks per row (cols / 32)

    std::uint64_t row_bytes() const { return static_cast<std::uint64_t>(groups) * 17; }
    // The ggml row behind checkpoint row `r` of expert `e`.
    const std::uint8_t* ggml_row(std::int64_t e, std::int64_t r) const;
    // Checkpoint-layout code bytes (groups * 16) and scales (groups) of row `r` of expert `e`.
    void convert_row(std::int64_t e, std::int64_t r, std::uint8_t* blocks,
                     std::uint8_t* scales) const;
    // Bytes [offset, offset + n) of the checkpoint-layout blocks (or scales) tensor.
    void read(bool scales, std::uint64_t offset, std::uint64_t n, std::uint8_t* out) const;
    // The contiguous ggml bytes of expert `e` in the first / second tensor (for read-ahead).
    std::uint64_t expert_bytes() const;
};

// ggml MXFP4 block (17 bytes) -> checkpoint-layout code bytes (16) and scale.
void ggml_mxfp4_block_to_checkpoint(const std::uint8_t* ggml_block, std::uint8_t* codes,
                                    std::uint8_t* scale);

// An opened gpt-oss GGUF checkpoint: its parts, the config read from the metadata, and every
// tensor under its checkpoint name (Checkpoint::open builds on this). bf16 tensors point into
// the mapping; f32 ones (norms, biases, sinks, router) are rounded to bf16 once at open (exact
// for weights that were bf16, as gpt-oss's are); the MXFP4 experts stay in the mapping and are
// converted per row by readers (GgmlExperts).
struct GgufCheckpoint {
    std::vector<GgufFile> files;  // files[0] holds the metadata
    ModelConfig config;
    GenerationConfig generation;
    std::vector<std::unique_ptr<TensorInfo>> tensors;
    std::vector<std::unique_ptr<GgmlExperts>> experts;
    std::vector<std::vector<std::uint8_t>> buffers;  // converted bf16 data
    std::size_t inexact_f32 = 0;                     // f32 values that bf16 could not hold exactly

    // Opens every part, checks the architecture ("gpt-oss"), builds the config (ModelConfig's
    // checks apply) and maps every tensor gpt-oss needs, refusing other types by name.
    static std::shared_ptr<const GgufCheckpoint> open(const std::filesystem::path& path);
};

}  // namespace neural
