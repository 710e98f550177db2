// The model on the GPU (device_model.h): its shape, the VRAM plan's allocations, the compute and
// copy streams, the dense core's upload, RoPE's frequencies and the K/V cache.
#include "cuda/hybrid/device_model.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "cuda/driver/gpu.h"

#include "cpu/rope.h"
#include "cuda/attention.h"
#include "cuda/cuda_check.h"
#include "cuda/router.h"
#include "neural/error.h"

namespace neural::hybrid {

DeviceModel::~DeviceModel() { release(); }

// The model's shape, checked against what the kernels take.
void DeviceModel::set_model(const ModelConfig& c) {
    shape_.hidden = c.hidden_size;
    shape_.intermediate = c.intermediate_size;
    shape_.experts = c.num_experts;
    shape_.top_k = c.experts_per_token;
    shape_.layers = c.num_layers;
    shape_.q_heads = c.num_heads;
    shape_.kv_heads = c.num_kv_heads;
    shape_.head_dim = c.head_dim;
    shape_.q_width = c.q_dim();
    shape_.kv_width = c.kv_dim();
    shape_.vocab = c.vocab_size;
    if (shape_.top_k > cuda::kRouterMaxK)
        fail("backend \"cuda\": experts_per_token {} > {}", shape_.top_k, cuda::kRouterMaxK);
    if (shape_.head_dim > cuda::kAttentionMaxHeadDim || shape_.head_dim % 2 != 0)
        fail("backend \"cuda\": head_dim {} unsupported", shape_.head_dim);
    if (shape_.hidden % 32 != 0 || shape_.intermediate % 32 != 0 || shape_.q_width % 8 != 0)
        fail("backend \"cuda\": hidden/intermediate sizes must be multiples of 32");
    if (static_cast<std::size_t>(shape_.top_k) * (shape_.intermediate / 32 * 33) * 4 > 48 * 1024 ||
        static_cast<std::size_t>(shape_.hidden) * 4 > 48 * 1024) {
        fail("backend \"cuda\": hidden {} / intermediate {} exceed the kernels' shared memory",
             shape_.hidden, shape_.intermediate);
    }
    if (shape_.experts > 1024)
        fail("backend \"cuda\": {} experts per layer is more than 1024", shape_.experts);
}

// The plan every allocation comes from (its context and --kv-ring positions), and the streams.
void DeviceModel::start(VramPlan plan) {
    plan_ = std::move(plan);
    context_ = plan_.context;
    kv_ring_ = plan_.kv_ring;
    NEURAL_CUDA(cuda::drv::stream_create(&stream_, cuda::drv::kStreamNonBlocking));
    NEURAL_CUDA(cuda::drv::stream_create(&copy_stream_, cuda::drv::kStreamNonBlocking));
}

void* DeviceModel::allocate(const char* name) {
    const VramRow* row = plan_.find(name);
    auto made = std::find_if(made_.begin(), made_.end(),
                             [&](const DeviceAllocation& a) { return a.name == name; });
    const std::uint64_t count = made == made_.end() ? 0 : made->count;
    if (row == nullptr || !row->allocated() || count >= row->count) {
        fail("the CUDA backend allocates \"{}\" beyond its VRAM plan ({} planned)", name,
             row == nullptr ? 0 : row->count);
    }
    void* p = nullptr;
    NEURAL_CUDA(cuda::drv::malloc(&p, row->each));
    allocations_.push_back(p);
    if (made == made_.end()) {
        made_.push_back({row->name, 1, row->each});
    } else {
        ++made->count;
        made->bytes += row->each;
    }
    return p;
}

// Every allocated row of the plan was allocated as often as planned (allocate refuses more).
void DeviceModel::check_allocations() const {
    for (const VramRow& r : plan_.rows) {
        if (!r.allocated()) continue;
        const auto made = std::find_if(made_.begin(), made_.end(),
                                       [&](const DeviceAllocation& a) { return a.name == r.name; });
        const std::uint64_t count = made == made_.end() ? 0 : made->count;
        if (count != r.count) {
            fail("the CUDA backend allocated \"{}\" {} times, its VRAM plan {} times", r.name,
                 count, r.count);
        }
    }
}

// Uploads a bf16 view (rows * cols values); a missing view (no bias) becomes zeros.
void DeviceModel::upload(std::uint16_t* dst, const Bf16View& v, std::size_t values) {
    if (v.data == nullptr) {
        NEURAL_CUDA(cuda::drv::memset(dst, 0, values * 2));
        return;
    }
    NEURAL_CUDA(cuda::drv::memcpy(dst, v.data, values * 2, cuda::drv::kHostToDevice));
}

// Dense core (bf16, straight from the checkpoint). The embedding stays in RAM: a token needs one
// row, which the host widens into mapped memory.
void DeviceModel::upload_dense_core(const ModelWeights& w) {
    const auto Hs = static_cast<std::size_t>(shape_.hidden),
               Is = static_cast<std::size_t>(shape_.intermediate),
               Es = static_cast<std::size_t>(shape_.experts),
               Qs = static_cast<std::size_t>(shape_.q_width),
               KVs = static_cast<std::size_t>(shape_.kv_width);
    layers_.resize(static_cast<std::size_t>(shape_.layers));
    for (int l = 0; l < shape_.layers; ++l) {
        const LayerWeights& lw = w.layers[static_cast<std::size_t>(l)];
        LayerDevice& ld = layers_[static_cast<std::size_t>(l)];
        ld.input_norm = allocate_as<std::uint16_t>("layer norms");
        upload(ld.input_norm, lw.input_norm, Hs);
        ld.post_norm = allocate_as<std::uint16_t>("layer norms");
        upload(ld.post_norm, lw.post_norm, Hs);
        ld.qkv_w = allocate_as<std::uint16_t>("QKV weights");
        upload(ld.qkv_w, lw.q_w, Qs * Hs);
        upload(ld.qkv_w + Qs * Hs, lw.k_w, KVs * Hs);
        upload(ld.qkv_w + (Qs + KVs) * Hs, lw.v_w, KVs * Hs);
        ld.qkv_b = allocate_as<std::uint16_t>("QKV bias");
        upload(ld.qkv_b, lw.q_b, Qs);
        upload(ld.qkv_b + Qs, lw.k_b, KVs);
        upload(ld.qkv_b + Qs + KVs, lw.v_b, KVs);
        ld.o_w = allocate_as<std::uint16_t>("output projection");
        upload(ld.o_w, lw.o_w, Hs * Qs);
        ld.o_b = allocate_as<std::uint16_t>("output bias");
        upload(ld.o_b, lw.o_b, Hs);
        ld.sinks = allocate_as<std::uint16_t>("sinks");
        upload(ld.sinks, lw.sinks, static_cast<std::size_t>(shape_.q_heads));
        ld.router_w = allocate_as<std::uint16_t>("router");
        upload(ld.router_w, lw.router_w, Es * Hs);
        ld.router_b = allocate_as<std::uint16_t>("router bias");
        upload(ld.router_b, lw.router_b, Es);
        ld.gate_up_bias = allocate_as<std::uint16_t>("expert gate_up biases");
        upload(ld.gate_up_bias, lw.gate_up.bias, Es * 2 * Is);
        ld.down_bias = allocate_as<std::uint16_t>("expert down biases");
        upload(ld.down_bias, lw.down.bias, Es * Hs);
        ld.sel = allocate_as<int>("router outputs");
        ld.slot = allocate_as<int>("router outputs");
        ld.gate = allocate_as<float>("router outputs");
    }
    final_norm_ = allocate_as<std::uint16_t>("final norm");
    upload(final_norm_, w.final_norm, Hs);
    lm_head_ = allocate_as<std::uint16_t>("lm_head");
    upload(lm_head_, w.lm_head, static_cast<std::size_t>(shape_.vocab) * Hs);
}

// RoPE's frequencies and the K/V cache.
void DeviceModel::init_kv_cache(const ModelConfig& c) {
    const auto KVs = static_cast<std::size_t>(shape_.kv_width);
    const cpu::Rope rope(c);
    inv_freq_ = allocate_as<float>("RoPE frequencies");
    NEURAL_CUDA(cuda::drv::memcpy(inv_freq_, rope.inv_freq().data(), rope.inv_freq().size() * 4,
                                  cuda::drv::kHostToDevice));
    concentration_ = rope.concentration();

    // K/V: full layers keep the whole context; with --kv-ring, sliding layers keep a ring of
    // their last positions (position p in row p % ring). Zeroed: a prefill tile may read a
    // masked row of the ring before anything was written there.
    // K/V checkpoints of a ring keep the rings' last positions (ring checkpoints, switch_sequence).
    for (int l = 0; l < shape_.layers; ++l) {
        LayerDevice& ld = layers_[static_cast<std::size_t>(l)];
        ld.ring = c.layer_is_sliding[static_cast<std::size_t>(l)] ? kv_ring_ : 0;
        const std::size_t rows = static_cast<std::size_t>(ld.ring > 0 ? ld.ring : context_);
        const char* row = c.layer_is_sliding[static_cast<std::size_t>(l)]
                              ? "K/V cache (sliding layers)"
                              : "K/V cache";
        ld.k_cache = allocate_as<float>(row);
        ld.v_cache = allocate_as<float>(row);
        NEURAL_CUDA(cuda::drv::memset(ld.k_cache, 0, rows * KVs * 4));
        NEURAL_CUDA(cuda::drv::memset(ld.v_cache, 0, rows * KVs * 4));
    }
}

void DeviceModel::synchronize() {
    if (stream_ != nullptr) cuda::drv::stream_synchronize(stream_);
    if (copy_stream_ != nullptr) cuda::drv::stream_synchronize(copy_stream_);
}

// Every allocation, then the streams (the parts that use them are gone).
void DeviceModel::release() {
    for (void* p : allocations_) cuda::drv::free(p);
    allocations_.clear();
    if (stream_ != nullptr) cuda::drv::stream_destroy(stream_);
    if (copy_stream_ != nullptr) cuda::drv::stream_destroy(copy_stream_);
    stream_ = copy_stream_ = nullptr;
}

}  // namespace neural::hybrid
