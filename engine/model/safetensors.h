// safetensors container (single file and sharded checkpoints), memory-mapped and validated before
// any tensor byte is touched. Layout: u64 LE header length N, N bytes of JSON
// {name: {dtype, shape, data_offsets: [begin, end)}} plus optional "__metadata__", then data.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "platform/mapped_file.h"

namespace neural {

enum class DType { kBF16, kF16, kF32, kF64, kU8, kI8, kI16, kI32, kI64, kBool, kF8E4M3, kF8E5M2 };

const char* dtype_name(DType t);
std::size_t dtype_size(DType t);

struct GgmlExperts;  // model/gguf.h

struct TensorInfo {
    std::string name;
    DType dtype = DType::kU8;
    std::vector<std::int64_t> shape;
    std::uint64_t begin = 0;  // offsets into the data area
    std::uint64_t end = 0;
    const std::uint8_t* data = nullptr;  // points into the mapping
    const std::filesystem::path* file = nullptr;
    // A GGUF checkpoint's expert tensors (model/gguf.h): the bytes are not stored in this layout,
    // `data` is null and the rows are converted from ggml's blocks on reading.
    const GgmlExperts* ggml = nullptr;

    std::uint64_t nbytes() const { return end - begin; }
    std::int64_t numel() const;
    std::string shape_string() const;  // "[4, 96, 1, 16]"
};

class SafetensorsFile {
public:
    // Maps and validates `path`: header length within the file, JSON object, known dtypes,
    // non-negative shapes whose byte size equals the offset span, offsets inside the data area and
    // not overlapping. Throws neural::Error naming the file (and the tensor).
    static SafetensorsFile open(const std::filesystem::path& path);

    const std::filesystem::path& path() const { return *path_; }
    const std::map<std::string, TensorInfo>& tensors() const { return tensors_; }
    const TensorInfo* find(const std::string& name) const;

private:
    std::unique_ptr<std::filesystem::path> path_;  // stable address for TensorInfo::file
    std::unique_ptr<MappedFile> map_;
    std::map<std::string, TensorInfo> tensors_;
};

struct GgufCheckpoint;  // model/gguf.h

// A checkpoint: a folder with `model.safetensors`, or shards listed by
// `model.safetensors.index.json`; or a gpt-oss GGUF file (split ones too: model/gguf.h), whose
// tensors appear under the same names, shapes and dtypes.
class Checkpoint {
public:
    static Checkpoint open(const std::filesystem::path& dir);

    // The folder, or the GGUF file.
    const std::filesystem::path& dir() const { return dir_; }
    // The GGUF the tensors come from (its config, generation config and tokenizer metadata), or
    // null for a safetensors checkpoint.
    const GgufCheckpoint* gguf() const { return gguf_.get(); }
    // Every file the checkpoint reads.
    std::vector<std::filesystem::path> file_paths() const;
    const TensorInfo* find(const std::string& name) const;
    // The tensor must exist with exactly this dtype and shape; otherwise a clear error.
    const TensorInfo& require(const std::string& name, DType dtype,
                              std::span<const std::int64_t> shape) const;
    const TensorInfo& require(const std::string& name, DType dtype,
                              std::initializer_list<std::int64_t> shape) const {
        return require(name, dtype, std::span<const std::int64_t>(shape.begin(), shape.size()));
    }
    std::size_t tensor_count() const { return index_.size(); }
    // Every tensor name of the checkpoint, sorted.
    std::vector<std::string> tensor_names() const;
    std::uint64_t total_bytes() const;
    const std::vector<SafetensorsFile>& files() const { return files_; }

private:
    std::filesystem::path dir_;
    std::vector<SafetensorsFile> files_;
    std::shared_ptr<const GgufCheckpoint> gguf_;
    std::map<std::string, const TensorInfo*> index_;
};

}  // namespace neural
