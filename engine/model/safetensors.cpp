#include "model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "model/gguf.h"
#include "neural/error.h"

namespace neural {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Real headers are well under a megabyte (the 120b shards: ~100 KB); this bound keeps a corrupt
// length from turning into a huge allocation.
constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;

struct DTypeEntry {
    const char* name;
    DType type;
    std::size_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {"BF16", DType::kBF16, 2}, {"F16", DType::kF16, 2},        {"F32", DType::kF32, 4},
    {"F64", DType::kF64, 8},   {"U8", DType::kU8, 1},          {"I8", DType::kI8, 1},
    {"I16", DType::kI16, 2},   {"I32", DType::kI32, 4},        {"I64", DType::kI64, 8},
    {"BOOL", DType::kBool, 1}, {"F8_E4M3", DType::kF8E4M3, 1}, {"F8_E5M2", DType::kF8E5M2, 1},
};

}  // namespace

const char* dtype_name(DType t) {
    for (const auto& e : kDTypes) {
        if (e.type == t) return e.name;
    }
    return "?";
}

std::size_t dtype_size(DType t) {
    for (const auto& e : kDTypes) {
        if (e.type == t) return e.size;
    }
    return 0;
}

std::int64_t TensorInfo::numel() const {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

std::string TensorInfo::shape_string() const {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

SafetensorsFile SafetensorsFile::open(const fs::path& path) {
    SafetensorsFile f;
    f.path_ = std::make_unique<fs::path>(path);
    f.map_ = std::make_unique<MappedFile>(MappedFile::open(path));
    const std::string file = path.string();
    const std::uint64_t size = f.map_->size();
    if (size < 8)
        fail("{}: not a safetensors file: {} bytes, shorter than the 8-byte header length", file,
             size);
    std::uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | f.map_->data()[i];
    if (header_len > size - 8) {
        fail(
            "{}: header length {} runs past the end of the file ({} bytes); the file is "
            "truncated or not safetensors",
            file, header_len, size);
    }
    if (header_len > kMaxHeaderBytes) {
        fail("{}: header length {} is implausibly large (limit {})", file, header_len,
             kMaxHeaderBytes);
    }
    const char* hp = reinterpret_cast<const char*>(f.map_->data() + 8);
    json header;
    try {
        header = json::parse(hp, hp + header_len);
    } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e999
        fail("{}: header is not valid JSON: {}", file, e.what());
    }
    if (!header.is_object()) fail("{}: header must be a JSON object", file);

    const std::uint64_t data_start = 8 + header_len;
    const std::uint64_t data_size = size - data_start;
    const std::uint8_t* data = f.map_->data() + data_start;

    for (auto it = header.begin(); it != header.end(); ++it) {
        const std::string& name = it.key();
        if (name == "__metadata__") continue;
        const json& e = it.value();
        if (!e.is_object()) fail("{}: tensor \"{}\": entry must be an object", file, name);
        TensorInfo t;
        t.name = name;
        t.file = f.path_.get();
        auto dt = e.find("dtype");
        if (dt == e.end() || !dt->is_string()) fail("{}: tensor \"{}\": missing dtype", file, name);
        bool known = false;
        for (const auto& d : kDTypes) {
            if (*dt == d.name) {
                t.dtype = d.type;
                known = true;
            }
        }
        if (!known) fail("{}: tensor \"{}\": unknown dtype {}", file, name, dt->dump());
        auto sh = e.find("shape");
        if (sh == e.end() || !sh->is_array()) fail("{}: tensor \"{}\": missing shape", file, name);
        // Byte count with overflow checks: a hostile shape must not wrap around.
        std::uint64_t bytes = dtype_size(t.dtype);
        for (const auto& d : *sh) {
            if (!d.is_number_integer() || d.get<std::int64_t>() < 0) {
                fail("{}: tensor \"{}\": shape {} has a non-integer or negative dimension", file,
                     name, sh->dump());
            }
            auto dim = d.get<std::uint64_t>();
            if (dim != 0 && bytes > std::numeric_limits<std::uint64_t>::max() / dim) {
                fail("{}: tensor \"{}\": shape {} overflows", file, name, sh->dump());
            }
            bytes *= dim;
            t.shape.push_back(static_cast<std::int64_t>(dim));
        }
        auto off = e.find("data_offsets");
        if (off == e.end() || !off->is_array() || off->size() != 2 ||
            !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned()) {
            fail("{}: tensor \"{}\": data_offsets must be two non-negative integers", file, name);
        }
        t.begin = (*off)[0].get<std::uint64_t>();
        t.end = (*off)[1].get<std::uint64_t>();
        if (t.begin > t.end) {
            fail("{}: tensor \"{}\": data_offsets [{}, {}] are reversed", file, name, t.begin,
                 t.end);
        }
        if (t.end > data_size) {
            fail(
                "{}: tensor \"{}\": data_offsets [{}, {}] lie outside the data area ({} bytes); "
                "the file is truncated or corrupt",
                file, name, t.begin, t.end, data_size);
        }
        if (t.end - t.begin != bytes) {
            fail("{}: tensor \"{}\": {} {} needs {} bytes but data_offsets span {}", file, name,
                 dtype_name(t.dtype), t.shape_string(), bytes, t.end - t.begin);
        }
        t.data = data + t.begin;
        f.tensors_.emplace(name, std::move(t));
    }

    // No two tensors may share bytes (a corrupt header could alias weights).
    std::vector<const TensorInfo*> by_offset;
    for (const auto& [name, t] : f.tensors_) {
        if (t.nbytes() > 0) by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->begin < b->begin; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
        if (by_offset[i]->begin < by_offset[i - 1]->end) {
            fail("{}: tensors \"{}\" and \"{}\" overlap (data_offsets [{}, {}] and [{}, {}])", file,
                 by_offset[i - 1]->name, by_offset[i]->name, by_offset[i - 1]->begin,
                 by_offset[i - 1]->end, by_offset[i]->begin, by_offset[i]->end);
        }
    }
    return f;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

Checkpoint Checkpoint::open(const fs::path& dir) {
    Checkpoint c;
    c.dir_ = dir;
    std::error_code ec;
    if (is_gguf_path(dir)) {
        if (!fs::exists(dir, ec)) fail("GGUF checkpoint not found: {}", dir.string());
        c.gguf_ = GgufCheckpoint::open(dir);
        for (const auto& t : c.gguf_->tensors) c.index_[t->name] = t.get();
        return c;
    }
    if (!fs::is_directory(dir, ec)) fail("checkpoint folder not found: {}", dir.string());
    const fs::path index_path = dir / "model.safetensors.index.json";
    const fs::path single_path = dir / "model.safetensors";
    if (fs::exists(index_path, ec)) {
        std::ifstream in(index_path, std::ios::binary);
        std::ostringstream ss;
        ss << in.rdbuf();
        json index;
        try {
            index = json::parse(ss.str());
        } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e999
            fail("{}: invalid JSON: {}", index_path.string(), e.what());
        }
        auto wm = index.is_object() ? index.find("weight_map") : index.end();
        if (wm == index.end() || !wm->is_object()) {
            fail("{}: missing \"weight_map\" object", index_path.string());
        }
        std::map<std::string, size_t> shard_of_file;
        std::map<std::string, std::string> wanted;  // tensor -> shard file
        for (auto it = wm->begin(); it != wm->end(); ++it) {
            if (!it.value().is_string()) {
                fail("{}: weight_map entry \"{}\" must be a file name", index_path.string(),
                     it.key());
            }
            std::string shard = it.value().get<std::string>();
            fs::path sp(shard);
            if (sp.is_absolute() || sp.has_parent_path() || shard == "." || shard == "..") {
                fail(
                    "{}: weight_map entry \"{}\" names \"{}\", which is not a file in the "
                    "checkpoint folder",
                    index_path.string(), it.key(), shard);
            }
            wanted[it.key()] = shard;
            if (!shard_of_file.count(shard)) {
                if (!fs::exists(dir / sp, ec)) {
                    fail("{}: shard {} (listed for tensor \"{}\") is missing", index_path.string(),
                         (dir / sp).string(), it.key());
                }
                shard_of_file[shard] = c.files_.size();
                c.files_.push_back(SafetensorsFile::open(dir / sp));
            }
        }
        for (const auto& [name, shard] : wanted) {
            const TensorInfo* t = c.files_[shard_of_file[shard]].find(name);
            if (t == nullptr) {
                fail("{}: tensor \"{}\" is listed in {} but that shard does not contain it",
                     (dir / shard).string(), name, index_path.filename().string());
            }
            c.index_[name] = t;
        }
        // Tensors present in a shard but not in the index are ignored, like transformers does;
        // a tensor in two shards is ambiguous.
        std::set<std::string> seen;
        for (const auto& f : c.files_) {
            for (const auto& [name, t] : f.tensors()) {
                if (!seen.insert(name).second && wanted.count(name)) {
                    fail("{}: tensor \"{}\" appears in more than one shard", index_path.string(),
                         name);
                }
            }
        }
    } else if (fs::exists(single_path, ec)) {
        c.files_.push_back(SafetensorsFile::open(single_path));
        for (const auto& [name, t] : c.files_.back().tensors()) c.index_[name] = &t;
    } else {
        fail("{}: no model.safetensors or model.safetensors.index.json found", dir.string());
    }
    return c;
}

std::vector<fs::path> Checkpoint::file_paths() const {
    std::vector<fs::path> paths;
    for (const SafetensorsFile& f : files_) paths.push_back(f.path());
    if (gguf_) {
        for (const GgufFile& f : gguf_->files) paths.push_back(f.path());
    }
    return paths;
}

const TensorInfo* Checkpoint::find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : it->second;
}

