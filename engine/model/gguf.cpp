#include "model/gguf.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "model/bf16.h"
#include "neural/error.h"

namespace neural {

namespace fs = std::filesystem;

namespace {

struct TypeEntry {
    std::uint32_t id;
    const char* name;
    std::uint32_t block;  // values per block
    std::uint32_t bytes;  // bytes per block
};
// Every type ggml defines (ggml.h's ggml_type; ids 4, 5 and 31..33, 36..38 were removed).
constexpr TypeEntry kTypes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},
};

const TypeEntry* type_entry(std::uint32_t id) {
    for (const auto& t : kTypes) {
        if (t.id == id) return &t;
    }
    return nullptr;
}

constexpr int kMaxDims = 4;                        // GGML_MAX_DIMS
constexpr std::uint64_t kMaxNameBytes = 1u << 16;  // far above ggml's 64; bounds a hostile length
constexpr int kMaxArrayDepth = 4;

std::size_t scalar_size(GgufValueType t) {
    switch (t) {
        case GgufValueType::kU8:
        case GgufValueType::kI8:
        case GgufValueType::kBool:
            return 1;
        case GgufValueType::kU16:
        case GgufValueType::kI16:
            return 2;
        case GgufValueType::kU32:
        case GgufValueType::kI32:
        case GgufValueType::kF32:
            return 4;
        case GgufValueType::kU64:
        case GgufValueType::kI64:
        case GgufValueType::kF64:
            return 8;
        default:
            return 0;
    }
}

const char* value_type_name(GgufValueType t) {
    static const char* names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                  "bool", "string", "array", "u64", "i64", "f64"};
    const auto i = static_cast<std::uint32_t>(t);
    return i < 13 ? names[i] : "?";
}

// Bounds-checked cursor over the mapped header. Every read that would pass the end of the file
// is an error saying what was being read: a truncated file, or a length that lies.
class Cursor {
public:
    Cursor(const std::uint8_t* data, std::uint64_t size, const std::string& file)
        : data_(data), size_(size), file_(file) {}

    std::uint64_t pos() const { return pos_; }
    std::uint64_t left() const { return size_ - pos_; }
    const std::uint8_t* here() const { return data_ + pos_; }

    void need(std::uint64_t n, const std::string& what) const {
        if (n > left()) {
            fail("{}: truncated: {} needs {} bytes at offset {} but the file has {} bytes", file_,
                 what, n, pos_, size_);
        }
    }
    template <typename T>
    T get(const std::string& what) {
        need(sizeof(T), what);
        T v;
        std::memcpy(&v, data_ + pos_, sizeof(T));
        pos_ += sizeof(T);
        return v;
    }
    void skip(std::uint64_t n, const std::string& what) {
        need(n, what);
        pos_ += n;
    }
    std::string_view string(const std::string& what, std::uint64_t max_len = ~0ull) {
        const auto n = get<std::uint64_t>(what + " length");
        if (n > max_len)
            fail("{}: {} is {} bytes long (at most {} allowed)", file_, what, n, max_len);
        need(n, what);
        std::string_view s(reinterpret_cast<const char*>(data_ + pos_),
                           static_cast<std::size_t>(n));
        pos_ += n;
        return s;
    }

private:
    const std::uint8_t* data_;
    std::uint64_t size_;
    std::uint64_t pos_ = 0;
    const std::string& file_;
};

// Walks one value of `type` (checking it lies inside the file) and fills `v` for scalars,
// strings and the top-level array.
void read_value(Cursor& c, GgufValueType type, GgufValue& v, const std::string& what, int depth,
                const std::string& file) {
    v.type = type;
    switch (type) {
        case GgufValueType::kU8:
            v.i = c.get<std::uint8_t>(what);
            break;
        case GgufValueType::kI8:
            v.i = c.get<std::int8_t>(what);
            break;
        case GgufValueType::kU16:
            v.i = c.get<std::uint16_t>(what);
            break;
        case GgufValueType::kI16:
            v.i = c.get<std::int16_t>(what);
            break;
        case GgufValueType::kU32:
            v.i = c.get<std::uint32_t>(what);
            break;
        case GgufValueType::kI32:
            v.i = c.get<std::int32_t>(what);
            break;
        case GgufValueType::kU64:
            v.u = c.get<std::uint64_t>(what);
            v.i = v.u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
                      ? -1
                      : static_cast<std::int64_t>(v.u);
            break;
        case GgufValueType::kI64:
            v.i = c.get<std::int64_t>(what);
            break;
        case GgufValueType::kF32:
            v.f = c.get<float>(what);
            break;
        case GgufValueType::kF64:
            v.f = c.get<double>(what);
            break;
        case GgufValueType::kBool: {
            const auto b = c.get<std::uint8_t>(what);
            if (b > 1) fail("{}: {} is a bool with value {} (0 or 1 expected)", file, what, b);
            v.i = b;
            break;
        }
        case GgufValueType::kString:
            v.str = c.string(what);
            break;
        case GgufValueType::kArray: {
            if (depth >= kMaxArrayDepth) fail("{}: {}: arrays nested too deeply", file, what);
            const auto et = c.get<std::uint32_t>(what + " element type");
            if (et > 12) fail("{}: {}: unknown array element type {}", file, what, et);
            v.elem_type = static_cast<GgufValueType>(et);
            v.count = c.get<std::uint64_t>(what + " element count");
            v.elems = c.here();
            if (const std::size_t sz = scalar_size(v.elem_type); sz > 0) {
                if (v.count > c.left() / sz) {
                    fail(
                        "{}: {}: {} elements of {} do not fit in the {} bytes left in the file "
                        "(truncated or corrupt)",
                        file, what, v.count, value_type_name(v.elem_type), c.left());
                }
                c.skip(v.count * sz, what);
            } else {
                // Strings and nested arrays take at least 8 bytes each: a count beyond that is
                // a lie, caught before the walk.
                if (v.count > c.left() / 8) {
                    fail(
                        "{}: {}: {} elements do not fit in the {} bytes left in the file "
                        "(truncated or corrupt)",
                        file, what, v.count, c.left());
                }
                GgufValue elem;
                for (std::uint64_t k = 0; k < v.count; ++k) {
                    read_value(c, v.elem_type, elem, what, depth + 1, file);
                }
            }
            break;
        }
        default:
            fail("{}: {} has unknown value type {}", file, what, static_cast<std::uint32_t>(type));
    }
}

