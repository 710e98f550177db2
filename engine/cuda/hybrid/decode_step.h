// The decode step (docs/CUDA.md "Decode"), an owned part of the hybrid backend: one token through
// the per-layer CUDA graphs, the CPU computing the missed experts while the GPU computes the
// resident ones, --stream-misses' share of the misses computed on the GPU, the admissions after
// each layer, and the tail graph's logits. It owns the decode activations and host-mapped exchange
// buffers (the VRAM plan's decode rows, allocated through the backend), the graphs (captured once;
// the position is read from device memory), their timing marks and the streamed misses' state.
//
// The backend hands it references to what it reads: the device model (device_model.h) at
// construction, the streamed misses' inputs once the store is pinned (start_streamed_misses),
// the slot policy, the admissions and the CPU side once they exist (attach).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backend/autotune.h"
#include "backend/backend.h"
#include "backend/forward.h"
#include "cpu/kernels/expert_kernel.h"
#include "cpu/team/worker_team.h"
#include "cuda/driver/gpu.h"
#include "cuda/expert_gemm.h"
#include "cuda/hybrid/admission.h"
#include "cuda/hybrid/device_model.h"
#include "cuda/hybrid/host_buffer.h"
#include "cuda/hybrid/prompt_pipeline.h"
#include "cuda/hybrid/residency.h"
#include "cuda/hybrid/vram_plan.h"
#include "cuda/router.h"
#include "model/config.h"

namespace neural::telemetry {
struct MoeCounters;
}

namespace neural::hybrid {

// What --stream-misses decides from (start_streamed_misses): the slot policy frozen, the probes'
// RAM and pinned copy bandwidth, the pinned store's mapping (null: not pinned) and the prompt
// pipeline's scratch slots the misses are copied into (null: prompts run token by token).
struct StreamedMissInputs {
    bool frozen = false;
    double ram_gb_s = 0, pinned_gb_s = 0;
    const void* pinned_store = nullptr;
    std::uint8_t* scratch = nullptr;
};

// The backend's other parts a token uses (attach): the slot policy, the admissions, the CPU side
// (kernel, team, the store whose records it checks, whether its records are slot images), the
// counters, and the expert records and embeddings (records.cpp).
struct DecodePeers {
    Residency* residency = nullptr;
    Admissions* admissions = nullptr;
    cpu::ExpertKernel* kernel = nullptr;
    cpu::WorkerTeam* team = nullptr;
    const store::ExpertStore* store = nullptr;
    bool raw_store = false;
    BackendCounters* counters = nullptr;
    telemetry::MoeCounters* moe = nullptr;
    ExpertRecords records;
};

class DecodeStep {
public:
    // Allocates the VRAM plan's decode rows from the device model, which it reads while it lives
    // (the shape, the layers, the final norm and lm_head, the stream, the slot pool), and the
    // host-mapped exchange buffers; `expert_shape`: the experts as the decode kernels take them.
    DecodeStep(const ModelConfig& config, const GpuOptions& options, DeviceModel& device,
               const cuda::ExpertShape& expert_shape);
    ~DecodeStep();
    DecodeStep(const DecodeStep&) = delete;
    DecodeStep& operator=(const DecodeStep&) = delete;

    // The VRAM plan's "streamed misses" row, where it has one (allocated before the slot pool).
    void allocate_streamed_misses(DeviceModel& device);
    // --stream-misses: the load-time choice of the share, its stream and one graph per layer.
    void start_streamed_misses(const StreamedMissInputs& in);
    // The backend's other parts (before the first token).
    void attach(DecodePeers peers);
    // The per-layer graphs, the tail and the prompt rows' tail (after every allocation).
    void capture_graphs();

