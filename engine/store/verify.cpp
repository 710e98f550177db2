#include "store/verify.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "model/config.h"
#include "model/gguf.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "neural/error.h"
#include "store/hash.h"
#include "store/identity.h"
#include "store/store.h"
#include "store/tasks.h"

namespace neural::store {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

const char* proj_name(Projection p) { return p == Projection::kGateUp ? "gate_up" : "down"; }

// Index of the first differing byte of two ranges of `n` bytes, or nullopt when equal.
std::optional<std::uint64_t> first_difference(const std::uint8_t* a, const std::uint8_t* b,
                                              std::uint64_t n) {
    if (std::memcmp(a, b, static_cast<std::size_t>(n)) == 0) return std::nullopt;
    std::uint64_t i = 0;
    while (a[i] == b[i]) ++i;
    return i;
}

// The first way record (layer, expert) differs from the checkpoint's expert, or nullopt. Raw:
// the four byte ranges; packed: the code bytes and every row's decoded scales.
std::optional<std::string> compare_record(const ExpertStore& s, const LayerWeights& w, int layer,
                                          int expert) {
    const RecordLayout& layout = s.layout();
    const std::uint8_t* payload = s.record(layer, expert).data();
    std::vector<std::uint8_t> buf, ggml_blocks, ggml_scales;
    for (Projection proj : {Projection::kGateUp, Projection::kDown}) {
        const ProjectionLayout& p = layout[proj];
        const Mxfp4Experts& src = proj == Projection::kGateUp ? w.gate_up : w.down;
        const std::uint8_t* blocks = nullptr;
        const std::uint8_t* scales = nullptr;
        if (src.ggml != nullptr) {  // a GGUF: compared in the checkpoint layout
            ggml_blocks.resize(static_cast<std::size_t>(p.blocks_bytes()));
            ggml_scales.resize(static_cast<std::size_t>(p.raw_scales_bytes()));
            src.copy_expert(expert, ggml_blocks.data(), ggml_scales.data());
            blocks = ggml_blocks.data();
            scales = ggml_scales.data();
        } else {
            blocks = src.row_blocks(expert, 0);
            scales = src.row_scales(expert, 0);
        }
        if (auto d = first_difference(payload + p.blocks_offset, blocks, p.blocks_bytes())) {
            return fmt::format(
                "layer {} expert {}: {} code bytes differ from the checkpoint (row "
                "{}, byte {} of the row)",
                layer, expert, proj_name(proj), *d / (p.groups * 16), *d % (p.groups * 16));
        }
        if (layout.kind == StoreKind::kRaw) {
            if (auto d =
                    first_difference(payload + p.scales_offset, scales, p.raw_scales_bytes())) {
                return fmt::format(
                    "layer {} expert {}: {} scales differ from the checkpoint (row "
                    "{}, block {})",
                    layer, expert, proj_name(proj), *d / p.groups, *d % p.groups);
            }
            continue;
        }
        buf.resize(static_cast<std::size_t>(p.groups));
        for (std::int64_t r = 0; r < p.rows; ++r) {
            const std::uint8_t* slot =
                payload + p.scales_offset + static_cast<std::uint64_t>(r) * p.scale_stride;
            const std::uint8_t* got = unpack_scales(slot, p.groups, payload, buf.data());
            if (auto d = first_difference(got, scales + r * p.groups,
                                          static_cast<std::uint64_t>(p.groups))) {
                return fmt::format(
                    "layer {} expert {}: {} row {} scales decode to {} at block {}, "
                    "the checkpoint has {}{}",
                    layer, expert, proj_name(proj), r, got[*d], *d,
                    scales[r * p.groups + static_cast<std::int64_t>(*d)],
                    is_escape(slot) ? " (escaped row)" : "");
            }
        }
    }
    return std::nullopt;
}

}  // namespace

