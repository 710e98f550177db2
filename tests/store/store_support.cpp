#include "store/store_support.h"

#include <cstring>
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cpu/reference_model.h"
#include "store/format.h"
#include "store/hash.h"
#include "support/fixtures.h"

namespace neural::test {

namespace fs = std::filesystem;
using nlohmann::json;

void write_safetensors(const fs::path& path, const std::vector<TensorData>& tensors) {
    json header = json::object();
    std::uint64_t at = 0;
    for (const auto& t : tensors) {
        header[t.name] = {
            {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {at, at + t.bytes.size()}}};
        at += t.bytes.size();
    }
    const std::string text = header.dump();
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((text.size() >> (8 * i)) & 0xff));
    out << text;
    for (const auto& t : tensors)
        out.write(t.bytes.data(), static_cast<std::streamsize>(t.bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path.string());
}

void write_synthetic_checkpoint(const fs::path& dir, const SynthSpec& s) {
    fs::create_directories(dir);
    std::mt19937 rng(s.seed);
    const std::int64_t H = s.hidden, I = s.intermediate, E = s.experts, V = s.vocab;
    const std::int64_t heads = 1, kv_heads = 1, d = 64, Q = heads * d, KV = kv_heads * d;
    // Small bf16 values: random mantissa, exponent around 2^-4.
    auto bf16 = [&](std::int64_t n) {
        std::string b(static_cast<std::size_t>(2 * n), '\0');
        for (std::int64_t i = 0; i < n; ++i) {
            const std::uint16_t v =
                static_cast<std::uint16_t>(0x3d00 | (rng() & 0x7f) | ((rng() & 1) << 15));
            b[static_cast<std::size_t>(2 * i)] = static_cast<char>(v & 0xff);
            b[static_cast<std::size_t>(2 * i + 1)] = static_cast<char>(v >> 8);
        }
        return b;
    };
    auto bytes = [&](std::int64_t n) {
        std::string b(static_cast<std::size_t>(n), '\0');
        for (auto& c : b) c = static_cast<char>(rng() & 0xff);
        return b;
    };
    auto scales = [&](int layer, int proj, std::int64_t rows, std::int64_t groups) {
        std::string b(static_cast<std::size_t>(E * rows * groups), '\0');
        auto* p = reinterpret_cast<std::uint8_t*>(b.data());
        for (std::int64_t e = 0; e < E; ++e) {
            for (std::int64_t r = 0; r < rows; ++r) {
                std::uint8_t* row = p + (e * rows + r) * groups;
                const int base = 110 + static_cast<int>(rng() % 8);
                for (std::int64_t g = 0; g < groups; ++g)
                    row[g] = static_cast<std::uint8_t>(base + rng() % 16);
                if (s.scale_rows) s.scale_rows(layer, proj, static_cast<int>(e), r, row, groups);
            }
        }
        return b;
    };
    std::vector<TensorData> shard0, shard1;
    shard0.push_back({"model.embed_tokens.weight", "BF16", {V, H}, bf16(V * H)});
    shard0.push_back({"model.norm.weight", "BF16", {H}, bf16(H)});
    shard0.push_back({"lm_head.weight", "BF16", {V, H}, bf16(V * H)});
    for (int l = 0; l < s.layers; ++l) {
        auto& out = l == 0 ? shard0 : shard1;
        const std::string p = fmt::format("model.layers.{}.", l);
        out.push_back({p + "input_layernorm.weight", "BF16", {H}, bf16(H)});
        out.push_back({p + "self_attn.q_proj.weight", "BF16", {Q, H}, bf16(Q * H)});
        out.push_back({p + "self_attn.q_proj.bias", "BF16", {Q}, bf16(Q)});
        out.push_back({p + "self_attn.k_proj.weight", "BF16", {KV, H}, bf16(KV * H)});
        out.push_back({p + "self_attn.k_proj.bias", "BF16", {KV}, bf16(KV)});
        out.push_back({p + "self_attn.v_proj.weight", "BF16", {KV, H}, bf16(KV * H)});
        out.push_back({p + "self_attn.v_proj.bias", "BF16", {KV}, bf16(KV)});
        out.push_back({p + "self_attn.o_proj.weight", "BF16", {H, Q}, bf16(H * Q)});
        out.push_back({p + "self_attn.o_proj.bias", "BF16", {H}, bf16(H)});
        out.push_back({p + "self_attn.sinks", "BF16", {heads}, bf16(heads)});
        out.push_back({p + "post_attention_layernorm.weight", "BF16", {H}, bf16(H)});
        out.push_back({p + "mlp.router.weight", "BF16", {E, H}, bf16(E * H)});
        out.push_back({p + "mlp.router.bias", "BF16", {E}, bf16(E)});
        const std::string x = p + "mlp.experts.";
        out.push_back(
            {x + "gate_up_proj_blocks", "U8", {E, 2 * I, H / 32, 16}, bytes(E * 2 * I * H / 2)});
        out.push_back(
            {x + "gate_up_proj_scales", "U8", {E, 2 * I, H / 32}, scales(l, 0, 2 * I, H / 32)});
        out.push_back({x + "gate_up_proj_bias", "BF16", {E, 2 * I}, bf16(E * 2 * I)});
        out.push_back({x + "down_proj_blocks", "U8", {E, H, I / 32, 16}, bytes(E * H * I / 2)});
        out.push_back({x + "down_proj_scales", "U8", {E, H, I / 32}, scales(l, 1, H, I / 32)});
        out.push_back({x + "down_proj_bias", "BF16", {E, H}, bf16(E * H)});
    }
    json weight_map = json::object();
    std::uint64_t total = 0;
    const char* names[2] = {"model-00000-of-00001.safetensors", "model-00001-of-00001.safetensors"};
    for (int k = 0; k < 2; ++k) {
        for (const auto& t : k == 0 ? shard0 : shard1) {
            weight_map[t.name] = names[k];
            total += t.bytes.size();
        }
        write_safetensors(dir / names[k], k == 0 ? shard0 : shard1);
    }
    write_file(dir / "model.safetensors.index.json",
               json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump());
    json layer_types = json::array();
    for (int l = 0; l < s.layers; ++l)
        layer_types.push_back(l % 2 ? "full_attention" : "sliding_attention");
    json config = read_json(tiny_model_dir() / "config.json");
    config["hidden_size"] = H;
    config["intermediate_size"] = I;
    config["num_hidden_layers"] = s.layers;
    config["num_local_experts"] = E;
    config["num_experts_per_tok"] = std::min<std::int64_t>(E, 2);
    config["experts_per_token"] = std::min<std::int64_t>(E, 2);
    config["num_attention_heads"] = heads;
    config["num_key_value_heads"] = kv_heads;
    config["head_dim"] = d;
    config["vocab_size"] = V;
    config["layer_types"] = layer_types;
    write_file(dir / "config.json", config.dump(2));
}

void copy_fixture(const fs::path& dir) {
    fs::create_directories(dir);
    for (const char* f : {"config.json", "generation_config.json", "tokenizer.json",
                          "tokenizer_config.json", "model.safetensors"}) {
        if (fs::exists(tiny_model_dir() / f)) fs::copy_file(tiny_model_dir() / f, dir / f);
    }
}

void copy_fixture_with_wide_scales(const fs::path& dir) {
    copy_fixture(dir);
    const fs::path path = dir / "model.safetensors";
    std::string bytes = read_file(path);
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i)
        n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
    const json header = json::parse(bytes.substr(8, n));
    const json config = read_json(dir / "config.json");
    const int L = config["num_hidden_layers"], E = config["num_local_experts"];
    const int H = config["hidden_size"], G = config["intermediate_size"].get<int>() / 32;
    for (int l = 0; l < L; ++l) {
        const auto& t = header[fmt::format("model.layers.{}.mlp.experts.down_proj_scales", l)];
        const std::uint64_t begin = 8 + n + t["data_offsets"][0].get<std::uint64_t>();
        for (int e = 0; e < E; ++e) {
            char& s0 =
                bytes[static_cast<std::size_t>(begin + static_cast<std::uint64_t>(e) * H * G)];
            s0 = static_cast<char>(static_cast<unsigned char>(s0) - 20);
        }
    }
    write_file(path, bytes);
}