const TensorInfo& Checkpoint::require(const std::string& name, DType dtype,
                                      std::span<const std::int64_t> shape) const {
    const TensorInfo* t = find(name);
    auto want_shape = [&] {
        std::string s = "[";
        for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
        return s + "]";
    };
    if (t == nullptr) {
        fail("{}: tensor \"{}\" is missing (expected {} {})", dir_.string(), name,
             dtype_name(dtype), want_shape());
    }
    if (t->dtype != dtype) {
        fail("{}: tensor \"{}\" has dtype {}, expected {}", t->file->string(), name,
             dtype_name(t->dtype), dtype_name(dtype));
    }
    if (!std::equal(t->shape.begin(), t->shape.end(), shape.begin(), shape.end())) {
        fail("{}: tensor \"{}\" has shape {}, expected {} from {}", t->file->string(), name,
             t->shape_string(), want_shape(), gguf_ ? "the GGUF metadata" : "config.json");
    }
    return *t;
}

std::vector<std::string> Checkpoint::tensor_names() const {
    std::vector<std::string> names;
    names.reserve(index_.size());
    for (const auto& [name, info] : index_) names.push_back(name);
    return names;
}

std::uint64_t Checkpoint::total_bytes() const {
    std::uint64_t n = 0;
    for (const auto& [name, t] : index_) n += t->nbytes();
    return n;
}

}  // namespace neural