VerifyReport verify_store(const fs::path& path, const VerifyOptions& o) {
    const auto t0 = Clock::now();
    const ExpertStore s = ExpertStore::open(path);
    VerifyReport report;
    report.description = describe_store(s);
    report.kind = s.kind();
    report.file_bytes = s.file_bytes();
    const int L = s.num_layers(), E = s.num_experts();
    report.records = static_cast<std::int64_t>(L) * E;

    std::optional<ModelConfig> config;
    std::optional<Checkpoint> ckpt;
    std::optional<ModelWeights> weights;
    if (!o.checkpoint.empty()) {
        ckpt = Checkpoint::open(o.checkpoint);
        config = checkpoint_config(*ckpt);
        weights = ModelWeights::bind(*ckpt, *config);
        s.check_matches(*ckpt, *config, /*compare_sample=*/false);  // shape: throws
        report.checkpoint_checked = true;
    }

    std::mutex mu;
    std::vector<std::pair<std::int64_t, std::string>> problems;  // (sort key, text)
    auto problem = [&](std::int64_t key, std::string text) {
        std::lock_guard<std::mutex> lock(mu);
        ++report.problem_count;
        problems.emplace_back(key, std::move(text));
    };

    // Tensor hashes of the checkpoint, computed layer by layer next to the record comparisons
    // so each layer's checkpoint bytes are read from disk once.
    std::map<std::string, std::size_t> tensor_index;
    for (std::size_t k = 0; k < s.checkpoint().tensors.size(); ++k) {
        tensor_index[s.checkpoint().tensors[k].name] = k;
    }
    std::vector<ExpertTensorId> computed = s.checkpoint().tensors;

    for (int l = 0; l < L; ++l) {
        std::vector<std::string> layer_tensors;
        if (ckpt) {
            for (const char* proj : {"gate_up_proj", "down_proj"}) {
                for (const char* part : {"blocks", "scales"}) {
                    layer_tensors.push_back(
                        fmt::format("model.layers.{}.mlp.experts.{}_{}", l, proj, part));
                }
            }
        }
        const auto tasks = static_cast<std::int64_t>(E + layer_tensors.size());
        run_tasks(tasks, o.threads, o.cancel, [&](std::int64_t t) {
            const std::int64_t key = static_cast<std::int64_t>(l) * E + t;
            if (t >= E) {
                const std::string& name = layer_tensors[static_cast<std::size_t>(t - E)];
                const TensorInfo* ti = ckpt->find(name);
                const std::size_t k = tensor_index.at(name);
                if (ti->ggml != nullptr) {  // a GGUF: hashed in the checkpoint layout
                    const bool scales = name.compare(name.size() - 7, 7, "_scales") == 0;
                    Xxh3 h;
                    std::vector<std::uint8_t> chunk(1 << 20);
                    for (std::uint64_t at = 0; at < ti->nbytes(); at += chunk.size()) {
                        const std::uint64_t n =
                            std::min<std::uint64_t>(chunk.size(), ti->nbytes() - at);
                        ti->ggml->read(scales, at, n, chunk.data());
                        h.update(chunk.data(), n);
                    }
                    computed[k].hash = h.digest();
                } else {
                    computed[k].hash = xxh3_64(ti->data, static_cast<std::size_t>(ti->nbytes()));
                }
                if (computed[k].hash != s.checkpoint().tensors[k].hash) {
                    problem(key, fmt::format("checkpoint tensor \"{}\" has hash {}, the store was "
                                             "made from one with hash {}: the checkpoint changed "
                                             "or is another one",
                                             name, hex64(computed[k].hash),
                                             hex64(s.checkpoint().tensors[k].hash)));
                }
                return;
            }
            const int e = static_cast<int>(t);
            const IndexEntry& entry = s.entry(l, e);
            const auto rec = s.record(l, e);
            const std::uint64_t sum = xxh3_64(rec.data(), rec.size());
            bool damaged = false;
            if (sum != entry.checksum) {
                problem(key, fmt::format("layer {} expert {}: record checksum mismatch (stored {}, "
                                         "computed {}): the record is damaged",
                                         l, e, hex64(entry.checksum), hex64(sum)));
                damaged = true;
            }
            try {
                s.check_escapes(l, e);
            } catch (const Error& err) {
                if (!damaged) problem(key, fmt::format("layer {} expert {}: {}", l, e, err.what()));
                return;  // decoding would read outside the record
            }
            if (weights) {
                if (auto diff =
                        compare_record(s, weights->layers[static_cast<std::size_t>(l)], l, e)) {
                    problem(key, *diff);
                }
            }
        });
        if (o.on_progress) {
            o.on_progress({static_cast<std::int64_t>(l + 1) * E, report.records,
                           std::chrono::duration<double>(Clock::now() - t0).count()});
        }
    }
    for (int l = 0; l < L; ++l) {
        for (int e = 0; e < E; ++e) {
            const IndexEntry& entry = s.entry(l, e);
            report.payload_bytes += entry.payload_bytes;
            report.escaped_rows +=
                entry.escaped_rows(Projection::kGateUp) + entry.escaped_rows(Projection::kDown);
        }
    }
    if (ckpt && combine_hashes(computed) != s.checkpoint().hash) {
        problem(report.records,
                fmt::format("the checkpoint's expert hash is {}, the store records "
                            "{}: it was made from a different checkpoint",
                            hex64(combine_hashes(computed)), hex64(s.checkpoint().hash)));
    }
    std::stable_sort(problems.begin(), problems.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 0; i < problems.size() && i < o.max_problems; ++i) {
        report.problems.push_back(problems[i].second);
    }
    report.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return report;
}

}  // namespace neural::store
