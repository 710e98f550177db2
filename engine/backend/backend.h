// The forward-pass backend behind Model::forward: the CPU backend (cpu/cpu_backend.h: the fp32
// reference, experts optionally on the fused kernels) or the hybrid CUDA backend (engine/cuda/:
// GPU dense core + expert slot pool, CPU computes the missed experts). Both take the same
// tokens/KvCache/ForwardOptions (backend/forward.h) and return logits in the same layout, so the
// session, the CLI, the server and the GUI do not know which one runs.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backend/forward.h"
#include "backend/kv_cache.h"

namespace neural {

struct ModelWeights;
struct ModelConfig;
namespace store {
class ExpertStore;
}
namespace telemetry {
struct MoeCounters;
}

// Knobs of the CUDA backend (docs/USER_GUIDE.md "Using the GPU"); LoadOptions carries them.
struct GpuOptions {
    int device = 0;
    // Caps everything the backend allocates on the GPU (GiB, 1 GiB = 2^30 B), so a big GPU can
    // emulate a 12 GiB card; <= 0: the device's free memory minus a 512 MiB margin.
    double vram_budget_gib = 0;
    // Expert slot pool (GiB); < 0: what the budget leaves after the core, the K/V cache and the
    // staging buffers. pool_slots >= 0 overrides it with an exact slot count (tests, emulation).
    double pool_gib = -1;
    int pool_slots = -1;
    // Share of the slots that are static (filled from the ranking or the learned statistics,
    // never evicted). Without either no slot is static (docs/CUDA.md "Residency").
    double static_fraction = 0.5;
    // Warm-up ranking JSON {"layers": [[count per expert], ...]} (hot experts first); empty:
    // none (the learned statistics' ranking, else none: every slot starts with a placeholder,
    // the same share of every layer, that the first prompt and misses replace; frozen residency
    // takes experts in index order).
    std::filesystem::path ranking;
    // Admission: every refresh_every decode tokens up to refresh_m missed experts whose score
    // beats an adaptive slot's are admitted (copy-on-compute); 0 freezes residency.
    int refresh_every = 8;
    int refresh_m = 4;
    // Weight of a prompt token's routing in the admission scores (decode tokens weigh 1).
    double prefill_weight = 0.25;
    // K/V positions the GPU cache holds (<= the model's maximum); <= 0 (auto): up to
    // kAutoContext (16,384), fewer where the VRAM plan would not keep enough expert slots
    // (cuda/hybrid/vram_plan.h auto_context).
    std::int64_t context = 0;

