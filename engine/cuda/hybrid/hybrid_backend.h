// The hybrid CUDA backend (docs/CUDA.md): the dense core in bf16 on the GPU,
// a pool of expert slots in VRAM, and the CPU computing the missed experts from RAM while the GPU
// computes the resident ones. Private to engine/cuda/hybrid/; the rest of the engine sees only
// make_cuda_backend (backend/backend.h).
//
// Per token and layer, one CUDA graph (captured once; the position is read from device memory):
//   [x = embedding | x += previous layer's experts] -> rms_norm -> QKV -> RoPE + K/V store ->
//   split-K attention with sinks -> output projection (+= x) -> rms_norm (also into host-mapped
//   memory) -> router -> top-k + slot lookup (device + host-mapped) -> [event] -> resident
//   experts from their slots.
// The host waits for the event, reads the choices zero-copy, runs the CPU kernel on the misses
// into host-mapped memory (which the next graph adds zero-copy) while the GPU computes the
// resident experts, and does the admission bookkeeping. A tail graph (final norm, lm_head) runs
// only where logits are needed. The graphs read and write the decode activations (DecodeStep's
// buffers) through the pointers they were captured with: the hidden state of a token lives there.
//
// Admission is copy-on-compute (residency.h): a pending candidate's bytes are captured by the CPU
// kernel while it computes the miss (raw store records are slot images), then a copy stream
// uploads them into the victim slot after the victim left the slot table; the table flips on the
// compute stream once the copy has landed. Table updates are ordered on the compute stream
// between graphs, so a graph never sees a half-written slot.
//
// The backend composes owned parts, each with a narrow interface and the state it owns; the
// parts get the device model and their peers through small context structs, never this class:
//   device_model.h       DeviceModel: the shape, the VRAM plan's allocations, the streams, the
//                        dense core and K/V cache in VRAM, the slot pool's memory; ExpertRecords
//   decode_step.h        DecodeStep: one token through the decode graphs, the CPU's misses,
//                        --stream-misses (decode.cpp, decode_graphs.cpp, streamed_misses.cpp)
//   prompt_pipeline.h    PromptPipeline: whole prompts on the GPU, layer- or block-major, with
//                        its scratch slots and staging rings (staging_ring.h)
//   admission.h          Admissions: the slot pool's copy-on-compute uploads, the batch after a
//                        prompt, the initial placement
//   residency.h          Residency: the slot policy (no CUDA)
//   kv_checkpoints.h     KvCheckpoints: host copies of switched-away sequences' K/V (no CUDA)
//   vram_plan.h          the VRAM plan every allocation comes from (no CUDA)
// and the rest of the class, one file per concern:
//   setup.cpp            the parts in the VRAM plan's allocation order, the slot pool, the CPU
//                        side, release
//   store_pin.cpp        --pin-store: registering the store mapping with CUDA
//   records.cpp          expert records (slot images) and the kernels' view of them
//   probes.cpp           load-time probes: copy bandwidth, the CPU team's RAM bandwidth
//   sequence.cpp         forward(): which positions the GPU keeps, sequence switches, K/V
//                        checkpoints
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "cuda/driver/gpu.h"
#include <fmt/format.h>

#include "cpu/kernels/expert_kernel.h"
#include "cpu/team/worker_team.h"
#include "cuda/cuda_check.h"
#include "cuda/expert_gemm.h"
#include "cuda/router.h"
#include "cuda/hybrid/admission.h"
#include "cuda/hybrid/clock.h"
#include "cuda/hybrid/decode_step.h"
#include "cuda/hybrid/device_model.h"
#include "cuda/hybrid/host_buffer.h"
#include "cuda/hybrid/kv_checkpoints.h"
#include "cuda/hybrid/prompt_pipeline.h"
#include "cuda/hybrid/residency.h"
#include "cuda/hybrid/staging_ring.h"
#include "cuda/hybrid/vram_plan.h"
#include "model/weights.h"
#include "neural/error.h"
#include "backend/autotune.h"
#include "backend/backend.h"
#include "backend/forward.h"
#include "backend/kv_cache.h"

