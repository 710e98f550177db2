// The prompt pipeline (docs/CUDA.md "Prefill"), an owned part of the hybrid backend: whole prompts
// on the GPU, layer-major (each layer over every block of the prompt) or block-major; per layer
// the dense part on tensor cores, then each expert once over its tokens, from its VRAM slot,
// staged through the staging ring into a scratch slot (early, from the first block's routing,
// with --prefill-early), or on the CPU. It owns the prompt-sized buffers (the VRAM plan's prefill
// rows, allocated through the backend), the scratch slots, the staging rings and their events.
//
// The backend hands it references to what it reads: the device model (device_model.h) at
// construction, the slot policy, the admissions and the CPU side once they exist (attach), and
// per prompt the decode tail that turns a row into logits (PromptTail).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/forward.h"
#include "cpu/kernels/expert_kernel.h"
#include "cpu/team/worker_team.h"
#include "cuda/driver/gpu.h"
#include "cuda/expert_gemm.h"
#include "cuda/hybrid/admission.h"
#include "cuda/hybrid/device_model.h"
#include "cuda/hybrid/host_buffer.h"
#include "cuda/hybrid/residency.h"
#include "cuda/hybrid/staging_ring.h"
#include "cuda/hybrid/vram_plan.h"
#include "model/config.h"

namespace neural::hybrid {

// The backend's other parts a prompt uses (attach): the slot policy, the admissions, the CPU
// side (kernel, team, the store whose records it checks), the counters, the pinned store's
// mapping (null: not pinned; its records need no staging ring), the streamed misses' copy
// stream (null: none), and the expert records and embeddings (records.cpp).
struct PromptPeers {
    Residency* residency = nullptr;
    Admissions* admissions = nullptr;
    cpu::ExpertKernel* kernel = nullptr;
    cpu::WorkerTeam* team = nullptr;
    const store::ExpertStore* store = nullptr;
    BackendCounters* counters = nullptr;
    const void* pinned_store = nullptr;
    CUstream streamed_misses = nullptr;
    ExpertRecords records;
};

// The decode tail a prompt's logits rows go through: its input row x on the device, the graph
// (final norm, lm_head of the row in x) and the logits it leaves in host-mapped memory.
struct PromptTail {
    float* x = nullptr;
    CUgraphExec graph = nullptr;
    const void* logits = nullptr;
};

class PromptPipeline {
public:
    // Whether prompts run on the GPU as a whole with these options (else token by token): checks
    // --prefill-order, warns where the model's head_dim has no prompt kernels.
    static bool wanted(const GpuOptions& options, const ModelShape& shape);
    // Allocates the VRAM plan's prefill rows from the device model (the plan checked
    // --prefill-block, --scratch and --prompt-rows), which it reads while it lives (the shape,
    // the layers, the streams, the slot pool); `expert_shapes` per layer.
    PromptPipeline(const ModelConfig& config, const GpuOptions& options, DeviceModel& device,
                   std::vector<cuda::ExpertShape> expert_shapes);
    ~PromptPipeline();
    PromptPipeline(const PromptPipeline&) = delete;
    PromptPipeline& operator=(const PromptPipeline&) = delete;

    // The backend's other parts, and the staging rings (none for a pinned store).
    void attach(PromptPeers peers);

    // Runs `work` at positions start .. start + n - 1, writing the logits of rows first_out ..
    // n - 1 to `logits_out` ([n - first_out, V]); the observer sees the routing of positions >=
    // observe_from. `held` (the positions the GPU's K/V holds) grows as chunks complete.
    void run(const std::vector<TokenId>& work, std::int64_t start, std::int64_t first_out,
             float* logits_out, std::int64_t observe_from, RouterObserver* observer,
             const std::atomic<bool>* cancel, const PromptTail& tail, std::int64_t& held);
    // After an error on the main thread: the rings stop handing out the prompt's jobs.
    void abandon();
    // Waits for the second expert stream (--expert-streams 2).
    void synchronize();

