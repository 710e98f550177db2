// `neural fit` and the desktop app's fit step: from the model's shape and what this PC has (free
// VRAM, RAM, cores, AVX-512/AVX2), a plan for the engine's knobs — backend, VRAM budget, expert
// slots and their static share, K/V context, threads, CPU kernel, store format — with one line
// of explanation per choice, and warnings (with the closest workable plan) when the model does not
// fit. Pure computation over ModelConfig + MachineInfo, so it is unit-tested with made-up
// machines; `detect_machine()` fills MachineInfo from the platform layer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "backend/autotune.h"
#include "model/config.h"
#include "runtime/model.h"

namespace neural {

// GPU memory of the hybrid CUDA backend for a shape, allocation by allocation as
// engine/cuda/hybrid/setup.cpp makes them (each rounded up to 256 bytes).
struct GpuMemoryLayout {
    std::uint64_t core_bytes = 0;        // bf16 dense core without the embedding, router outputs
    std::uint64_t kv_bytes = 0;          // fp32 K and V of every layer for `context` positions
    std::uint64_t activation_bytes = 0;  // per-token buffers, logits, slot table
    std::uint64_t reserve_bytes = 0;     // kept free for graphs and the allocator
    std::uint64_t prefill_bytes = 0;     // GPU prefill: prompt rows, block scratch, scratch slots
    std::uint64_t slot_bytes = 0;        // one expert slot (a raw record, 256-byte aligned)
    // Slots that fit in `budget` after everything above (0 when not even the core fits).
    std::int64_t slots_for(std::uint64_t budget) const;
    std::uint64_t fixed_bytes() const {
        return core_bytes + kv_bytes + activation_bytes + reserve_bytes + prefill_bytes;
    }
};
// prefill_block / scratch_slots / kv_ring / prompt_rows: GpuOptions' (0 blocks: prompts token by
// token, no buffers; kv_ring -1: auto, 0: no ring; prompt_rows 0: auto), defaults as GpuOptions'.
GpuMemoryLayout gpu_memory_layout(const ModelConfig& config, std::int64_t context,
                                  int prefill_block = 2048, int scratch_slots = 4, int kv_ring = -1,
                                  int prompt_rows = 0);

// Positions of a prompt the GPU prefill holds at once: its residual stream, the experts' sum and
// the experts' input (three fp32 rows of `hidden` per position in VRAM, one pinned on the host).
// A longer prompt runs in chunks of that many positions, each chunk layer-major like a prompt of
// its own (a non-resident expert is staged once per chunk and layer). `rows` > 0: that many
// (GpuOptions::prompt_rows, at most the context); 0 (auto): the whole context where its rows
// cost at most kPromptRowsShare of the experts' bytes, else kPromptChunkRows. gpt-oss-120b at
// 16,384 positions: 566 MB = 0.9% of 61 GB of experts, whole prompts; gpt-oss-20b: 5.5% of 10.2
// GB, chunks of 4,096, which leaves 425 MB (33 slots, 4.3% of its experts) to the expert slots
// for the decode, where each missed expert costs a CPU or PCIe read (docs/CUDA.md "Prefill").
inline constexpr std::int64_t kPromptChunkRows = 4096;
inline constexpr double kPromptRowsShare = 0.02;
std::int64_t prompt_rows(const ModelConfig& config, std::int64_t context, int rows = 0);

// The GPU context when --context is auto (GpuOptions::context <= 0): kAutoContext positions (at
// most the model's maximum) where the VRAM budget keeps at least min_slots expert slots beside
// them (about 1 GiB of slots or 4% of the experts, whichever is more), else the largest multiple of
// 1024 down to kMinAutoContext that does, else kMinAutoContext. `pool_bytes` >= 0: the pool was
// asked for (--pool / --pool-slots), so the context must leave that much instead. The backend
// (engine/cuda/hybrid/setup.cpp) and plan_fit choose with this one function.
inline constexpr std::int64_t kAutoContext = 16384, kMinAutoContext = 2048;
struct ContextChoice {
    std::int64_t context = 0;
    std::int64_t wanted = 0;     // kAutoContext capped at the model's maximum
    std::int64_t min_slots = 0;  // the slots the context had to leave
    std::string line;            // one line: the choice and why
};
ContextChoice auto_context(const ModelConfig& config, std::uint64_t budget_bytes,
                           int prefill_block = 2048, int scratch_slots = 4, int kv_ring = -1,
                           std::int64_t pool_bytes = -1, int prompt_rows = 0);

// Positions of K/V a sliding-window layer keeps with GpuOptions::kv_ring = `ring`. A ring holds
// the window and, for the GPU prefill, a block of new positions beside it: ring >= window +
// min(prefill_block, context) - 1 (prefill_block 0: token by token, ring >= window); -1 (auto)
// is exactly that, a smaller explicit ring is a clear error. Returns 0 (no ring) for ring 0, a
// ring not smaller than the context, or a model without sliding layers.
int kv_ring_positions(const ModelConfig& config, std::int64_t context, int ring, int prefill_block);

// Pinned host memory of the GPU prefill with GpuOptions' defaults (engine/cuda/hybrid/):
// one record per staging thread and per early-staging buffer (none with a pinned store, whose
// records are copied from the store itself), the prompt's expert input rows and routing, the CPU
// path's rows. RAM the OS cannot page out; neural fit counts it.
std::uint64_t prefill_pinned_bytes(const ModelConfig& config, std::int64_t context,
                                   bool store_pinned = false, int prompt_rows = 0);

struct MachineInfo {
    std::uint64_t ram_total = 0;
    std::uint64_t ram_available = 0;
    int cpus = 1;
    bool avx512 = false;
    bool avx2 = false;
    struct Gpu {
        std::string name;
        std::uint64_t total_bytes = 0;
        std::uint64_t free_bytes = 0;
    };
    std::optional<Gpu> gpu;  // the first usable GPU; none: CPU only
    std::string gpu_why;     // why there is none
    // Bandwidth probes (probe_bandwidth; empty / 0: not measured): RAM read bandwidth by team
    // size, and host-to-device copies from pinned and from pageable memory to the GPU.
    std::vector<autotune::RamPoint> ram_read;
    double pinned_h2d_gb_s = 0;
    double pageable_h2d_gb_s = 0;
};
// This machine (platform/system_info.h, platform/cpu_features.h, the CUDA backend's devices).
MachineInfo detect_machine();
// Measures what MachineInfo's probes hold (about half a second): RAM read bandwidth at
// autotune::thread_candidates(cpus) team sizes, and with a GPU the copy bandwidths.
void probe_bandwidth(MachineInfo& m);

struct FitRequest {
    ModelConfig config;
    // An existing store ("raw" / "packed") and its size; empty: none yet (the plan recommends).
    std::string store_kind;
    std::uint64_t store_bytes = 0;
    // Emulate a smaller machine: caps on what the plan may use (GiB; 0 = what is detected).
    double vram_budget_gib = 0;
    double ram_budget_gib = 0;
};

// RAM a plan keeps free for the OS, the desktop and the app itself (GB, 1e9), counted in
// FitPlan::ram_needed_gb; front ends subtract it to show what the model alone needs.
inline constexpr double kFitRamHeadroomGB = 4.0;

struct FitPlan {
    bool fits = true;     // false: the best plan still falls short (see warnings)
    std::string backend;  // "cuda" or "cpu"
    double vram_budget_gib = 0;
    std::int64_t pool_slots = 0;
    double pool_gib = 0;
    double static_fraction = 0.5;
    std::int64_t context = 0;
    int threads = 1;
    std::string kernel;  // "avx512" / "avx2" / "scalar"
    bool kernel_persistent = true;
    std::string store_format;  // "raw" / "packed"
    double ram_needed_gb = 0;  // experts not in VRAM + dense weights + headroom (GB, 1e9)
    // GPU backend with an existing store (FitRequest::store_kind): give back the RAM of experts
    // that live in VRAM for good (--release-resident 1; measured to cost nothing).
    bool release_resident = false;
    // GPU backend: host RAM for K/V checkpoints (--kv-checkpoints GIB), so a conversation the user
    // switches away from and back to is not re-processed: 1 GiB where RAM has room for it beyond
    // what the plan needs (counted in ram_needed_gb), else 0.
    double kv_checkpoints_gib = 0;
    // GPU backend with a raw store the engine pins under --pin-store auto (at most half the RAM):
    // the whole store stays in RAM (counted in ram_needed_gb) and --release-resident is not planned.
    bool store_pinned = false;
    // GPU backend: what --stream-misses auto will stream (from MachineInfo's probes, the same
    // autotune::choose_stream_share the backend runs at load; 0: nothing or not measured).
    double stream_share = 0;
    std::vector<std::string> reasons;   // one line per choice
    std::vector<std::string> warnings;  // what does not fit and what to do

    // The store the flags name (`neural fit --store FILE`); empty: none yet.
    std::filesystem::path store;

    // The plan as the engine's LoadOptions (the kernel only with a store: the fused kernels read
    // its records), as engine flags (`--backend cuda --vram-budget 11.5 ...`, the settings schema's
    // options::to_flags with --backend first) and as JSON (the desktop app turns it into the
    // default profile).
    LoadOptions load_options() const;
    std::vector<std::string> flags() const;
    nlohmann::json to_json() const;
};

FitPlan plan_fit(const FitRequest& request, const MachineInfo& machine);

}  // namespace neural
