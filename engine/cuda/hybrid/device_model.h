// The device model, an owned part of the hybrid backend: the model on the GPU as the backend's
// parts see it. Its shape, the VRAM plan every allocation comes from (each made under its row's
// name and recorded), the compute and copy streams, per layer the weights, K/V cache and router
// outputs in VRAM, the final norm, lm_head, RoPE's frequencies and the expert slot pool's memory.
// The parts' own buffers are allocated through it (allocate), so the plan stays the one record.
// Also the expert records and embeddings in RAM as the parts read them (ExpertRecords).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backend/backend.h"
#include "backend/forward.h"
#include "cpu/kernels/expert_kernel.h"
#include "cuda/driver/gpu.h"
#include "cuda/hybrid/admission.h"
#include "cuda/hybrid/vram_plan.h"
#include "model/config.h"
#include "model/weights.h"

namespace neural::hybrid {

// The model's shape (ModelConfig): hidden size, expert intermediate size, experts per layer,
// experts per token, layers, query and K/V heads, head dim, query and K/V widths, vocabulary.
struct ModelShape {
    int hidden = 0, intermediate = 0, experts = 0, top_k = 0, layers = 0, q_heads = 0, kv_heads = 0,
        head_dim = 0, q_width = 0, kv_width = 0, vocab = 0;
};

// One layer's weights and K/V cache in VRAM, and its router outputs.
struct LayerDevice {
    std::uint16_t *input_norm, *qkv_w, *qkv_b, *o_w, *o_b, *sinks, *post_norm, *router_w, *router_b,
        *gate_up_bias, *down_bias;
    float *k_cache, *v_cache;
    int ring = 0;  // > 0: a sliding layer's K/V ring of this many positions (--kv-ring)
    int *sel, *slot;
    float* gate;
};

class DeviceModel {
public:
    DeviceModel() = default;
    ~DeviceModel();
    DeviceModel(const DeviceModel&) = delete;
    DeviceModel& operator=(const DeviceModel&) = delete;

    // The model's shape from `config`, checked against what the kernels take.
    void set_model(const ModelConfig& config);
    // The VRAM plan (its context and --kv-ring positions); creates the streams.
    void start(VramPlan plan);
    // One allocation of the plan's row `row`: its size comes from the plan, and it is recorded
    // under the row's name (allocations). More than the plan's count is an error.
    void* allocate(const char* row);
    template <typename T>
    T* allocate_as(const char* row) {
        return static_cast<T*>(allocate(row));
    }
    // Every allocated row of the plan was allocated as often as planned.
    void check_allocations() const;
    // The dense core (bf16, straight from the checkpoint), then RoPE and the K/V cache.
    void upload_dense_core(const ModelWeights& weights);
    void init_kv_cache(const ModelConfig& config);
    // Waits for the compute and copy streams; frees every allocation and the streams.
    void synchronize();
    void release();

    const ModelShape& shape() const { return shape_; }
    std::int64_t context() const { return context_; }  // K/V positions the GPU holds
    int kv_ring() const { return kv_ring_; }  // sliding layers' ring positions (0: whole context)
    const VramPlan& plan() const { return plan_; }
    // By row, in the order of their first allocation.
    const std::vector<DeviceAllocation>& allocations() const { return made_; }
    CUstream stream() const { return stream_; }            // compute
    CUstream copy_stream() const { return copy_stream_; }  // admissions' and staging's copies
    const std::vector<LayerDevice>& layers() const { return layers_; }
    std::uint16_t* final_norm() const { return final_norm_; }
    std::uint16_t* lm_head() const { return lm_head_; }
    float* inv_freq() const { return inv_freq_; }
    float concentration() const { return concentration_; }
    // The expert slot pool's memory and table (the backend allocates and sizes them).
    SlotPool& slots() { return slots_; }
    const SlotPool& slots() const { return slots_; }

private:
    void upload(std::uint16_t* dst, const Bf16View& v, std::size_t values);

    ModelShape shape_;
    std::int64_t context_ = 0;
    int kv_ring_ = 0;
    VramPlan plan_;
    std::vector<void*> allocations_;
    std::vector<DeviceAllocation> made_;
    CUstream stream_ = nullptr, copy_stream_ = nullptr;
    std::vector<LayerDevice> layers_;
    std::uint16_t *final_norm_ = nullptr, *lm_head_ = nullptr;
    float* inv_freq_ = nullptr;
    float concentration_ = 1.0f;
    SlotPool slots_;
};

// The expert records and embeddings as the parts read them (the backend's records.cpp): a
// token's embedding row widened into dst [hidden]; a raw store's record (the slot image, checked
// the first time); the CPU kernel's input for (layer, expert) in router choice `choice`'s
// assembly buffer; a record assembled as a slot image into dst.
struct ExpertRecords {
    std::function<void(TokenId id, float* dst)> embed;
    std::function<const std::uint8_t*(int layer, int expert)> raw_record;
    std::function<cpu::ExpertInput(int layer, int expert, int choice)> cpu_input;
    std::function<void(int layer, int expert, std::uint8_t* dst)> fill_record;
};

}  // namespace neural::hybrid
