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
#include "cuda/hybrid/vram_plan.h"
#include "model/config.h"
#include "runtime/model.h"

namespace neural {

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