    // Prompts (docs/CUDA.md "Prefill"): "layer" runs each layer over every block of the prompt
    // before the next layer (a staged expert crosses PCIe once per layer), "block" runs each block
    // through all layers (same results bit for bit), "token" the decode path token by token (the
    // reference). Blocks hold up to prefill_block tokens.
    std::string prefill_order = "layer";
    int prefill_block = 2048;
    // Prompt positions the GPU holds at once (cuda/hybrid/vram_plan.h prompt_rows): a longer prompt runs in
    // chunks of that many, each layer-major. 0 (auto): the whole context where its rows cost at
    // most 2% of the experts' bytes, else 4,096.
    int prompt_rows = 0;
    // VRAM slots that non-resident experts with many prompt tokens are staged into, and the
    // producer threads (each with its pinned buffer) that copy their records from RAM.
    int scratch_slots = 4;
    int staging_threads = 8;
    // Non-resident experts with at most this many tokens of a layer run on the CPU (multi-token
    // kernel) instead of being staged; 0: always staged. 6 is the fastest value measured on the
    // 120b shape's prompts (docs/BENCHMARKS.md "GPU prefill"); at most
    // cpu::ExpertKernel::kMaxTokens (16).
    int prefill_cpu_tokens = 6;
    // Layer-major prompts of more than one block: up to this many of a layer's experts that the
    // first block's routing already sends to staging are copied into their own pinned buffers
    // while the GPU runs the other blocks' dense parts (0: off). Costs this many records of
    // pinned host memory (13.2 MB each at the gpt-oss shapes). At most kMaxPrefillEarly.
    int prefill_early = 32;
    // Grouped GEMM (--grouped-gemm 1): a layer's resident experts go in groups of up to 3 per
    // launch (cuda/expert_gemm.h), the same bits as one launch per expert; staged experts run
    // alone. Only for prompts that are one block of 1,024-4,096 new tokens (kGroupedGemmMin/Max;
    // docs/CUDA.md "A prompt"). Off by default: measured gains are a few percent
    // (docs/BENCHMARKS.md "Grouped GEMM").
    bool grouped_gemm = false;
    // fp16 expert GEMMs (--prefill-fp16 1): prompts' GPU experts multiply fp16 operands (11 bits
    // of each activation, one tensor-core product) instead of bf16 hi + lo halves (~16 bits, two
    // products): faster expert GEMMs (docs/BENCHMARKS.md "Pinned store, two expert streams, fp16
    // prompt experts"). Off by default: on the tiny fixture the fp16 rounding moves logits by up
    // to 1.0 against golden.json's 5e-2 (docs/CUDA.md "Numerics"). Activations are scaled by
    // powers of two from the model's bounds; a layer without a finite bound keeps hi + lo. Decode
    // does not use these kernels.
    bool prefill_fp16 = false;
    // Expert streams (--expert-streams 1|2): with 2 (the default), a prompt's GPU experts run
    // their gate_up on a second stream beside the previous expert's down (a second block of act
    // rows; the QKV rows at gpt-oss's shapes), so launches that fill part of the GPU overlap; the
    // same bits as 1, where each expert's two launches run one after the other (tested). Grouped
    // GEMM layers use one stream.
    int expert_streams = 2;
    // K/V ring (--kv-ring N): sliding-window layers keep only their last N positions of K/V (full
    // layers keep the whole context). -1 (default, "auto"): the smallest ring, window + prefill
    // block - 1 (2175 for gpt-oss with blocks of 2048; none when that is not smaller than the
    // context); 0: every layer keeps the whole context. An explicit N must be at least that
    // smallest ring. kv_ring_positions() in cuda/hybrid/vram_plan.h checks and sizes it. Outputs are the same
    // bits with or without a ring (tested). K/V checkpoints of a ring keep the rings' last
    // positions (cuda/hybrid/kv_checkpoints.h).
    int kv_ring = -1;
    // Host memory for K/V checkpoints (cuda/hybrid/kv_checkpoints.h): when the GPU switches to
    // another sequence, the outgoing one's K/V is kept here so it, or one sharing its prefix, need
    // not be re-processed; positions another sequence shares with the resident one stay in VRAM.
    // 0 (default): off, a switch re-processes the incoming sequence (RAM is what a 64 GB PC running
    // the 120b model has least of: docs/USER_GUIDE.md).
    double kv_checkpoint_gib = 0;
    // Pinned store (--pin-store auto|0|1, docs/CUDA.md "Pinned store"): with a raw store the backend
    // registers the store's whole mapping with CUDA at load (page-locked, read-only), and a prompt's
    // staged experts are copied to the GPU straight from it instead of through the staging threads'
    // pinned buffers (their host memcpy is slower than pinned DMA and bounded the 20b prompts:
    // docs/BENCHMARKS.md "GPU prefill"). The whole store then stays in RAM while the model is loaded
    // (--release-resident gives nothing back). "auto": when the store is at most half of the
    // physical RAM (pin_store_by_default); "1": always tried; "0": never. A registration that fails
    // warns and keeps the staging threads.
    std::string pin_store = "auto";
    // Streamed misses (--stream-misses auto|0|1, docs/CUDA.md "Streamed misses"): with the store
    // pinned, a share of each decode layer's missed experts is copied by DMA from the store
    // mapping into prefill's scratch slots and computed on the GPU while the CPU computes the
    // rest: RAM is then read by the CPU and by the GPU's copy engine side by side. -1 (auto, the
    // default): the share that balances the two sides from the load-time probes (the CPU team's
    // RAM read bandwidth, pinned copy bandwidth: backend/autotune.h), none where it is small,
    // refined while decoding from which side finished first; 1: --stream-share, else half, fixed;
    // 0: every miss on the CPU. Which misses stream depends on the routing, the residency and the
    // share only, so a fixed share (1, --stream-share, or frozen residency) is deterministic.
    int stream_misses = -1;
    // The share of misses streamed (--stream-share F, 0..1); < 0 (auto): from the probes.
    double stream_share = -1;
    // Split misses (--split-misses 1, the default): the share is met in bytes within each layer,
    // the GPU streaming whole misses and, for the fraction left, the last neurons of one more
    // miss while the CPU computes that expert's first neurons (split_streamed_choices). A layer
    // with one miss then takes about half of that expert's time on each side instead of all of it
    // on one. 0: whole misses only, the fraction carried over the token's layers
    // (streamed_choices, the reference).
    bool split_misses = true;
    // After a prompt on the GPU (--prompt-admit N): the prompt's most-used experts fill the free
    // adaptive slots, and up to N more replace colder adaptive experts (Residency::
    // prompt_admissions), uploaded in one batch before decode starts; 0: off. Nothing is admitted
    // with frozen residency.
    int prompt_admit = 32;
    // Fused decode graphs (--fused-decode 1, the default; docs/CUDA.md "A token"): a layer's
    // dense part runs as 4 launches (x += experts; norm + QKV + RoPE; attention; output
    // projection + norm + router + top-k: cuda/decode_fused.h) instead of 10, computed with the
    // same device functions (the same bits expected). 0: one kernel per step, the reference.
    bool fused_decode = true;
    // Timing events in the decode graphs: the GPU's own time per token (BackendCounters::gpu_dense_ns
    // ..), which `neural bench` turns into decode bounds. Set by the bench only; a device whose graphs
    // refuse timing events gets plain ones and no GPU times.
    bool time_gpu = false;
};

inline constexpr int kMaxPrefillEarly = 1024;
inline constexpr int kGroupedGemmMin = 1024,
                     kGroupedGemmMax = 4096;  // new tokens of a grouped prompt

// The values GpuOptions::prefill_order takes (every parser of the flag checks with this).
inline bool is_prefill_order(std::string_view order) {
    return order == "layer" || order == "block" || order == "token";
}

// The values GpuOptions::pin_store takes (every parser of the flag checks with this).
inline bool is_pin_store(std::string_view mode) {
    return mode == "auto" || mode == "0" || mode == "1";
}

// --pin-store auto: pin a raw store of `store_bytes` on a machine with `ram_bytes` of physical
// memory (0: unknown, never) when it takes at most half of it, so the rest of the RAM stays for
// everything else. On a 64 GB PC that pins gpt-oss-20b's store (~13 GB), not 120b's (~61 GB).
inline bool pin_store_by_default(std::uint64_t store_bytes, std::uint64_t ram_bytes) {
    return ram_bytes > 0 && store_bytes <= ram_bytes / 2;
}

// --stream-misses: which of a decode layer's router choices the GPU streams. slot[k] < 0 is a
// miss; of the n misses, share * n plus what earlier layers of the token left over (`carry`,
// 0 at the start of a token) rounded down, at most max_streamed (the scratch slots), in choice
// order, skipping those the CPU must compute to capture them for admission (admit[k]). The
// fraction not streamed stays in `carry` (at most 1), so a share of 0.3 streams about 3 of 10
// misses over a token's layers. Writes the chosen choices to `out` (room for slot.size()) and
// returns how many. Depends on nothing but its arguments, so a fixed share stays deterministic.
inline int streamed_choices(std::span<const int> slot, std::span<const bool> admit,
                            int max_streamed, double share, double& carry, int* out) {
    int misses = 0;
    for (const int s : slot) misses += s < 0 ? 1 : 0;
    carry += std::clamp(share, 0.0, 1.0) * misses;
    const int want =
        std::min(static_cast<int>(carry + 1e-9), std::min(misses, std::max(max_streamed, 0)));
    int n = 0;
    for (std::size_t k = 0; k < slot.size() && n < want; ++k) {
        if (slot[k] < 0 && !admit[k]) out[n++] = static_cast<int>(k);
    }
    carry = std::clamp(carry - n, 0.0, 1.0);
    return n;
}

// --split-misses: which of a decode layer's router choices the GPU streams, with one of them
// split. Of the n misses (slot[k] < 0) the GPU's part is share * n experts' worth: the first
// floor of that in choice order stream whole, and the fraction f left streams as the last
// round(f * I / 32) * 32 neurons of the next miss (`split`; `split_neurons` of `intermediate`),
// whose first neurons the CPU computes. Misses the CPU must capture for admission (admit[k])
// are neither streamed nor split; at most max_streamed choices use the scratch slots (a split
// one included); a fraction under 1/8 of an expert is not split (the copies' fixed cost), and
// one that rounds to the whole expert streams it whole. Writes the whole choices to `out` (room
// for slot.size()). Depends on nothing but its arguments, so a fixed share is deterministic.
struct StreamSplit {
    int whole = 0;          // out[0, whole): streamed whole
    int split = -1;         // the choice split between the CPU and the GPU; -1: none
    int split_neurons = 0;  // the GPU's part of it: its last split_neurons neurons
};
inline StreamSplit split_streamed_choices(std::span<const int> slot, std::span<const bool> admit,
                                          int max_streamed, double share, int intermediate,
                                          int* out) {
    StreamSplit r;
    int misses = 0;
    for (const int s : slot) misses += s < 0 ? 1 : 0;
    const int cap = std::max(max_streamed, 0);
    const double t = std::clamp(share, 0.0, 1.0) * misses;
    int whole = static_cast<int>(t + 1e-9);
    const int blocks = intermediate / 32;
    int part = static_cast<int>(std::lround((t - whole) * blocks));  // the fraction, in blocks
    if (part >= blocks) {
        ++whole;
        part = 0;
    }
    if (part * 8 < blocks) part = 0;  // under 1/8 of an expert: not worth the copies
    for (std::size_t k = 0; k < slot.size(); ++k) {
        if (slot[k] >= 0 || admit[k]) continue;
        if (r.whole < std::min(whole, cap)) {
            out[r.whole++] = static_cast<int>(k);
        } else if (part > 0 && r.whole == whole && r.whole < cap) {
            r.split = static_cast<int>(k);
            r.split_neurons = part * 32;
            break;
        } else {
            break;
        }
    }
    return r;
}

// Extra per-token phases of the hybrid backend, read as before/after deltas like MoeCounters.
struct BackendCounters {
    std::atomic<std::uint64_t> gpu_wait_ns{0};      // host waiting for the GPU (router, tail)
    std::atomic<std::uint64_t> graph_submit_ns{0};  // cudaGraphLaunch calls
    std::atomic<std::uint64_t> admission_ns{0};     // capture bookkeeping, upload enqueue, flips
    std::atomic<std::uint64_t> experts_hit{0};      // (layer, expert) computed from VRAM slots
    std::atomic<std::uint64_t> experts_streamed{
        0};  // misses copied from the pinned store and computed on the GPU
    // Misses split between the CPU and the GPU (--split-misses; also counted as CPU misses).
    std::atomic<std::uint64_t> experts_split{0};
    std::atomic<std::uint64_t> admissions{0};  // slots filled during decode
    // Experts a prompt's routing sent to the GPU (--prompt-admit), counted when their copies are
    // issued; `admissions` counts them again once they landed (the next poll).
    std::atomic<std::uint64_t> prompt_admissions{0};
    // GPU time of decode tokens (timing events in the layer graphs; 0 where the device's graphs
    // cannot hold timing events, and for tokens with no logits): the dense part of every layer
    // (attention .. router), the resident experts after it, the part of those on layers that gave
    // the CPU nothing to do (no overlap possible there), and the tail (norm, lm_head).
    std::atomic<std::uint64_t> gpu_dense_ns{0};
    std::atomic<std::uint64_t> gpu_experts_ns{0};
    std::atomic<std::uint64_t> gpu_experts_alone_ns{0};
    std::atomic<std::uint64_t> gpu_tail_ns{0};
    // Prefill (whole prompts on the GPU): tokens, wall time and its parts.
    std::atomic<std::uint64_t> prefill_tokens{0};
    std::atomic<std::uint64_t> prefill_ns{0};
    std::atomic<std::uint64_t> prefill_launch_ns{0};    // host enqueuing kernels and copies
    std::atomic<std::uint64_t> prefill_route_ns{0};     // waiting for a layer's routing (sync)
    std::atomic<std::uint64_t> prefill_staging_ns{0};   // waiting for the producers (RAM -> pinned)
    std::atomic<std::uint64_t> prefill_cpu_ns{0};       // CPU multi-token experts (worker thread)
    std::atomic<std::uint64_t> prefill_cpu_wait_ns{0};  // main thread waiting for that worker
    std::atomic<std::uint64_t> prefill_staged{0};       // records copied to scratch slots
    std::atomic<std::uint64_t> prefill_staged_bytes{0};
    std::atomic<std::uint64_t> prefill_resident{0};    // (layer, expert) groups from VRAM slots
    std::atomic<std::uint64_t> prefill_cpu_groups{0};  // (layer, expert) groups on the CPU
    std::atomic<std::uint64_t> prefill_early{0};    // of the staged: from the first block's routing
    std::atomic<std::uint64_t> prefill_grouped{0};  // grouped GEMM launches (--grouped-gemm)
    std::atomic<std::uint64_t> prefill_chunks{0};   // prompt chunks (--prompt-rows)
    // Sequence switches: positions saved to / restored from K/V checkpoints, positions kept in
    // VRAM because the incoming sequence shares them with the outgoing one, positions re-processed.
    std::atomic<std::uint64_t> kv_saved{0};
    std::atomic<std::uint64_t> kv_restored{0};
    std::atomic<std::uint64_t> kv_reused{0};
    std::atomic<std::uint64_t> kv_reprocessed{0};