std::vector<float> golden_logits(Model& model) {
    const json golden = read_json(tiny_model_dir() / "golden.json");
    std::vector<float> all;
    for (const auto& [name, ref] : golden["prompts"].items()) {
        const auto ids = ref["ids"].get<std::vector<TokenId>>();
        KvCache cache = model.new_cache();
        ForwardOptions fo;
        fo.all_logits = true;
        std::vector<float> logits = model.cpu().forward(ids, cache, fo);
        all.insert(all.end(), logits.begin(), logits.end());
        // Three decode steps on the cache too (one token at a time).
        for (int s = 0; s < 3; ++s) {
            // (The "single" prompt has one id: wrap around instead of reading past it.)
            const TokenId next = ids[static_cast<std::size_t>(s) % ids.size()];
            std::vector<float> step =
                model.cpu().forward(std::span<const TokenId>(&next, 1), cache);
            all.insert(all.end(), step.begin(), step.end());
        }
    }
    return all;
}

void patch_file(const fs::path& path, std::uint64_t offset, const std::string& bytes) {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) throw std::runtime_error("cannot patch " + path.string());
}

void reseal_store_header(const fs::path& path) {
    const std::string b = read_file(path);
    const auto* p = reinterpret_cast<const std::uint8_t*>(b.data());
    const store::FixedHeader h = store::FixedHeader::decode(p);
    store::Xxh3 hh;
    hh.update(p, store::FixedHeader::kChecksumOffset);
    hh.update(p + h.meta_offset, h.meta_bytes);
    hh.update(p + h.index_offset, h.record_count * store::kIndexEntryBytes);
    std::string sum(8, '\0');
    store::put_u64(reinterpret_cast<std::uint8_t*>(sum.data()), hh.digest());
    patch_file(path, store::FixedHeader::kChecksumOffset, sum);
}

void reseal_store_record_checksums(const fs::path& path) {
    const std::string b = read_file(path);
    const auto* p = reinterpret_cast<const std::uint8_t*>(b.data());
    const store::FixedHeader h = store::FixedHeader::decode(p);
    for (std::uint64_t i = 0; i < h.record_count; ++i) {
        const std::uint64_t at = h.index_offset + i * store::kIndexEntryBytes;
        store::IndexEntry e = store::IndexEntry::decode(p + at);
        e.checksum = store::xxh3_64(p + e.offset, e.payload_bytes);
        std::string entry(store::kIndexEntryBytes, '\0');
        e.encode(reinterpret_cast<std::uint8_t*>(entry.data()));
        patch_file(path, at, entry);
    }
    reseal_store_header(path);
}

}  // namespace neural::test