    // One token at position pos: its logits to logits_out (null: not needed); prompt: a token of
    // a prompt run token by token (weighs less in the slot policy, no refinement).
    void token(TokenId id, std::int64_t pos, bool prompt, float* logits_out,
               RouterObserver* observer, const std::atomic<bool>* cancel);
    // The tail a prompt's logits rows go through (PromptPipeline::run).
    PromptTail prompt_tail() const;
    // The streamed misses' copy stream (null: none) and waiting for it.
    CUstream streamed_stream() const { return streamed_.stream; }
    void synchronize();
    // What the backend's description says about the streamed misses (empty: nothing).
    const std::string& streamed_note() const { return streamed_.note; }

private:
    // The decode path's activations, host-mapped exchange buffers and graphs. The graphs were
    // captured with these pointers, so a token's state passes from graph to graph through them.
    struct Buffers {
        // Device: residual stream, normed input, QKV, attention output and its split-K scratch,
        // router logits, expert activations, the resident experts' sum, logits, position.
        float *x = nullptr, *h = nullptr, *qkv = nullptr, *attn = nullptr, *attn_scratch = nullptr,
              *router_logits = nullptr, *act = nullptr, *moe_gpu = nullptr, *logits = nullptr;
        int* pos = nullptr;
        int splits = 1;  // attention's split-K parts
        // The fused graphs' last-block counters (--fused-decode, cuda/decode_fused.h), zero
        // between launches: [0] the output projection's, [1, 1 + query heads) attention's per
        // head.
        unsigned* fused_counters = nullptr;
        // Host-mapped: the embedding row in, the experts' input out, the CPU's expert sum in, the
        // routing out (sel, gate bits, slot: K each), the logits out, the position in.
        HostBuffer in_x, h_host, cpu_out, route, logits_host, pos_host;
        std::vector<CUgraphExec> graphs;  // per layer
        CUgraphExec tail = nullptr;       // x += experts, final norm, lm_head
        CUgraphExec tail_rows = nullptr;  // final norm, lm_head of a prompt row copied into x
        std::vector<CUevent> routed;      // per layer: its routing is on the host
    };
    // Timing marks of the decode graphs (on: the device's graphs hold timing events, asked for by
    // GpuOptions::time_gpu): each layer's start and end (its routed event splits it), the tail's
    // start and lm_head's end; cpu_busy[l]: the CPU computed misses of layer l in the token just
    // run.
    struct GraphTiming {
        bool on = false;
        std::vector<CUevent> layer_start, layer_end, tail_marks;
        std::vector<char> cpu_busy;
    };
    // --stream-misses (start_streamed_misses): the copies' stream, their landing event, the event
    // of the previous streamed layer's kernel, on the device and in its pinned host staging the
    // scratch slot of each choice (K ints, -1: not streamed) and its slice (2K ints: first
    // neuron, neurons; 0 neurons: whole), one graph per layer, the scratch slots, and what the
    // description says.
    struct StreamedMisses {
        CUstream stream = nullptr;
        CUevent landed = nullptr, done = nullptr;
        int* slot = nullptr;
        HostBuffer slot_host;
        std::vector<CUgraphExec> graphs;
        std::uint8_t* scratch = nullptr;
        std::string note;
        // The share of misses streamed (autotune::choose_stream_share), whether decode refines
        // it, the fraction a token's layers carry over (streamed_choices), and the refinement's
        // tally and decode tokens since its last step.
        double share = 0;
        bool refine = false;
        double carry = 0;
        autotune::ShareTally tally;
        int tokens = 0;
    };
    // A decode layer's router choices as the graph left them in host-mapped memory.
    struct Route {
        int sel[cuda::kRouterMaxK], slot[cuda::kRouterMaxK];  // expert, its VRAM slot (-1: a miss)
        float gate[cuda::kRouterMaxK];
    };
    // A decode layer's misses (choose_misses): the CPU's inputs[0, n) with their choice
    // (missed_k) and capture buffer (capture_of, -1: none), and the choices streamed to the GPU
    // (streamed_k[0, ns)); admit[k]: choice k is a pending admission the CPU captures.
    // With --split-misses, choice `split` is shared: the CPU's input is the slice of its first
    // I - split_neurons neurons, the GPU streams the last split_neurons.
    struct MissPlan {
        cpu::ExpertInput inputs[cuda::kRouterMaxK];
        int capture_of[cuda::kRouterMaxK], missed_k[cuda::kRouterMaxK],
            streamed_k[cuda::kRouterMaxK];
        bool admit[cuda::kRouterMaxK], streamed[cuda::kRouterMaxK] = {};
        int n = 0, ns = 0;
        int split = -1, split_neurons = 0;
        std::uint64_t cpu_bytes = 0;  // record bytes the CPU's inputs read
    };
    // What one decode token adds to the counters (count_token).
    struct DecodeTally {
        bool count_moe = false;  // MoeCounters enabled when the token started
        std::uint64_t submit = 0, wait = 0, cpu_ns = 0, adm_ns = 0, hits = 0, misses = 0,
                      streamed = 0, split = 0, cpu_bytes = 0;
    };

    void release();

    // decode_graphs.cpp
    static bool graphs_can_time(CUstream stream);
    CUgraphExec end_capture();
    void add_gpu_times(BackendCounters& bc);

    // decode.cpp: one token, in the order the loop calls them
    void begin_token(TokenId id, std::int64_t pos);
    void launch_layer(int l, DecodeTally& tally);
    Route wait_for_routing(int l, DecodeTally& tally);
    MissPlan compute_misses(int l, const Route& route, DecodeTally& tally);
    void choose_misses(int l, const Route& route, MissPlan& plan, DecodeTally& tally);
    void admit_misses(int l, const Route& route, const MissPlan& plan, DecodeTally& tally);
    void finish_token(float* logits_out, DecodeTally& tally);
    void count_token(const DecodeTally& tally);

    // streamed_misses.cpp
    void stream_misses(int l, const int* sel, const MissPlan& plan);
    void copy_slice(std::uint8_t* dst, const std::uint8_t* record, int first, int neurons);
    void refine_stream_share();

    const ModelConfig& config_;
    const GpuOptions& opt_;
    const ModelShape& shape_;
    const std::vector<LayerDevice>& layers_;
    float* const inv_freq_;
    const float concentration_;
    std::uint16_t *const final_norm_, *const lm_head_;
    const CUstream stream_;
    const SlotPool& slots_;
    const cuda::ExpertShape expert_shape_;
    DecodePeers peers_;

    Buffers decode_;
    GraphTiming timing_;
    StreamedMisses streamed_;
};

}  // namespace neural::hybrid
