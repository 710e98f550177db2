#include "store/identity.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/gguf.h"
#include "neural/error.h"
#include "store/format.h"
#include "store/hash.h"

namespace neural::store {

using nlohmann::json;

namespace {
constexpr std::uint64_t kSampleBytes = 4096;
}

std::vector<std::string> expert_tensor_names(const ModelConfig& config) {
    std::vector<std::string> names;
    for (int l = 0; l < config.num_layers; ++l) {
        for (const char* proj : {"gate_up_proj", "down_proj"}) {
            for (const char* part : {"blocks", "scales"}) {
                names.push_back(fmt::format("model.layers.{}.mlp.experts.{}_{}", l, proj, part));
            }
        }
    }
    std::sort(names.begin(), names.end());
    return names;
}

CheckpointId describe_experts(const Checkpoint& ckpt, const ModelConfig& config) {
    CheckpointId id;
    Xxh3 sample;
    for (const std::string& name : expert_tensor_names(config)) {
        const TensorInfo* t = ckpt.find(name);
        if (t == nullptr) fail("{}: expert tensor \"{}\" is missing", ckpt.dir().string(), name);
        ExpertTensorId e;
        e.name = name;
        e.dtype = dtype_name(t->dtype);
        e.shape = t->shape;
        e.nbytes = t->nbytes();
        const std::uint64_t n = std::min(kSampleBytes, e.nbytes);
        if (t->ggml != nullptr) {  // a GGUF: the same bytes, converted to the checkpoint layout
            const bool scales =
                name.size() >= 7 && name.compare(name.size() - 7, 7, "_scales") == 0;
            std::vector<std::uint8_t> buf(static_cast<std::size_t>(n));
            t->ggml->read(scales, 0, n, buf.data());
            sample.update(buf.data(), n);
            t->ggml->read(scales, e.nbytes - n, n, buf.data());
            sample.update(buf.data(), n);
        } else {
            sample.update(t->data, n);
            sample.update(t->data + (e.nbytes - n), n);
        }
        id.tensors.push_back(std::move(e));
    }
    id.sample_hash = sample.digest();
    return id;
}

std::uint64_t combine_hashes(const std::vector<ExpertTensorId>& tensors) {
    std::vector<std::uint8_t> bytes(tensors.size() * 8);
    for (std::size_t i = 0; i < tensors.size(); ++i) put_u64(bytes.data() + 8 * i, tensors[i].hash);
    return xxh3_64(bytes.data(), bytes.size());
}

json to_json(const CheckpointId& id) {
    json tensors = json::array();
    for (const auto& t : id.tensors) {
        tensors.push_back(json::array({t.name, t.dtype, t.shape, t.nbytes, hex64(t.hash)}));
    }
    return json{
        {"tensors", tensors}, {"hash", hex64(id.hash)}, {"sample_hash", hex64(id.sample_hash)}};
}

CheckpointId checkpoint_id_from_json(const json& j, const std::string& source) {
    auto bad = [&](const std::string& what) -> void {
        fail("{}: metadata \"checkpoint\" is malformed: {}", source, what);
    };
    CheckpointId id;
    if (!j.is_object()) bad("not an object");
    auto hash_of = [&](const json& v, const std::string& what) {
        std::optional<std::uint64_t> h;
        if (v.is_string()) h = parse_hex64(v.get<std::string>());
        if (!h) bad(what + " must be 16 hex digits");
        return *h;
    };
    if (!j.contains("hash") || !j.contains("sample_hash") || !j.contains("tensors")) {
        bad("needs \"tensors\", \"hash\" and \"sample_hash\"");
    }
    id.hash = hash_of(j["hash"], "hash");
    id.sample_hash = hash_of(j["sample_hash"], "sample_hash");
    if (!j["tensors"].is_array()) bad("\"tensors\" must be an array");
    for (const json& t : j["tensors"]) {
        if (!t.is_array() || t.size() != 5 || !t[0].is_string() || !t[1].is_string() ||
            !t[2].is_array() || !t[3].is_number_unsigned()) {
            bad("each tensor must be [name, dtype, shape, nbytes, hash]");
        }
        ExpertTensorId e;
        e.name = t[0].get<std::string>();
        e.dtype = t[1].get<std::string>();
        for (const json& d : t[2]) {
            if (!d.is_number_integer()) bad("tensor \"" + e.name + "\" has a non-integer shape");
            e.shape.push_back(d.get<std::int64_t>());
        }
        e.nbytes = t[3].get<std::uint64_t>();
        e.hash = hash_of(t[4], "tensor \"" + e.name + "\" hash");
        id.tensors.push_back(std::move(e));
    }
    return id;
}

}  // namespace neural::store