    // The scratch slots (the streamed misses use them between prompts).
    std::uint8_t* scratch() const { return scratch_; }
    // What the backend's description says about prompts.
    std::string description() const;

private:
    struct Stats {
        std::uint64_t launch_ns = 0, route_ns = 0, staging_ns = 0, cpu_ns = 0, cpu_wait_ns = 0;
        std::uint64_t staged = 0, resident = 0, cpu_groups = 0, early = 0, grouped = 0;
    };
    // Where a prompt layer's expert runs (place_experts).
    enum class Place { none, slot, staged, cpu };
    // A prompt layer's experts over a range of rows (group_by_expert, place_experts): tokens per
    // expert; its entries offset[e] .. offset[e + 1] of the grouped entries (entries_host, on
    // the device in entries_); where each runs; the ring's jobs and the CPU's experts in order.
    struct ExpertGroups {
        std::vector<int> count, offset;
        std::vector<Place> where;
        std::vector<std::pair<int, int>> staged;
        std::vector<int> cpu_experts;
    };
    // The CPU's experts of a prompt layer on their worker thread (start_cpu_experts): the job
    // (its time in ns) and the per-token starts of its output rows on the device.
    struct CpuExperts {
        std::future<std::uint64_t> job;
        const int* start_dev = nullptr;
    };

    void allocate(DeviceModel& device);
    void release();
    void run_chunk(std::span<const TokenId> work, std::int64_t start, std::int64_t first_out,
                   float* logits_out, std::int64_t observe_from, RouterObserver* observer,
                   const PromptTail& tail, Stats& st);
    std::vector<int> stage_early(int l, int rows0, Stats& st);
    void dense_rows(int l, int b0, int rows, std::int64_t start, Stats& st);
    void expert_rows(int l, int b0, int rows, std::int64_t start, std::int64_t observe_from,
                     RouterObserver* observer, Stats& st, const std::vector<int>& early_of,
                     bool grouped);
    void route_rows_to_host(int b0, int rows, Stats& st);
    ExpertGroups group_by_expert(int l, int b0, int rows, std::int64_t start,
                                 std::int64_t observe_from, RouterObserver* observer);
    void place_experts(int l, const std::vector<int>& early_of, ExpertGroups& g);
    CpuExperts start_cpu_experts(int l, int b0, int rows, const ExpertGroups& g, Stats& st);
    void gpu_experts(int l, const ExpertGroups& g, const std::vector<int>& early_of, bool grouped,
                     bool overlap, Stats& st, std::uint64_t& staging_wait);

    const ModelConfig& config_;
    const GpuOptions& opt_;
    const ModelShape& shape_;
    const std::int64_t context_;
    const std::vector<LayerDevice>& layers_;
    const float* inv_freq_;
    const float concentration_;
    CUstream stream_, copy_stream_;
    const SlotPool& slots_;
    PromptPeers peers_;

    int block_ = 0;       // tokens per block
    int chunk_rows_ = 0;  // prompt positions held at once (vram_plan.h prompt_rows); chunks of it
    std::vector<cuda::ExpertShape> shapes_;  // per layer (the prompt experts' operands)
    // Prompt-sized: residual stream, expert sum, the experts' input ([rows, hidden] each);
    // routing and grouped entries ([context, k]).
    float *residual_ = nullptr, *expert_sum_ = nullptr, *expert_input_ = nullptr, *gates_ = nullptr;
    int *selected_ = nullptr, *entries_ = nullptr;
    // Block-sized: normed input, QKV, attention output, router logits, expert activations.
    float *normed_ = nullptr, *qkv_ = nullptr, *attention_ = nullptr, *router_logits_ = nullptr,
          *activations_ = nullptr;
    float* down_rows_ = nullptr;  // grouped GEMM's down rows (may be qkv_)
    // --expert-streams 2 (expert_rows): the second act buffer (may be qkv_), the gate_ups' stream,
    // and the events that order the two.
    float* activations2_ = nullptr;
    CUstream side_ = nullptr;
    CUevent experts_start_ = nullptr, gate_up_done_[2] = {nullptr, nullptr},
            act_free_[2] = {nullptr, nullptr};
    // Scratch slots a staged expert is copied into; landed / free per slot.
    std::uint8_t* scratch_ = nullptr;
    std::vector<CUevent> scratch_landed_, scratch_free_;
    CUevent h_ready_ = nullptr;       // the experts' input reached the host (CPU experts)
    CUevent first_routed_ = nullptr;  // the first block's routing reached the host (early staging)
    // Pinned host: a block's embeddings, the routing (sel then gate), grouped entries, the
    // experts' input, the CPU experts' output rows and their per-token starts.
    HostBuffer emb_host_, route_host_, entries_host_, h_host_, cpu_rows_, cpu_start_;
    std::unique_ptr<StagingRing> ring_;
    std::unique_ptr<StagingRing> early_;  // --prefill-early (layer-major), or null
    // The running prompt's cancel flag (null outside run).
    const std::atomic<bool>* cancel_ = nullptr;
    // The running prompt's routing counts [layer * experts] (new and re-processed rows), which
    // Admissions::admit_prompt turns into admissions.
    std::vector<std::uint32_t> counts_;
};

}  // namespace neural::hybrid
