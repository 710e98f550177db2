#include "cli/engine_options.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include <spdlog/spdlog.h>

#include "cli/gpu_options.h"
#include "cpu/parallel.h"
#include "neural/error.h"
#include "platform/memory.h"
#include "platform/prefetch.h"

namespace neural::cli {

const char* const kEngineFlagsHelp =
    R"(  --store FILE             read the experts from this expert store (`neural repack`)
  --kernel NAME            CPU kernels: auto (default: the fastest fused MXFP4 expert and
                           bf16 dense kernels this CPU runs, from --store or the checkpoint),
                           scalar, avx2, avx512, or reference (the plain fp32 forward pass)
  --dense auto|reference   with a fast --kernel: the bf16 dense kernels (auto, default) or
                           the fp32 reference dense layers beside the fused expert kernels
  --kernel-persistent 0|1  run the expert kernels on the persistent worker team DLL
  --kdll PATH              the persistent team library (default: beside the executable)
  --threads N              worker threads (default: all cores; kernels: min(cores, 8))
  --ws-min GIB             keep GIB resident: the Windows working-set minimum; on Linux the
                           dense weights are locked (mlock) up to GIB, within RLIMIT_MEMLOCK
  --prefetch WHAT          start reading weights at load: none (default), dense, all
  --warmup-ram SECONDS     with --store: after loading, read the experts into RAM, hottest
                           first (--ranking FILE, else layer order), for at most SECONDS, on
                           a background thread (0 = off, the default)
  --warmup-sync 0|1        1: wait for --warmup-ram / --lock-ram before the first answer
  --lock-ram GIB           with --store: lock the hottest experts in RAM up to GIB (mlock
                           within RLIMIT_MEMLOCK / VirtualLock); experts in VRAM are skipped
  --release-resident 0|1   with --store and --backend cuda: give back the RAM of experts
                           that live in VRAM for good (static slots)
)";

std::set<std::string> with_engine_flags(std::set<std::string> flags) {
    flags.insert({"--store", "--kernel", "--dense", "--kernel-persistent", "--kdll", "--threads"});
    flags.insert({"--ws-min", "--prefetch"});
    flags.insert({"--warmup-ram", "--warmup-sync", "--lock-ram", "--release-resident"});
    add_gpu_flags(flags);
    return flags;
}

SamplingParams sampling_params(const Args& args) {
    SamplingParams p;
    p.temperature = static_cast<float>(args.get_double("--temperature", 1.0));
    p.top_k = static_cast<int>(args.get_int("--top-k", 0, 0, 1 << 24));
    p.top_p = static_cast<float>(args.get_double("--top-p", 1.0));
    p.min_p = static_cast<float>(args.get_double("--min-p", 0.0));
    p.seed = static_cast<std::uint64_t>(args.get_int("--seed", 0, 0, INT64_MAX));
    p.validate();
    return p;
}

LoadOptions engine_load_options(const Args& args) {
    LoadOptions o;
    o.store = args.get_or("--store", "");
    o.kernel = args.get_or("--kernel", "auto");
    o.dense = args.get_or("--dense", "auto");
    if (o.dense != "auto" && o.dense != "reference") {
        fail("--dense: expected auto or reference, got \"{}\"", o.dense);
    }
    o.kernel_persistent = args.get_int("--kernel-persistent", 0, 0, 1) == 1;
    o.kdll = args.get_or("--kdll", "");
    o.threads = static_cast<int>(args.get_int("--threads", 0, 0, 4096));
    cpu::set_threads(o.threads);
    apply_gpu_flags(args, o);
    memory_flags(args);  // bad memory flags fail before the (slow) load
    apply_ram_flags(args, o);
    return o;
}