namespace neural::hybrid {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Load-time probes (probes.cpp): copy bandwidth from pinned and pageable memory, the CPU team's
// RAM read bandwidth at its size, and the thread choice's line (0 / empty: not measured).
struct LoadProbes {
    double pinned_gb_s = 0, pageable_gb_s = 0, ram_gb_s = 0;
    std::string threads_line;
};

// --pin-store (pin_store): the registered store mapping (null: not pinned), how long the
// registration took, and what the description says about it.
struct StorePinState {
    const void* mapping = nullptr;
    double seconds = 0;
    std::string note;
};

// The sequence whose K/V the GPU holds: its KvCache id, the positions [0, len) valid for it and
// their tokens; positions [0, kv_high) were written since the K/V last started over (the ring
// rule of ring_keeps).
struct ResidentSequence {
    std::uint64_t id = 0;
    std::int64_t len = 0;
    std::vector<std::int32_t> tokens;
    std::int64_t kv_high = 0;
};

class HybridBackend final : public Backend {
public:
    HybridBackend(const GpuBackendInputs& in, const GpuOptions& opt);
    ~HybridBackend() override;

    const char* name() const override { return "cuda"; }
    std::string describe() const override { return description_; }
    std::string experts() const override;
    StorePin store_pin() const override {
        return {pinned_store_.mapping != nullptr, pinned_store_.seconds};
    }
    std::int64_t context_length() const override { return device_.context(); }
    std::vector<DeviceAllocation> device_allocations() const override {
        return device_.allocations();
    }
    // sequence.cpp: which positions the GPU keeps, then prefill and decode.
    std::vector<float> forward(std::span<const TokenId> tokens, KvCache& cache,
                               const ForwardOptions& options) override;

private:
    // setup.cpp
    void init();
    void init_kv_checkpoints();
    void init_decode_step();
    void init_slot_pool();
    void init_cpu_side();
    void init_record_buffers();
    void start_streamed_misses();
    void place_static_experts();
    void init_prompt_pipeline();
    void attach_prompt_pipeline();
    std::string description(const std::string& device_name) const;
    void release();

    // probes.cpp
    void probe_copies();
    int probe_threads();

    // store_pin.cpp
    void pin_store();

    // records.cpp
    void fill_record(int layer, int e, std::uint8_t* dst) const;
    cuda::ExpertShape expert_shape() const;
    cuda::ExpertShape prefill_expert_shape(const LayerWeights& lw) const;
    const std::uint8_t* raw_record(int layer, int e) const;
    cpu::ExpertInput cpu_input(int layer, int e, int k);
    void embed(TokenId id, float* dst) const;
    ExpertRecords records();

    // sequence.cpp
    bool ring_keeps(std::int64_t valid) const;
    // Positions [first, first + count) of one layer's K/V cache (row p, or p % ring) in runs of
    // consecutive rows: copy(device row pointer, index of the run's first position, run length).
    template <typename Copy>
    void for_kv_runs(const LayerDevice& ld, std::int64_t first, std::int64_t count,
                     Copy copy) const {
        for (std::int64_t p = first; p < first + count;) {
            const std::int64_t row = ld.ring > 0 ? p % ld.ring : p;
            const std::int64_t run = ld.ring > 0
                                         ? std::min<std::int64_t>(first + count - p, ld.ring - row)
                                         : first + count - p;
            copy(static_cast<std::size_t>(row) * static_cast<std::size_t>(device_.shape().kv_width),
                 static_cast<std::size_t>(p - first), static_cast<std::size_t>(run));
            p += run;
        }
    }
    void save_kv_rows(const LayerDevice& ld, std::int64_t first, std::int64_t count, float* k,
                      float* v) const;
    void restore_kv_rows(const LayerDevice& ld, std::int64_t first, std::int64_t count,
                         const float* k, const float* v) const;
    std::int64_t switch_sequence(std::uint64_t id, const std::vector<std::int32_t>& seq,
                                 std::int64_t limit);

    GpuBackendInputs in_;
    GpuOptions opt_;
    std::string description_;
    DeviceModel device_;  // the model on the GPU: shape, VRAM plan and allocations, streams
    std::unique_ptr<DecodeStep> decode_;      // one token through the decode graphs
    std::unique_ptr<PromptPipeline> prompt_;  // prompts on the GPU as a whole, or null
    StorePinState pinned_store_;
    LoadProbes probes_;
    ResidentSequence resident_;
    std::unique_ptr<Residency> residency_;
    std::unique_ptr<Admissions> admissions_;      // the slot pool's admissions (admission.h)
    std::unique_ptr<KvCheckpoints> checkpoints_;  // --kv-checkpoints, or null
    // The CPU side: the fused kernel for the misses on its worker team, whether the store's
    // records are slot images, and per choice a buffer a record is assembled into (no store).
    std::unique_ptr<cpu::ExpertKernel> kernel_;
    std::unique_ptr<cpu::WorkerTeam> team_;
    bool raw_store_ = false;
    std::vector<HostBuffer> assembled_;
};

}  // namespace neural::hybrid