    struct Snapshot {
        std::uint64_t gpu_wait_ns = 0, graph_submit_ns = 0, admission_ns = 0, experts_hit = 0,
                      admissions = 0;
        std::uint64_t prefill_tokens = 0, prefill_ns = 0, prefill_launch_ns = 0,
                      prefill_route_ns = 0, prefill_staging_ns = 0, prefill_cpu_ns = 0,
                      prefill_cpu_wait_ns = 0, prefill_staged = 0, prefill_staged_bytes = 0,
                      prefill_resident = 0, prefill_cpu_groups = 0, prefill_early = 0,
                      prefill_grouped = 0;
        std::uint64_t experts_streamed = 0, experts_split = 0;
        std::uint64_t gpu_dense_ns = 0, gpu_experts_ns = 0, gpu_experts_alone_ns = 0,
                      gpu_tail_ns = 0;
    };
    Snapshot snapshot() const {
        constexpr auto r = std::memory_order_relaxed;
        return {
            gpu_wait_ns.load(r),        graph_submit_ns.load(r),      admission_ns.load(r),
            experts_hit.load(r),        admissions.load(r),           prefill_tokens.load(r),
            prefill_ns.load(r),         prefill_launch_ns.load(r),    prefill_route_ns.load(r),
            prefill_staging_ns.load(r), prefill_cpu_ns.load(r),       prefill_cpu_wait_ns.load(r),
            prefill_staged.load(r),     prefill_staged_bytes.load(r), prefill_resident.load(r),
            prefill_cpu_groups.load(r), prefill_early.load(r),        prefill_grouped.load(r),
            experts_streamed.load(r),   experts_split.load(r),        gpu_dense_ns.load(r),
            gpu_experts_ns.load(r),     gpu_experts_alone_ns.load(r), gpu_tail_ns.load(r)};
    }
};

// What the backend did with the expert store's mapping at load (GpuOptions::pin_store).
struct StorePin {
    bool pinned = false;  // registered with CUDA: prompts copy staged experts straight from it
    double seconds = 0;   // the registration call (also when it failed; 0 when not tried)
};

// Device memory a backend allocated, by the name of its plan's row: `count` allocations, `bytes`
// together (the CUDA backend: the rows of cuda/hybrid/vram_plan.h, recorded as it allocates them).
struct DeviceAllocation {
    std::string name;
    std::uint64_t count = 0;
    std::uint64_t bytes = 0;
};

class Backend {
public:
    virtual ~Backend() = default;
    virtual const char* name() const = 0;  // "cpu" / "cuda"
    virtual std::string describe() const = 0;
    // How the CPU computes experts: the fused kernel, its team and threads (cpu::StoreMoe's and the
    // CUDA backend's misses), or "reference path" (the plain decode-then-dot loop).
    virtual std::string experts() const = 0;
    virtual StorePin store_pin() const { return {}; }
    // Positions one sequence may hold (the GPU's K/V cache: --context); 0: the model's maximum.
    virtual std::int64_t context_length() const { return 0; }
    // What it allocated on the device (empty: nothing, as on the CPU backend).
    virtual std::vector<DeviceAllocation> device_allocations() const { return {}; }
    // Whether a position's K/V are the same bits whichever pass computed it (a prompt pass of
    // any split or a decode step), given the same ForwardOptions::context_end: true where
    // prompts run on decode's kernels, and on the CPU's context prompt path (which decides by
    // position). False where every prompt pass takes other bits (the CPU's bf16x2, bf16 and
    // int8 prompt kernels by name): then a session reuses a cached prefix only up to the first
    // position a decode step computed (runtime/session.h), so a reply does not depend on the
    // cache.
    virtual bool prompt_matches_decode() const { return true; }
    // Same contract as CpuModel::forward. One forward pass at a time (the engine thread). Not
    // const: a backend may keep state across calls (the GPU's K/V of the resident sequence, its
    // expert slots).
    virtual std::vector<float> forward(std::span<const TokenId> tokens, KvCache& cache,
                                       const ForwardOptions& options) = 0;
};

// What the CUDA backend needs from the loaded model.
struct GpuBackendInputs {
    const ModelConfig* config = nullptr;
    const ModelWeights* weights = nullptr;
    const store::ExpertStore* store = nullptr;  // nullptr: experts from the checkpoint tensors
    std::string kernel = "auto";                // CPU kernel for the misses (see LoadOptions)
    bool kernel_persistent = false;
    std::filesystem::path kdll;
    int threads = 0;
    telemetry::MoeCounters* moe = nullptr;
    BackendCounters* counters = nullptr;
    // The learned expert statistics' ranking (runtime/routing_stats.h) for the static slots
    // when GpuOptions::ranking names no file; empty: none.
    std::vector<std::vector<double>> learned_ranking;
};

struct GpuDevice {
    int index = 0;
    std::string name;
    int compute_major = 0;  // the compute capability, e.g. 9.0
    int compute_minor = 0;
    std::uint64_t total_bytes = 0;
    std::uint64_t free_bytes = 0;
};
// The usable GPUs (empty without a CUDA build, driver or device; `why` says which).
std::vector<GpuDevice> gpu_devices(std::string* why);

// Host-to-device copy bandwidth to GPU `device` (GB/s, 1e9 bytes / s; the best of `passes`
// copies of `bytes`) from pinned and from pageable host memory; 0 with `why` where it cannot run.
struct CopyBandwidth {
    double pinned_gb_s = 0;
    double pageable_gb_s = 0;
    std::string why;
};
CopyBandwidth copy_bandwidth(int device, std::size_t bytes, int passes);

// True when this build has the CUDA backend and a usable GPU; `why` says why not.
bool cuda_backend_available(std::string* why);
// The hybrid CUDA backend. Throws neural::Error when it cannot start (no CUDA in this build, no
// GPU, the core does not fit the VRAM budget, ...), naming the reason.
std::unique_ptr<Backend> make_cuda_backend(const GpuBackendInputs& inputs, const GpuOptions& gpu);

}  // namespace neural