std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

std::string ggml_type_name(std::uint32_t type) {
    if (const TypeEntry* t = type_entry(type)) return t->name;
    return fmt::format("unknown type {}", type);
}

bool GgufValue::is_integer() const {
    switch (type) {
        case GgufValueType::kU8:
        case GgufValueType::kI8:
        case GgufValueType::kU16:
        case GgufValueType::kI16:
        case GgufValueType::kU32:
        case GgufValueType::kI32:
        case GgufValueType::kU64:
        case GgufValueType::kI64:
            return true;
        default:
            return false;
    }
}

std::string GgufTensor::ne_string() const {
    std::string s = "[";
    for (std::size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
    return s + "]";
}

GgufFile GgufFile::open(const fs::path& path) {
    GgufFile f;
    f.path_ = std::make_unique<fs::path>(path);
    f.map_ = std::make_unique<MappedFile>(MappedFile::open(path));
    const std::string file = path.string();
    const std::uint64_t size = f.map_->size();
    if (size < 4 || std::memcmp(f.map_->data(), "GGUF", 4) != 0) {
        std::string got = size < 4 ? fmt::format("{} bytes", size) : "";
        if (size >= 4) {
            for (int i = 0; i < 4; ++i) got += fmt::format("{:02x}", f.map_->data()[i]);
        }
        fail("{}: not a GGUF file (it does not start with the magic \"GGUF\"; found {})", file,
             size < 4 ? got : "0x" + got);
    }
    Cursor c(f.map_->data(), size, file);
    c.skip(4, "magic");
    f.version_ = c.get<std::uint32_t>("the version");
    if (f.version_ == 1) {
        fail(
            "{}: GGUF version 1 (32-bit counts, before llama.cpp's 2023 format) is not "
            "supported; convert the model again with a current llama.cpp",
            file);
    }
    if (f.version_ != 2 && f.version_ != 3) {
        fail("{}: GGUF version {} is not supported (this build reads versions 2 and 3)", file,
             f.version_);
    }
    const auto n_tensors = c.get<std::uint64_t>("the tensor count");
    const auto n_kv = c.get<std::uint64_t>("the metadata count");
    // A metadata entry takes at least 13 bytes (key length, type, a 1-byte value), a tensor info
    // 32 (name length, n_dims, one dimension, type, offset): larger counts are lies, refused
    // before anything is reserved for them.
    if (n_kv > c.left() / 13) {
        fail("{}: metadata count {} is impossible for a file of {} bytes (truncated or corrupt)",
             file, n_kv, size);
    }
    if (n_tensors > c.left() / 32) {
        fail("{}: tensor count {} is impossible for a file of {} bytes (truncated or corrupt)",
             file, n_tensors, size);
    }
    for (std::uint64_t k = 0; k < n_kv; ++k) {
        const std::string_view key = c.string(fmt::format("metadata key {}", k), kMaxNameBytes);
        const std::string what = fmt::format("metadata \"{}\"", key);
        const auto type = c.get<std::uint32_t>(what + " type");
        if (type > 12) fail("{}: {} has unknown value type {}", file, what, type);
        GgufValue v;
        read_value(c, static_cast<GgufValueType>(type), v, what, 0, file);
        if (!f.kv_.emplace(std::string(key), v).second) {
            fail("{}: metadata key \"{}\" appears twice", file, key);
        }
    }
    std::uint64_t alignment = 32;
    if (const GgufValue* a = f.find("general.alignment")) {
        if (!a->is_integer() || a->i <= 0 || (a->i & (a->i - 1)) != 0 || a->i > (1 << 20)) {
            fail("{}: general.alignment must be a power of two up to 1 MiB", file);
        }
        alignment = static_cast<std::uint64_t>(a->i);
    }
    std::vector<GgufTensor> infos;
    infos.reserve(static_cast<std::size_t>(n_tensors));
    for (std::uint64_t k = 0; k < n_tensors; ++k) {
        GgufTensor t;
        t.name = std::string(c.string(fmt::format("tensor name {}", k), kMaxNameBytes));
        const std::string what = fmt::format("tensor \"{}\"", t.name);
        const auto n_dims = c.get<std::uint32_t>(what + " dimension count");
        if (n_dims < 1 || n_dims > kMaxDims) {
            fail("{}: {} has {} dimensions (1 to {} allowed)", file, what, n_dims, kMaxDims);
        }
        for (std::uint32_t d = 0; d < n_dims; ++d)
            t.ne.push_back(c.get<std::uint64_t>(what + " shape"));
        t.type = c.get<std::uint32_t>(what + " type");
        t.offset = c.get<std::uint64_t>(what + " offset");
        const TypeEntry* te = type_entry(t.type);
        if (te == nullptr)
            fail("{}: {} has ggml type id {}, which ggml does not define", file, what, t.type);
        if (t.ne[0] % te->block != 0) {
            fail("{}: {} is {} with {} values per row, not a whole number of {}-value blocks", file,
                 what, te->name, t.ne[0], te->block);
        }
        // Bytes of the tensor; every product is checked, the first one included (a row of 2^62
        // F32 values must not wrap to a small size that passes the bounds check below).
        const std::uint64_t blocks = t.ne[0] / te->block;
        if (blocks > std::numeric_limits<std::uint64_t>::max() / te->bytes) {
            fail("{}: {} shape {} overflows", file, what, t.ne_string());
        }
        std::uint64_t bytes = blocks * te->bytes;
        for (std::uint32_t d = 1; d < n_dims; ++d) {
            if (t.ne[d] != 0 && bytes > std::numeric_limits<std::uint64_t>::max() / t.ne[d]) {
                fail("{}: {} shape {} overflows", file, what, t.ne_string());
            }
            bytes *= t.ne[d];
        }
        t.nbytes = bytes;
        if (t.offset % alignment != 0) {
            fail("{}: {} offset {} is not a multiple of the alignment {}", file, what, t.offset,
                 alignment);
        }
        t.file = f.path_.get();
        infos.push_back(std::move(t));
    }
    const std::uint64_t data_start = align_up(c.pos(), alignment);
    if (data_start > size) {
        fail("{}: truncated: the data area would start at offset {} but the file has {} bytes",
             file, data_start, size);
    }
    const std::uint64_t data_size = size - data_start;
    for (GgufTensor& t : infos) {
        if (t.offset > data_size || t.nbytes > data_size - t.offset) {
            fail(
                "{}: tensor \"{}\" ({} {}, {} bytes at data offset {}) runs past the end of the "
                "file ({} data bytes); the file is truncated or corrupt",
                file, t.name, ggml_type_name(t.type), t.ne_string(), t.nbytes, t.offset, data_size);
        }
        t.data = f.map_->data() + data_start + t.offset;
        const std::string name = t.name;
        if (!f.tensors_.emplace(name, std::move(t)).second) {
            fail("{}: tensor \"{}\" appears twice", file, name);
        }
    }
    std::vector<const GgufTensor*> by_offset;
    for (const auto& [name, t] : f.tensors_) {
        if (t.nbytes > 0) by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
    for (std::size_t i = 1; i < by_offset.size(); ++i) {
        const GgufTensor& a = *by_offset[i - 1];
        const GgufTensor& b = *by_offset[i];
        if (b.offset < a.offset + a.nbytes) {
            fail("{}: tensors \"{}\" and \"{}\" overlap (bytes [{}, {}) and [{}, {}))", file,
                 a.name, b.name, a.offset, a.offset + a.nbytes, b.offset, b.offset + b.nbytes);
        }
    }
    return f;
}

const GgufValue* GgufFile::find(std::string_view key) const {
    auto it = kv_.find(key);
    return it == kv_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::find_tensor(const std::string& name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

std::optional<std::int64_t> GgufFile::get_int(std::string_view key, bool required) const {
    const GgufValue* v = find(key);
    if (v == nullptr) {
        if (required) fail("{}: metadata \"{}\" is missing", path().string(), key);
        return std::nullopt;
    }
    if (!v->is_integer() || (v->type == GgufValueType::kU64 && v->i < 0)) {
        fail("{}: metadata \"{}\" must be an integer, it is {}", path().string(), key,
             value_type_name(v->type));
    }
    return v->i;
}

std::optional<double> GgufFile::get_number(std::string_view key, bool required) const {
    const GgufValue* v = find(key);
    if (v == nullptr) {
        if (required) fail("{}: metadata \"{}\" is missing", path().string(), key);
        return std::nullopt;
    }
    if (v->type == GgufValueType::kF32 || v->type == GgufValueType::kF64) return v->f;
    if (v->is_integer()) return static_cast<double>(v->i);
    fail("{}: metadata \"{}\" must be a number, it is {}", path().string(), key,
         value_type_name(v->type));
}

std::optional<std::string> GgufFile::get_string(std::string_view key, bool required) const {
    const GgufValue* v = find(key);
    if (v == nullptr) {
        if (required) fail("{}: metadata \"{}\" is missing", path().string(), key);
        return std::nullopt;
    }
    if (v->type != GgufValueType::kString) {
        fail("{}: metadata \"{}\" must be a string, it is {}", path().string(), key,
             value_type_name(v->type));
    }
    return std::string(v->str);
}

std::vector<std::string_view> GgufFile::get_strings(std::string_view key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) fail("{}: metadata \"{}\" is missing", path().string(), key);
    if (v->type != GgufValueType::kArray || v->elem_type != GgufValueType::kString) {
        fail("{}: metadata \"{}\" must be an array of strings", path().string(), key);
    }
    std::vector<std::string_view> out;
    out.reserve(static_cast<std::size_t>(v->count));
    // Validated at open: every length lies inside the file.
    const std::uint8_t* p = v->elems;
    for (std::uint64_t k = 0; k < v->count; ++k) {
        std::uint64_t n;
        std::memcpy(&n, p, 8);
        out.emplace_back(reinterpret_cast<const char*>(p + 8), static_cast<std::size_t>(n));
        p += 8 + n;
    }
    return out;
}

std::vector<std::int64_t> GgufFile::get_ints(std::string_view key) const {
    const GgufValue* v = find(key);
    if (v == nullptr) fail("{}: metadata \"{}\" is missing", path().string(), key);
    GgufValue probe;
    probe.type = v->elem_type;
    if (v->type != GgufValueType::kArray || !probe.is_integer()) {
        fail("{}: metadata \"{}\" must be an array of integers", path().string(), key);
    }
    const std::size_t sz = scalar_size(v->elem_type);
    std::vector<std::int64_t> out(static_cast<std::size_t>(v->count));
    for (std::uint64_t k = 0; k < v->count; ++k) {
        const std::uint8_t* p = v->elems + k * sz;
        std::int64_t x = 0;
        switch (v->elem_type) {
            case GgufValueType::kU8:
                x = *p;
                break;
            case GgufValueType::kI8:
                x = static_cast<std::int8_t>(*p);
                break;
            case GgufValueType::kU16: {
                std::uint16_t t;
                std::memcpy(&t, p, 2);
                x = t;
                break;
            }
            case GgufValueType::kI16: {
                std::int16_t t;
                std::memcpy(&t, p, 2);
                x = t;
                break;
            }
            case GgufValueType::kU32: {
                std::uint32_t t;
                std::memcpy(&t, p, 4);
                x = t;
                break;
            }
            case GgufValueType::kI32: {
                std::int32_t t;
                std::memcpy(&t, p, 4);
                x = t;
                break;
            }
            default: {
                std::int64_t t;
                std::memcpy(&t, p, 8);
                x = t;
                break;
            }
        }
        out[static_cast<std::size_t>(k)] = x;
    }
    return out;
}

// A .gguf file, or a file without an extension that starts with the GGUF magic (below).
bool is_gguf_path(const fs::path& path) {
    std::error_code ec;
    std::string ext = path.extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char ch) { return std::tolower(ch); });
    if (fs::is_directory(path, ec)) return false;
    if (ext == ".gguf") return true;
    // A file without the extension that starts with the GGUF magic: Ollama keeps its models as
    // content-addressed blobs ("sha256-HEX", the desktop app's discovery finds them).
    if (!ext.empty() || !fs::is_regular_file(path, ec)) return false;
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {};
    return in.read(magic, 4) && std::memcmp(magic, "GGUF", 4) == 0;
}

std::vector<fs::path> gguf_parts(const fs::path& path) {
    static const std::regex split(R"((.*)-(\d{5})-of-(\d{5})\.gguf)", std::regex::icase);
    const std::string name = path.filename().string();
    std::smatch m;
    if (!std::regex_match(name, m, split)) return {path};
    const int count = std::stoi(m[3].str());
    if (count < 1) fail("{}: a split GGUF of {} parts", path.string(), count);
    std::vector<fs::path> parts;
    std::error_code ec;
    for (int k = 1; k <= count; ++k) {
        const fs::path p =
            path.parent_path() / fmt::format("{}-{:05}-of-{:05}.gguf", m[1].str(), k, count);
        if (!fs::exists(p, ec)) {
            fail("{}: part {} of this split GGUF ({}) is missing", path.string(), k, p.string());
        }
        parts.push_back(p);
    }
    return parts;
}

// --- ggml MXFP4 <-> checkpoint layout -------------------------------------------------------

void ggml_mxfp4_block_to_checkpoint(const std::uint8_t* g, std::uint8_t* codes,
                                    std::uint8_t* scale) {
    *scale = g[0];
    const std::uint8_t* qs = g + 1;
    // ggml: element j in the low nibble of qs[j], element j + 16 in its high nibble.
    auto element = [&](int i) -> std::uint8_t {
        return i < 16 ? static_cast<std::uint8_t>(qs[i] & 0x0f)
                      : static_cast<std::uint8_t>(qs[i - 16] >> 4);
    };
    // Checkpoint: element 2k in the low nibble of byte k, element 2k + 1 in the high nibble.
    for (int k = 0; k < 16; ++k) {
        codes[k] = static_cast<std::uint8_t>(element(2 * k) | (element(2 * k + 1) << 4));
    }
}

const std::uint8_t* GgmlExperts::ggml_row(std::int64_t e, std::int64_t r) const {
    if (second == nullptr) {
        return first + static_cast<std::uint64_t>(e * rows + r) * row_bytes();
    }
    // gate_up: row 2i is gate row i, row 2i + 1 is up row i; each tensor has rows / 2 per expert.
    const std::int64_t half = rows / 2;
    const std::uint8_t* base = (r % 2 == 0) ? first : second;
    return base + static_cast<std::uint64_t>(e * half + r / 2) * row_bytes();
}

void GgmlExperts::convert_row(std::int64_t e, std::int64_t r, std::uint8_t* blocks,
                              std::uint8_t* scales) const {
    const std::uint8_t* g = ggml_row(e, r);
    for (std::int64_t b = 0; b < groups; ++b) {
        ggml_mxfp4_block_to_checkpoint(g + 17 * b, blocks + 16 * b, scales + b);
    }
}

void GgmlExperts::read(bool want_scales, std::uint64_t offset, std::uint64_t n,
                       std::uint8_t* out) const {
    const std::uint64_t per_row = static_cast<std::uint64_t>(groups) * (want_scales ? 1 : 16);
    const auto g = static_cast<std::size_t>(groups);
    std::vector<std::uint8_t> blocks(g * 16), scales(g);
    while (n > 0) {
        const std::uint64_t row = offset / per_row, within = offset % per_row;
        const std::int64_t e = static_cast<std::int64_t>(row) / rows,
                           r = static_cast<std::int64_t>(row) % rows;
        convert_row(e, r, blocks.data(), scales.data());
        const std::uint8_t* src = want_scales ? scales.data() : blocks.data();
        const std::uint64_t take = std::min(n, per_row - within);
        std::memcpy(out, src + within, static_cast<std::size_t>(take));
        out += take;
        offset += take;
        n -= take;
    }
}

std::uint64_t GgmlExperts::expert_bytes() const {
    return static_cast<std::uint64_t>(second ? rows / 2 : rows) * row_bytes();
}

// --- gpt-oss from a GGUF ----------------------------------------------------------------------

namespace {

// GGUF tensor name -> checkpoint (Hugging Face) name, for everything but the experts.
std::optional<std::string> checkpoint_name(const std::string& g) {
    static const std::map<std::string, std::string> global = {
        {"token_embd.weight", "model.embed_tokens.weight"},
        {"output.weight", "lm_head.weight"},
        {"output_norm.weight", "model.norm.weight"},
    };
    if (auto it = global.find(g); it != global.end()) return it->second;
    static const std::map<std::string, std::string> layer = {
        {"attn_norm.weight", "input_layernorm.weight"},
        {"post_attention_norm.weight", "post_attention_layernorm.weight"},
        {"attn_q.weight", "self_attn.q_proj.weight"},
        {"attn_q.bias", "self_attn.q_proj.bias"},
        {"attn_k.weight", "self_attn.k_proj.weight"},
        {"attn_k.bias", "self_attn.k_proj.bias"},
        {"attn_v.weight", "self_attn.v_proj.weight"},
        {"attn_v.bias", "self_attn.v_proj.bias"},
        {"attn_output.weight", "self_attn.o_proj.weight"},
        {"attn_output.bias", "self_attn.o_proj.bias"},
        {"attn_sinks.weight", "self_attn.sinks"},
        {"ffn_gate_inp.weight", "mlp.router.weight"},
        {"ffn_gate_inp.bias", "mlp.router.bias"},
    };
    static const std::regex blk(R"(blk\.(\d+)\.(.+))");
    std::smatch m;
    if (!std::regex_match(g, m, blk)) return std::nullopt;
    auto it = layer.find(m[2].str());
    if (it == layer.end()) return std::nullopt;
    return fmt::format("model.layers.{}.{}", m[1].str(), it->second);
}

bool is_expert_tensor(const std::string& g) {
    static const std::regex r(R"(blk\.\d+\.ffn_(gate|up|down)_exps\.(weight|bias))");
    return std::regex_match(g, r);
}

float f32_at(const std::uint8_t* p, std::uint64_t i) {
    float v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
}

// The gpt-oss config.json that the GGUF's metadata describes; ModelConfig::from_json checks it.
// A GGUF without YaRN metadata parses (rope_scaling_given false); Model::load refuses to run it
// without --plain-rope, as for a config.json.
nlohmann::json config_json(const GgufFile& f, std::int64_t vocab, bool attention_bias) {
    const std::string a = "gpt-oss.";
    auto i = [&](const char* key) { return *f.get_int(a + key, true); };
    nlohmann::json j;
    j["model_type"] = "gpt_oss";
    j["hidden_size"] = i("embedding_length");
    const auto expert_ff = f.get_int(a + "expert_feed_forward_length", false);
    j["intermediate_size"] = expert_ff ? *expert_ff : i("feed_forward_length");
    const std::int64_t layers = i("block_count");
    j["num_hidden_layers"] = layers;
    j["num_local_experts"] = i("expert_count");
    j["num_experts_per_tok"] = i("expert_used_count");
    j["num_attention_heads"] = i("attention.head_count");
    j["num_key_value_heads"] = i("attention.head_count_kv");
    const std::int64_t key_length = i("attention.key_length");
    if (const auto v = f.get_int(a + "attention.value_length", false); v && *v != key_length) {
        fail("{}: attention.key_length {} and value_length {} differ; gpt-oss uses one head_dim",
             f.path().string(), key_length, *v);
    }
    j["head_dim"] = key_length;
    j["vocab_size"] = vocab;
    const std::int64_t window = i("attention.sliding_window");
    j["sliding_window"] = window;
    // GGUF does not store the layer pattern: llama.cpp runs gpt-oss with sliding attention on the
    // even layers and full attention on the odd ones, as gpt-oss's config.json lists them.
    nlohmann::json types = nlohmann::json::array();
    for (std::int64_t l = 0; l >= 0 && l < layers && l < (1 << 20); ++l) {
        types.push_back(l % 2 == 0 ? "sliding_attention" : "full_attention");
    }
    j["layer_types"] = types;
    j["rope_theta"] = *f.get_number(a + "rope.freq_base", true);
    const std::string scaling = f.get_string(a + "rope.scaling.type", false).value_or("none");
    if (scaling == "yarn") {
        j["rope_scaling"] = {
            {"rope_type", "yarn"},
            {"factor", *f.get_number(a + "rope.scaling.factor", true)},
            {"beta_fast", f.get_number(a + "rope.scaling.yarn_beta_fast", false).value_or(32.0)},
            {"beta_slow", f.get_number(a + "rope.scaling.yarn_beta_slow", false).value_or(1.0)},
            // gpt-oss keeps YaRN's band edges unrounded; GGUF has no key for it.
            {"truncate", false},
            {"original_max_position_embeddings",
             *f.get_int(a + "rope.scaling.original_context_length", true)},
        };
    } else if (scaling != "none") {
        fail("{}: rope.scaling.type \"{}\" is not gpt-oss's (\"yarn\")", f.path().string(),
             scaling);
    }
    j["max_position_embeddings"] = i("context_length");
    j["rms_norm_eps"] = *f.get_number(a + "attention.layer_norm_rms_epsilon", true);
    // Not stored in GGUF: a constant of gpt-oss (llama.cpp uses the same value).
    j["swiglu_limit"] = 7.0;
    j["attention_bias"] = attention_bias;
    j["tie_word_embeddings"] = false;
    if (const auto eos = f.get_int("tokenizer.ggml.eos_token_id", false)) j["eos_token_id"] = *eos;
    if (const auto pad = f.get_int("tokenizer.ggml.padding_token_id", false))
        j["pad_token_id"] = *pad;
    return j;
}

}  // namespace

std::shared_ptr<const GgufCheckpoint> GgufCheckpoint::open(const fs::path& path) {
    auto ck = std::make_shared<GgufCheckpoint>();
    for (const fs::path& p : gguf_parts(path)) ck->files.push_back(GgufFile::open(p));
    const GgufFile& meta = ck->files.front();
    const std::string file = path.string();
    const std::string arch = meta.get_string("general.architecture", true).value();
    if (arch != "gpt-oss") {
        fail("{}: architecture \"{}\": Neural runs gpt-oss (general.architecture \"gpt-oss\")",
             file, arch);
    }
    if (ck->files.size() > 1) {
        if (const auto n = meta.get_int("split.count", false);
            n && *n != static_cast<std::int64_t>(ck->files.size())) {
            fail("{}: split.count is {} but the file name says {} parts", file, *n,
                 ck->files.size());
        }
    }
    // Tensors of every part by GGUF name.
    std::map<std::string, const GgufTensor*> all;
    for (const GgufFile& f : ck->files) {
        for (const auto& [name, t] : f.tensors()) {
            if (!all.emplace(name, &t).second) {
                fail("{}: tensor \"{}\" appears in more than one part", f.path().string(), name);
            }
        }
    }
    auto need = [&](const std::string& name) -> const GgufTensor& {
        auto it = all.find(name);
        if (it == all.end()) fail("{}: tensor \"{}\" is missing", file, name);
        return *it->second;
    };
    const GgufTensor& embd = need("token_embd.weight");
    if (embd.ne.size() != 2) {
        fail("{}: token_embd.weight has shape {}, expected 2 dimensions", file, embd.ne_string());
    }
    const bool bias = all.count("blk.0.attn_q.bias") > 0;
    ck->config = ModelConfig::from_json(
        config_json(meta, static_cast<std::int64_t>(std::min<std::uint64_t>(embd.ne[1], 1u << 30)),
                    bias),
        file + " (metadata)", /*allow_plain_rope=*/true);
    const ModelConfig& c = ck->config;

    // Generation: gpt-oss's generation_config.json stops at <|return|>, <|endoftext|> and <|call|>;
    // GGUF stores one eos id, so the other harmony stops are added by name when the vocabulary
    // has them (tokenizer.ggml.tokens).
    if (const auto bos = meta.get_int("tokenizer.ggml.bos_token_id", false)) {
        ck->generation.bos_token_id = static_cast<std::int32_t>(*bos);
    }
    if (const auto pad = meta.get_int("tokenizer.ggml.padding_token_id", false)) {
        ck->generation.pad_token_id = static_cast<std::int32_t>(*pad);
    }
    ck->generation.eos_token_ids = c.eos_token_ids;
    if (meta.find("tokenizer.ggml.tokens") != nullptr) {
        const std::vector<std::string_view> tokens = meta.get_strings("tokenizer.ggml.tokens");
        for (const char* stop : {"<|return|>", "<|endoftext|>", "<|call|>"}) {
            for (std::size_t id = 0; id < tokens.size(); ++id) {
                if (tokens[id] == stop) {
                    auto& ids = ck->generation.eos_token_ids;
                    if (std::find(ids.begin(), ids.end(), static_cast<std::int32_t>(id)) ==
                        ids.end())
                        ids.push_back(static_cast<std::int32_t>(id));
                    break;
                }
            }
        }
    }

    auto add = [&](const std::string& name, DType dtype, std::vector<std::int64_t> shape,
                   const std::uint8_t* data, std::uint64_t nbytes, const GgufTensor& src,
                   const GgmlExperts* ggml) {
        auto t = std::make_unique<TensorInfo>();
        t->name = name;
        t->dtype = dtype;
        t->shape = std::move(shape);
        t->begin = 0;
        t->end = nbytes;
        t->data = data;
        t->file = src.file;
        t->ggml = ggml;
        ck->tensors.push_back(std::move(t));
    };
    auto hf_shape = [](const GgufTensor& t) {
        std::vector<std::int64_t> s;
        for (auto it = t.ne.rbegin(); it != t.ne.rend(); ++it)
            s.push_back(static_cast<std::int64_t>(*it));
        return s;
    };
    // bf16 data of a BF16 (in the mapping) or F32 (rounded once, into ck->buffers) tensor.
    auto bf16_copy = [&](const GgufTensor& t) -> const std::uint8_t* {
        std::uint64_t n = 1;
        for (auto d : t.ne) n *= d;
        if (t.type == static_cast<std::uint32_t>(GgmlType::kBF16)) return t.data;
        std::vector<std::uint8_t> out(static_cast<std::size_t>(2 * n));
        for (std::uint64_t k = 0; k < n; ++k) {
            const float v = f32_at(t.data, k);
            const std::uint16_t b = float_to_bf16(v);
            if (bf16_to_float(b) != v && v == v) ++ck->inexact_f32;
            std::memcpy(out.data() + 2 * k, &b, 2);
        }
        ck->buffers.push_back(std::move(out));
        return ck->buffers.back().data();
    };
    auto dense_type_ok = [&](const GgufTensor& t, const std::string& name) {
        if (t.type != static_cast<std::uint32_t>(GgmlType::kBF16) &&
            t.type != static_cast<std::uint32_t>(GgmlType::kF32)) {
            fail(
                "{}: tensor \"{}\" ({}) is {}: Neural reads the dense part of a gpt-oss GGUF in "
                "BF16 or F32 only (llama.cpp's converter default, file type MXFP4_MOE); use a "
                "GGUF without requantized attention and embedding weights, or the safetensors "
                "checkpoint",
                t.file->string(), t.name, name, ggml_type_name(t.type));
        }
    };

    for (const auto& [gname, t] : all) {
        if (is_expert_tensor(gname)) continue;
        const std::optional<std::string> name = checkpoint_name(gname);
        if (!name) {
            fail("{}: tensor \"{}\" is not part of gpt-oss as Neural reads it", t->file->string(),
                 gname);
        }
        dense_type_ok(*t, *name);
        std::uint64_t n = 1;
        for (auto d : t->ne) n *= d;
        add(*name, DType::kBF16, hf_shape(*t), bf16_copy(*t), 2 * n, *t, nullptr);
    }

    const std::int64_t H = c.hidden_size, I = c.intermediate_size, E = c.num_experts;
    for (int l = 0; l < c.num_layers; ++l) {
        auto mx = [&](const char* proj, std::uint64_t ne0, std::uint64_t ne1) -> const GgufTensor& {
            const GgufTensor& t = need(fmt::format("blk.{}.ffn_{}_exps.weight", l, proj));
            if (t.type != static_cast<std::uint32_t>(GgmlType::kMXFP4)) {
                fail(
                    "{}: tensor \"{}\" is {}: Neural needs gpt-oss's experts in MXFP4 as the model "
                    "ships them (llama.cpp's converter keeps them so by default)",
                    t.file->string(), t.name, ggml_type_name(t.type));
            }
            const std::vector<std::uint64_t> want = {ne0, ne1, static_cast<std::uint64_t>(E)};
            if (t.ne != want) {
                fail("{}: tensor \"{}\" has shape {}, expected [{}, {}, {}] from the metadata",
                     t.file->string(), t.name, t.ne_string(), ne0, ne1, E);
            }
            return t;
        };
        auto bias = [&](const char* proj, std::uint64_t rows) -> const GgufTensor& {
            const GgufTensor& t = need(fmt::format("blk.{}.ffn_{}_exps.bias", l, proj));
            dense_type_ok(t, fmt::format("model.layers.{}.mlp.experts bias", l));
            const std::vector<std::uint64_t> want = {rows, static_cast<std::uint64_t>(E)};
            if (t.ne != want) {
                fail("{}: tensor \"{}\" has shape {}, expected [{}, {}] from the metadata",
                     t.file->string(), t.name, t.ne_string(), rows, E);
            }
            return t;
        };
        auto value = [](const GgufTensor& t, std::uint64_t k) {
            return t.type == static_cast<std::uint32_t>(GgmlType::kBF16)
                       ? load_bf16(t.data, static_cast<std::int64_t>(k))
                       : f32_at(t.data, k);
        };
        const GgufTensor& gate =
            mx("gate", static_cast<std::uint64_t>(H), static_cast<std::uint64_t>(I));
        const GgufTensor& up =
            mx("up", static_cast<std::uint64_t>(H), static_cast<std::uint64_t>(I));
        const GgufTensor& down =
            mx("down", static_cast<std::uint64_t>(I), static_cast<std::uint64_t>(H));
        const GgufTensor& gate_b = bias("gate", static_cast<std::uint64_t>(I));
        const GgufTensor& up_b = bias("up", static_cast<std::uint64_t>(I));
        const GgufTensor& down_b = bias("down", static_cast<std::uint64_t>(H));

        auto gu = std::make_unique<GgmlExperts>();
        gu->first = gate.data;
        gu->second = up.data;
        gu->experts = E;
        gu->rows = 2 * I;
        gu->groups = H / 32;
        auto dn = std::make_unique<GgmlExperts>();
        dn->first = down.data;
        dn->experts = E;
        dn->rows = H;
        dn->groups = I / 32;
        const std::string p = fmt::format("model.layers.{}.mlp.experts.", l);
        add(p + "gate_up_proj_blocks", DType::kU8, {E, 2 * I, H / 32, 16}, nullptr,
            static_cast<std::uint64_t>(E * 2 * I * (H / 32) * 16), gate, gu.get());
        add(p + "gate_up_proj_scales", DType::kU8, {E, 2 * I, H / 32}, nullptr,
            static_cast<std::uint64_t>(E * 2 * I * (H / 32)), gate, gu.get());
        add(p + "down_proj_blocks", DType::kU8, {E, H, I / 32, 16}, nullptr,
            static_cast<std::uint64_t>(E * H * (I / 32) * 16), down, dn.get());
        add(p + "down_proj_scales", DType::kU8, {E, H, I / 32}, nullptr,
            static_cast<std::uint64_t>(E * H * (I / 32)), down, dn.get());
        ck->experts.push_back(std::move(gu));
        ck->experts.push_back(std::move(dn));

        // Biases in bf16, gate and up interleaved like the checkpoint's gate_up_proj_bias.
        std::vector<std::uint8_t> gub(static_cast<std::size_t>(E * 2 * I * 2));
        for (std::int64_t e = 0; e < E; ++e) {
            for (std::int64_t i = 0; i < I; ++i) {
                const std::uint16_t g =
                    float_to_bf16(value(gate_b, static_cast<std::uint64_t>(e * I + i)));
                const std::uint16_t u =
                    float_to_bf16(value(up_b, static_cast<std::uint64_t>(e * I + i)));
                std::memcpy(gub.data() + 2 * (e * 2 * I + 2 * i), &g, 2);
                std::memcpy(gub.data() + 2 * (e * 2 * I + 2 * i + 1), &u, 2);
            }
        }
        ck->buffers.push_back(std::move(gub));
        add(p + "gate_up_proj_bias", DType::kBF16, {E, 2 * I}, ck->buffers.back().data(),
            static_cast<std::uint64_t>(E * 2 * I * 2), gate_b, nullptr);
        add(p + "down_proj_bias", DType::kBF16, {E, H}, bf16_copy(down_b),
            static_cast<std::uint64_t>(E * H * 2), down_b, nullptr);
    }
    if (ck->inexact_f32 > 0) {
        spdlog::warn(
            "{}: {} F32 weight values are not bf16 numbers and were rounded to bf16 (the "
            "dense core computes in bf16)",
            file, ck->inexact_f32);
    }
    // An expert tensor of a layer past block_count: the metadata and the weights disagree.
    for (const auto& [gname, t] : all) {
        if (!is_expert_tensor(gname)) continue;
        // "blk.N.": N has only digits (is_expert_tensor); more than 9 is past any block_count.
        const std::string digits = gname.substr(4, gname.find('.', 4) - 4);
        const long long layer = digits.size() > 9 ? -1 : std::stoll(digits);
        if (layer < 0 || layer >= c.num_layers) {
            fail("{}: tensor \"{}\" belongs to layer {} but block_count is {}", t->file->string(),
                 gname, digits, c.num_layers);
        }
    }
    return ck;
}

}  // namespace neural