void apply_ram_flags(const Args& args, LoadOptions& o) {
    o.warmup_ram_seconds = args.get_double("--warmup-ram", 0.0, 0, 86400, "seconds");
    o.warmup_sync = args.get_int("--warmup-sync", 0, 0, 1) == 1;
    const double gib = args.get_double("--lock-ram", 0.0, 0, 65536, "GiB");
    o.lock_ram_bytes = static_cast<std::uint64_t>(gib * 1073741824.0);
    o.release_resident = args.get_int("--release-resident", 0, 0, 1) == 1;
    const bool any = o.warmup_ram_seconds > 0 || o.lock_ram_bytes > 0 || o.release_resident;
    if (any && o.store.empty()) {
        fail("--warmup-ram, --lock-ram and --release-resident act on the expert store: they need "
             "--store FILE (`neural repack`)");
    }
    if (o.release_resident && o.backend == "cpu") {
        spdlog::warn("--release-resident: nothing to release on the CPU backend (no expert lives "
                     "in VRAM)");
    }
    if (args.has("--warmup-sync") && o.warmup_ram_seconds == 0 && o.lock_ram_bytes == 0) {
        fail("--warmup-sync needs --warmup-ram SECONDS or --lock-ram GIB");
    }
}

MemoryFlags memory_flags(const Args& args) {
    MemoryFlags f;
    const double gib = args.get_double("--ws-min", 0.0, 0, 65536, "GiB");
    f.ws_min_bytes = static_cast<std::uint64_t>(gib * 1073741824.0);
    f.prefetch = args.get_or("--prefetch", "none");
    if (f.prefetch != "none" && f.prefetch != "dense" && f.prefetch != "all") {
        fail("--prefetch: expected none, dense or all, got \"{}\"", f.prefetch);
    }
    return f;
}

namespace {

// MXFP4 expert weights ("model.layers.N.mlp.experts.gate_up_proj_blocks" / "..._scales"): read
// only for the experts a token picks. Everything else (attention, router, norms, embeddings,
// lm_head, expert biases) is read for every token: the dense, hot part.
bool is_expert_weight(const std::string& name) {
    const auto ends_with = [&](const char* s) {
        const std::string suffix(s);
        return name.size() >= suffix.size() &&
               name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    return name.find(".mlp.experts.") != std::string::npos &&
           (ends_with("_blocks") || ends_with("_scales"));
}

}  // namespace

void apply_memory_flags(const MemoryFlags& flags, const Model& model) {
    if (flags.ws_min_bytes == 0 && flags.prefetch == "none") return;
    std::vector<MemoryRange> dense, experts;
    for (const SafetensorsFile& file : model.checkpoint().files()) {
        for (const auto& [name, t] : file.tensors()) {
            (is_expert_weight(name) ? experts : dense).push_back({t.data, t.nbytes()});
        }
    }
    if (const store::ExpertStore* s = model.store(); s != nullptr) {
        experts.clear();  // the store's records are what the experts are read from
        for (int l = 0; l < s->num_layers(); ++l) {
            for (int e = 0; e < s->num_experts(); ++e) {
                const auto record = s->record(l, e);
                experts.push_back({record.data(), record.size()});
            }
        }
    }
    if (flags.prefetch != "none") {
        std::uint64_t bytes = 0;
        auto prefetch = [&](const std::vector<MemoryRange>& ranges) {
            for (const MemoryRange& m : ranges) {
                prefetch_mapped(m.p, m.n);
                bytes += m.n;
            }
        };
        prefetch(dense);
        if (flags.prefetch == "all") prefetch(experts);
        spdlog::info("--prefetch {}: asked the OS to read {} bytes ahead", flags.prefetch, bytes);
    }
    if (flags.ws_min_bytes > 0) {
        const ResidentResult r = keep_resident(flags.ws_min_bytes, dense);
        if (!r.ok) {
            spdlog::warn("--ws-min: not applied: {}", r.message);
        } else if (r.partial) {
            spdlog::warn("--ws-min: only in part: {}", r.message);
        } else {
            spdlog::info("--ws-min: {}", r.message);
        }
    }
}

}  // namespace neural::cli
