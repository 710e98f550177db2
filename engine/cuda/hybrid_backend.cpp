// The hybrid CUDA backend (DESIGN.md "Runtime"): the dense core in bf16 on the GPU, a pool of
// expert slots in VRAM, and the CPU computing the missed experts from RAM while the GPU computes
// the resident ones.
//
// Per token and layer, one CUDA graph (captured once; the position is read from device memory):
//   [x = embedding | x += previous layer's experts] -> rms_norm -> QKV -> RoPE + K/V store ->
//   split-K attention with sinks -> output projection (+= x) -> rms_norm (also into host-mapped
//   memory) -> router -> top-k + slot lookup (device + host-mapped) -> [event] -> resident
//   experts from their slots.
// The host waits for the event, reads the choices zero-copy, runs the CPU kernel on the misses
// into host-mapped memory (which the next graph adds zero-copy) while the GPU computes the
// resident experts, and does the admission bookkeeping. A tail graph (final norm, lm_head) runs
// only where logits are needed.
//
// Admission is copy-on-compute (runtime/residency.h): a pending candidate's bytes are captured
// by the CPU kernel while it computes the miss (raw store records are slot images), then a copy
// stream uploads them into the victim slot after the victim left the slot table; the table
// flips on the compute stream once the copy has landed. Table updates are ordered on the compute
// stream between graphs, so a graph never sees a half-written slot.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "cpu/kernels/expert_kernel.h"
#include "cpu/rope.h"
#include "cpu/team/worker_team.h"
#include "cuda/attention.cuh"
#include "cuda/attention_prefill.cuh"
#include "cuda/cuda_check.h"
#include "cuda/device.cuh"
#include "cuda/expert_gemm.cuh"
#include "cuda/expert_mxfp4.cuh"
#include "cuda/gemm_bf16_rows.cuh"
#include "cuda/gemv_bf16.cuh"
#include "cuda/residual.cuh"
#include "cuda/rms_norm.cuh"
#include "cuda/rope_kv.cuh"
#include "cuda/router.cuh"
#include "model/bf16.h"
#include "model/config.h"
#include "model/weights.h"
#include "neural/error.h"
#include "platform/system_info.h"
#include "runtime/backend.h"
#include "runtime/kv_checkpoints.h"
#include "runtime/fit.h"
#include "runtime/ranking.h"
#include "runtime/residency.h"
#include "store/store.h"
#include "telemetry/telemetry.h"

namespace neural {

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr std::uint64_t kSlotAlign = 256;
constexpr int kCaptureBuffers = 4;

std::uint64_t ns_since(Clock::time_point t0) {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

// Pinned host memory mapped into the device address space (zero-copy both ways).
struct HostBuffer {
    void* ptr = nullptr;
    std::size_t bytes = 0;
    HostBuffer() = default;
    explicit HostBuffer(std::size_t n) : bytes(n) {
        NEURAL_CUDA(cudaHostAlloc(&ptr, n, cudaHostAllocMapped | cudaHostAllocPortable));
        std::memset(ptr, 0, n);
    }
    HostBuffer(const HostBuffer&) = delete;
    HostBuffer& operator=(const HostBuffer&) = delete;
    HostBuffer(HostBuffer&& o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = nullptr; }
    HostBuffer& operator=(HostBuffer&& o) noexcept {
        if (this != &o) {
            if (ptr != nullptr) cudaFreeHost(ptr);
            ptr = o.ptr;
            bytes = o.bytes;
            o.ptr = nullptr;
        }
        return *this;
    }
    ~HostBuffer() {
        if (ptr != nullptr) cudaFreeHost(ptr);
    }
    template <typename T>
    T* host() const { return static_cast<T*>(ptr); }
    template <typename T>
    T* device() const {
        void* d = nullptr;
        NEURAL_CUDA(cudaHostGetDevicePointer(&d, ptr, 0));
        return static_cast<T*>(d);
    }
};

// Prefill's staging ring: producer threads copy expert records from RAM (the store mapping, or
// assembled from a packed store / the checkpoint) into pinned host buffers, running ahead of the
// main thread, which uploads each buffer into a scratch slot. Job j uses buffer j % depth; its
// producer first waits until job j - depth's upload was issued and has completed. Not made for a
// pinned store (--pin-store): its records are uploaded straight from the mapping.
class StagingRing {
 public:
    using Fill = std::function<void(int layer, int expert, std::uint8_t* dst)>;

    // `threads` producers fill `depth` pinned buffers of `bytes`; job j uses buffer j % depth.
    StagingRing(int device, int threads, int depth, std::size_t bytes, Fill fill)
        : device_(device), fill_(std::move(fill)) {
        for (int b = 0; b < depth; ++b) {
            buffers_.emplace_back(bytes);
            cudaEvent_t ev;
            NEURAL_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
            uploaded_.push_back(ev);
        }
        for (int w = 0; w < threads; ++w) workers_.emplace_back([this] { work(); });
    }
    ~StagingRing() {
        {
            std::lock_guard<std::mutex> lock(mu_);
            stop_ = true;
        }
        cv_.notify_all();
        for (auto& w : workers_) w.join();
        for (auto e : uploaded_) cudaEventDestroy(e);
    }
    int depth() const { return static_cast<int>(buffers_.size()); }

    // A new batch of records to stage, in the order the main thread will take them.
    void start(std::vector<std::pair<int, int>> jobs) {
        std::lock_guard<std::mutex> lock(mu_);
        jobs_ = std::move(jobs);
        state_.assign(jobs_.size(), 0);
        issued_.assign(jobs_.size(), false);
        next_ = 0;
        error_ = nullptr;
        cv_.notify_all();
    }
    // Waits until job j's buffer is filled (rethrows a producer's error); returns the buffer.
    const HostBuffer& wait(std::size_t j) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return state_[j] == 2 || error_ != nullptr; });
        if (error_ != nullptr) std::rethrow_exception(error_);
        return buffers_[j % buffers_.size()];
    }
    // The upload of job j's buffer was enqueued on `stream`: the buffer is free once it ran.
    void issued(std::size_t j, cudaStream_t stream) {
        NEURAL_CUDA(cudaEventRecord(uploaded_[j % buffers_.size()], stream));
        std::lock_guard<std::mutex> lock(mu_);
        issued_[j] = true;
        cv_.notify_all();
    }
    // Stops handing out jobs of the current batch (after an error on the main thread) and waits
    // for producers still filling.
    void abandon() {
        std::unique_lock<std::mutex> lock(mu_);
        next_ = jobs_.size();
        cv_.wait(lock, [&] { return filling_ == 0; });
        jobs_.clear();
        state_.clear();
        issued_.clear();
    }

 private:
    void work() {
        cudaSetDevice(device_);
        std::unique_lock<std::mutex> lock(mu_);
        for (;;) {
            cv_.wait(lock, [&] {
                if (stop_) return true;
                if (next_ >= jobs_.size() || error_ != nullptr) return false;
                return next_ < buffers_.size() || issued_[next_ - buffers_.size()];
            });
            if (stop_) return;
            const std::size_t j = next_++;
            const auto [layer, expert] = jobs_[j];
            state_[j] = 1;
            ++filling_;
            lock.unlock();
            std::exception_ptr err;
            try {
                // The buffer's previous upload (job j - depth) must have landed.
                NEURAL_CUDA(cudaEventSynchronize(uploaded_[j % buffers_.size()]));
                fill_(layer, expert, buffers_[j % buffers_.size()].template host<std::uint8_t>());
            } catch (...) {
                err = std::current_exception();
            }
            lock.lock();
            --filling_;
            if (err != nullptr) {
                if (error_ == nullptr) error_ = err;
            } else if (j < state_.size()) {
                state_[j] = 2;
            }
            cv_.notify_all();
        }
    }

    int device_ = 0;
    Fill fill_;
    std::vector<HostBuffer> buffers_;
    std::vector<cudaEvent_t> uploaded_;
    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<std::pair<int, int>> jobs_;
    std::vector<int> state_;  // 0 waiting, 1 filling, 2 filled
    std::vector<bool> issued_;
    std::size_t next_ = 0;
    int filling_ = 0;
    std::exception_ptr error_;
    bool stop_ = false;
};

struct LayerDevice {
    std::uint16_t *input_norm, *qkv_w, *qkv_b, *o_w, *o_b, *sinks, *post_norm, *router_w,
        *router_b, *gate_up_bias, *down_bias;
    float *k_cache, *v_cache;
    int ring = 0;  // > 0: a sliding layer's K/V ring of this many positions (--kv-ring)
    int *sel, *slot;
    float* gate;
};

class CudaBackend final : public Backend {
 public:
    CudaBackend(const GpuBackendInputs& in, const GpuOptions& opt) : in_(in), opt_(opt) {
        try {
            init();
        } catch (...) {
            release();
            throw;
        }
    }
    ~CudaBackend() override { release(); }

    const char* name() const override { return "cuda"; }
    std::string describe() const override { return description_; }
    std::string experts() const override {
        return fmt::format("{} kernel, {} team, {} threads", cpu::kernel_isa_name(kernel_->isa()), team_->name(),
                           team_->size());
    }
    StorePin store_pin() const override { return {pinned_ != nullptr, pin_seconds_}; }

    std::vector<float> forward(std::span<const TokenId> tokens, KvCache& cache,
                               const ForwardOptions& options) const override {
        return const_cast<CudaBackend*>(this)->run(tokens, cache, options);
    }

 private:
    // ---- setup ---------------------------------------------------------------------------
    template <typename T>
    T* dalloc(std::size_t count, const char* what) {
        const std::size_t bytes = (count * sizeof(T) + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
        if (used_ + bytes > budget_) {
            fail("the CUDA backend needs more than the VRAM budget of {:.2f} GiB ({}: {:.1f} MiB more "
                 "after {:.2f} GiB); raise --vram-budget, lower --context or use --backend cpu",
                 static_cast<double>(budget_) / kGiB, what, bytes / 1048576.0,
                 static_cast<double>(used_) / kGiB);
        }
        void* p = nullptr;
        NEURAL_CUDA(cudaMalloc(&p, bytes));
        allocations_.push_back(p);
        used_ += bytes;
        return static_cast<T*>(p);
    }

    // Uploads a bf16 view (rows * cols values); a missing view (no bias) becomes zeros.
    void upload(std::uint16_t* dst, const Bf16View& v, std::size_t values) {
        if (v.data == nullptr) {
            NEURAL_CUDA(cudaMemset(dst, 0, values * 2));
            return;
        }
        NEURAL_CUDA(cudaMemcpy(dst, v.data, values * 2, cudaMemcpyHostToDevice));
    }

    void init() {
        const ModelConfig& c = *in_.config;
        const ModelWeights& w = *in_.weights;
        std::string why;
        const auto devices = cuda::list_devices(&why);
        if (devices.empty()) fail("backend \"cuda\": {}", why);
        if (opt_.device < 0 || opt_.device >= static_cast<int>(devices.size())) {
            fail("--device {} does not exist ({} CUDA device(s))", opt_.device, devices.size());
        }
        const cuda::DeviceInfo& dev = devices[static_cast<std::size_t>(opt_.device)];
        NEURAL_CUDA(cudaSetDevice(opt_.device));
        const std::string err = cuda::self_test(opt_.device);
        if (!err.empty()) fail("backend \"cuda\": device self-test failed: {}", err);
        budget_ = opt_.vram_budget_gib > 0
                      ? static_cast<std::uint64_t>(opt_.vram_budget_gib * kGiB)
                      : (dev.free_bytes > (512ull << 20) ? dev.free_bytes - (512ull << 20) : 0);
        if (opt_.vram_budget_gib > 0 && budget_ > dev.free_bytes) {
            fail("--vram-budget {:.2f} GiB is more than the {:.2f} GiB free on {}", opt_.vram_budget_gib,
                 static_cast<double>(dev.free_bytes) / kGiB, dev.name);
        }
        H_ = c.hidden_size;
        I_ = c.intermediate_size;
        E_ = c.num_experts;
        K_ = c.experts_per_token;
        L_ = c.num_layers;
        nq_ = c.num_heads;
        nkv_ = c.num_kv_heads;
        d_ = c.head_dim;
        Q_ = c.q_dim();
        KV_ = c.kv_dim();
        V_ = c.vocab_size;
        if (K_ > cuda::kRouterMaxK) fail("backend \"cuda\": experts_per_token {} > {}", K_, cuda::kRouterMaxK);
        if (d_ > cuda::kAttentionMaxHeadDim || d_ % 2 != 0) fail("backend \"cuda\": head_dim {} unsupported", d_);
        if (H_ % 32 != 0 || I_ % 32 != 0 || Q_ % 8 != 0) fail("backend \"cuda\": hidden/intermediate sizes must be multiples of 32");
        if (static_cast<std::size_t>(K_) * (I_ / 32 * 33) * 4 > 48 * 1024 ||
            static_cast<std::size_t>(H_) * 4 > 48 * 1024) {
            fail("backend \"cuda\": hidden {} / intermediate {} exceed the kernels' shared memory", H_, I_);
        }
        if (E_ > 1024) fail("backend \"cuda\": {} experts per layer is more than 1024", E_);
        ctx_ = opt_.context > 0 ? std::min<std::int64_t>(opt_.context, c.max_position_embeddings)
                                : std::min<std::int64_t>(c.max_position_embeddings, 8192);
        splits_ = static_cast<int>(std::clamp<std::int64_t>(ctx_ / 512, 1, 16));

        NEURAL_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        NEURAL_CUDA(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));

        // Dense core (bf16, straight from the checkpoint). The embedding stays in RAM: a token
        // needs one row, which the host widens into mapped memory.
        const auto Hs = static_cast<std::size_t>(H_), Is = static_cast<std::size_t>(I_),
                   Es = static_cast<std::size_t>(E_), Qs = static_cast<std::size_t>(Q_),
                   KVs = static_cast<std::size_t>(KV_);
        const std::size_t qkv_rows = Qs + 2 * KVs;
        layers_.resize(static_cast<std::size_t>(L_));
        for (int l = 0; l < L_; ++l) {
            const LayerWeights& lw = w.layers[static_cast<std::size_t>(l)];
            LayerDevice& ld = layers_[static_cast<std::size_t>(l)];
            ld.input_norm = dalloc<std::uint16_t>(Hs, "layer norms");
            upload(ld.input_norm, lw.input_norm, Hs);
            ld.post_norm = dalloc<std::uint16_t>(Hs, "layer norms");
            upload(ld.post_norm, lw.post_norm, Hs);
            prefill_shapes_.push_back(prefill_expert_shape(lw));
            ld.qkv_w = dalloc<std::uint16_t>(qkv_rows * Hs, "QKV weights");
            upload(ld.qkv_w, lw.q_w, Qs * Hs);
            upload(ld.qkv_w + Qs * Hs, lw.k_w, KVs * Hs);
            upload(ld.qkv_w + (Qs + KVs) * Hs, lw.v_w, KVs * Hs);
            ld.qkv_b = dalloc<std::uint16_t>(qkv_rows, "QKV bias");
            upload(ld.qkv_b, lw.q_b, Qs);
            upload(ld.qkv_b + Qs, lw.k_b, KVs);
            upload(ld.qkv_b + Qs + KVs, lw.v_b, KVs);
            ld.o_w = dalloc<std::uint16_t>(Hs * Qs, "output projection");
            upload(ld.o_w, lw.o_w, Hs * Qs);
            ld.o_b = dalloc<std::uint16_t>(Hs, "output bias");
            upload(ld.o_b, lw.o_b, Hs);
            ld.sinks = dalloc<std::uint16_t>(static_cast<std::size_t>(nq_), "sinks");
            upload(ld.sinks, lw.sinks, static_cast<std::size_t>(nq_));
            ld.router_w = dalloc<std::uint16_t>(Es * Hs, "router");
            upload(ld.router_w, lw.router_w, Es * Hs);
            ld.router_b = dalloc<std::uint16_t>(Es, "router bias");
            upload(ld.router_b, lw.router_b, Es);
            ld.gate_up_bias = dalloc<std::uint16_t>(Es * 2 * Is, "expert biases");
            upload(ld.gate_up_bias, lw.gate_up.bias, Es * 2 * Is);
            ld.down_bias = dalloc<std::uint16_t>(Es * Hs, "expert biases");
            upload(ld.down_bias, lw.down.bias, Es * Hs);
            ld.sel = dalloc<int>(static_cast<std::size_t>(K_), "router outputs");
            ld.slot = dalloc<int>(static_cast<std::size_t>(K_), "router outputs");
            ld.gate = dalloc<float>(static_cast<std::size_t>(K_), "router outputs");
        }
        final_norm_ = dalloc<std::uint16_t>(Hs, "final norm");
        upload(final_norm_, w.final_norm, Hs);
        lm_head_ = dalloc<std::uint16_t>(static_cast<std::size_t>(V_) * Hs, "lm_head");
        upload(lm_head_, w.lm_head, static_cast<std::size_t>(V_) * Hs);
        core_bytes_ = used_;

        const cpu::Rope rope(c);
        inv_freq_ = dalloc<float>(rope.inv_freq().size(), "RoPE");
        NEURAL_CUDA(cudaMemcpy(inv_freq_, rope.inv_freq().data(), rope.inv_freq().size() * 4,
                               cudaMemcpyHostToDevice));
        concentration_ = rope.concentration();

        // K/V: full layers keep the whole context; with --kv-ring, sliding layers keep a ring of
        // their last positions (position p in row p % ring). Zeroed: a prefill tile may read a
        // masked row of the ring before anything was written there.
        // K/V checkpoints of a ring keep the rings' last positions (ring checkpoints, switch_sequence).
        kv_ring_ = kv_ring_positions(c, ctx_, opt_.kv_ring, opt_.prefill_order == "token" ? 0 : opt_.prefill_block);
        for (int l = 0; l < L_; ++l) {
            LayerDevice& ld = layers_[static_cast<std::size_t>(l)];
            ld.ring = c.layer_is_sliding[static_cast<std::size_t>(l)] ? kv_ring_ : 0;
            const std::size_t rows = static_cast<std::size_t>(ld.ring > 0 ? ld.ring : ctx_);
            ld.k_cache = dalloc<float>(rows * KVs, "K/V cache");
            ld.v_cache = dalloc<float>(rows * KVs, "K/V cache");
            NEURAL_CUDA(cudaMemset(ld.k_cache, 0, rows * KVs * 4));
            NEURAL_CUDA(cudaMemset(ld.v_cache, 0, rows * KVs * 4));
        }
        kv_bytes_ = used_ - core_bytes_;
        if (opt_.kv_checkpoint_gib > 0) {
            std::uint64_t ring_layers = 0;
            for (int l = 0; l < L_; ++l) ring_layers += layers_[static_cast<std::size_t>(l)].ring > 0 ? 1 : 0;
            const auto per_layer = 2 * static_cast<std::uint64_t>(KV_);
            checkpoints_ = std::make_unique<KvCheckpoints>(
                static_cast<std::uint64_t>(opt_.kv_checkpoint_gib * kGiB),
                (static_cast<std::uint64_t>(L_) - ring_layers) * per_layer, ring_layers * per_layer,
                ring_layers > 0 ? c.sliding_window : 0);
        }

        x_ = dalloc<float>(Hs, "activations");
        h_ = dalloc<float>(Hs, "activations");
        qkv_ = dalloc<float>(qkv_rows, "activations");
        attn_ = dalloc<float>(Qs, "activations");
        scratch_ = dalloc<float>(static_cast<std::size_t>(nq_) * splits_ * (d_ + 2), "attention scratch");
        router_logits_ = dalloc<float>(Es, "activations");
        act_ = dalloc<float>(static_cast<std::size_t>(K_) * Is, "activations");
        moe_gpu_ = dalloc<float>(Hs, "activations");
        logits_ = dalloc<float>(static_cast<std::size_t>(V_), "logits");
        pos_ = dalloc<int>(1, "position");
        table_ = dalloc<int>(static_cast<std::size_t>(L_) * Es, "slot table");

        init_prefill();

        in_x_ = HostBuffer(Hs * 4);
        h_host_ = HostBuffer(Hs * 4);
        cpu_out_ = HostBuffer(Hs * 4);
        route_ = HostBuffer(static_cast<std::size_t>(K_) * 12);
        logits_host_ = HostBuffer(static_cast<std::size_t>(V_) * 4);
        pos_host_ = HostBuffer(4);

        // The expert slot pool: what the budget leaves (minus a reserve for graphs and the
        // allocator), or exactly what was asked.
        record_bytes_ = cpu::ExpertRecordView::raw_bytes(H_, I_);
        stride_ = (record_bytes_ + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
        const std::uint64_t reserve = 64ull << 20;
        const std::uint64_t left = budget_ > used_ + reserve ? budget_ - used_ - reserve : 0;
        std::int64_t slots;
        if (opt_.pool_slots >= 0) {
            slots = opt_.pool_slots;
        } else if (opt_.pool_gib >= 0) {
            slots = static_cast<std::int64_t>(opt_.pool_gib * kGiB / static_cast<double>(stride_));
        } else {
            slots = static_cast<std::int64_t>(left / stride_);
        }
        slots = std::min<std::int64_t>(slots, static_cast<std::int64_t>(L_) * E_);
        if (slots > 0) pool_ = dalloc<std::uint8_t>(static_cast<std::size_t>(slots) * stride_, "expert slot pool");
        ResidencyOptions ro;
        ro.static_fraction = opt_.static_fraction;
        ro.refresh_every = opt_.refresh_every;
        ro.refresh_m = opt_.refresh_m;
        ro.prefill_weight = opt_.prefill_weight;
        residency_ = std::make_unique<Residency>(L_, E_, static_cast<int>(slots), ro);

        // The CPU side: the fused kernel on a worker team for the misses.
        cpu::KernelIsa isa = cpu::select_kernel_isa();
        if (in_.kernel == "scalar") isa = cpu::KernelIsa::scalar;
        else if (in_.kernel == "avx2") isa = cpu::KernelIsa::avx2;
        else if (in_.kernel == "avx512") isa = cpu::KernelIsa::avx512;
        else if (in_.kernel != "auto") fail("unknown kernel \"{}\"", in_.kernel);
        if (!cpu::kernel_isa_available(isa)) {
            fail("kernel \"{}\" cannot run on this CPU or build", in_.kernel);
        }
        kernel_ = std::make_unique<cpu::ExpertKernel>(isa, cpu::SwigluParams{c.swiglu_limit, c.swiglu_alpha});
        cpu::TeamOptions team;
        team.persistent = in_.kernel_persistent;
        team.library = in_.kdll;
        team.threads = in_.threads;
        std::string fallback;
        team_ = cpu::make_worker_team(team, &fallback);
        if (!fallback.empty()) spdlog::warn("persistent CPU team unavailable: {}", fallback);
        raw_store_ = in_.store != nullptr && in_.store->kind() == store::StoreKind::kRaw;
        if (in_.store == nullptr) {
            spdlog::warn("backend cuda without an expert store: missed experts are assembled from the "
                         "checkpoint tensors on every use; repack into a store for speed");
        }
        // Before anything below reads the store or --release-resident gives its pages back.
        pin_store();
        init_stream_misses();
        for (int b = 0; b < kCaptureBuffers; ++b) {
            captures_.emplace_back(static_cast<std::size_t>(record_bytes_));
            cudaEvent_t ev;
            NEURAL_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
            capture_done_.push_back(ev);
        }
        for (int k = 0; k < K_; ++k) assembled_.emplace_back(static_cast<std::size_t>(record_bytes_));
        NEURAL_CUDA(cudaEventCreateWithFlags(&evict_, cudaEventDisableTiming));

        // Initial placement (static slots from the ranking), uploaded synchronously.
        std::vector<int> table(static_cast<std::size_t>(L_) * Es, -1);
        const Ranking ranking = opt_.ranking.empty() ? Ranking{} : load_ranking(opt_.ranking);
        for (const Residency::Admission& a : residency_->initial(ranking)) {
            fill_record(a.layer, a.expert, captures_[0].host<std::uint8_t>());
            NEURAL_CUDA(cudaMemcpy(pool_ + static_cast<std::uint64_t>(a.slot) * stride_,
                                   captures_[0].ptr, record_bytes_, cudaMemcpyHostToDevice));
            table[static_cast<std::size_t>(a.layer) * Es + static_cast<std::size_t>(a.expert)] = a.slot;
        }
        NEURAL_CUDA(cudaMemcpy(table_, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
        // --release-resident: static slots never leave VRAM, so their records' RAM can go back to
        // the OS (the uploads above were synchronous). A later CPU read would fault them back in.
        // A pinned store gives nothing back (ExpertStore::set_pinned).
        if (in_.store != nullptr) {
            for (int sl = 0; sl < residency_->static_slots(); ++sl) {
                const int owner = residency_->owner(sl);
                if (owner >= 0) in_.store->note_resident_in_vram(owner / E_, owner % E_);
            }
        }

        // A pinned store needs no staging threads: its records are uploaded from the mapping.
        if (prefill_ && pinned_ == nullptr) {
            ring_ = std::make_unique<StagingRing>(opt_.device, opt_.staging_threads, opt_.staging_threads,
                                                  static_cast<std::size_t>(record_bytes_),
                                                  [this](int l, int e, std::uint8_t* dst) { fill_record(l, e, dst); });
            // Early staging (layer-major only): pinned buffers for the experts the first block's
            // routing already sends to staging, filled while the other blocks' dense parts run.
            if (opt_.prefill_early > 0 && opt_.prefill_order == "layer") {
                early_ = std::make_unique<StagingRing>(opt_.device, opt_.staging_threads, opt_.prefill_early,
                                                       static_cast<std::size_t>(record_bytes_),
                                                       [this](int l, int e, std::uint8_t* dst) { fill_record(l, e, dst); });
            }
        }
        capture_graphs();
        description_ = fmt::format(
            "cuda ({}, VRAM budget {:.2f} GiB: core {:.2f} GiB, K/V {:.2f} GiB for {} positions{}, "
            "{} expert slots = {:.2f} GiB ({} static, {} resident, residency {}); misses: {} kernel, "
            "{} team, {} threads{}{}; prefill {}; {}; K/V checkpoints {})",
            dev.name, static_cast<double>(budget_) / kGiB, static_cast<double>(core_bytes_) / kGiB,
            static_cast<double>(kv_bytes_) / kGiB, ctx_,
            kv_ring_ > 0 ? fmt::format(" (sliding layers: a ring of {})", kv_ring_) : std::string(), residency_->slots(),
            static_cast<double>(residency_->slots()) * static_cast<double>(stride_) / kGiB,
            residency_->static_slots(), residency_->resident_count(),
            residency_->frozen() ? "frozen" : fmt::format("adaptive every {} tokens", opt_.refresh_every),
            cpu::kernel_isa_name(kernel_->isa()), team_->name(), team_->size(),
            in_.store == nullptr ? ", experts from the checkpoint" : "",
            stream_note_.empty() ? std::string() : ", " + stream_note_,
            prefill_ ? fmt::format("{}-major, blocks of {}, {} scratch slots, {}, CPU up to {} tokens{}, {}, {} expert streams",
                                   opt_.prefill_order, pf_block_, opt_.scratch_slots,
                                   pinned_ != nullptr ? std::string("staged from the pinned store")
                                                      : fmt::format("{} staging threads", opt_.staging_threads),
                                   opt_.prefill_cpu_tokens, opt_.grouped_gemm ? ", grouped GEMM" : "", expert_operands(),
                                   opt_.expert_streams)
                     : std::string("token by token"),
            pin_note_, checkpoints_ ? fmt::format("{:.2f} GiB", opt_.kv_checkpoint_gib) : std::string("off"));
    }

    // --pin-store (GpuOptions::pin_store): registers the raw store's whole mapping with CUDA,
    // page-locked and read-only, so a prompt's staged experts are copied by DMA straight from it
    // instead of through the staging threads' host memcpy into pinned buffers (docs/CUDA.md
    // "Pinned store"). Sets pin_note_ for the description either way; a registration that
    // fails only warns: the staging threads do the copies then.
    void pin_store() {
        const std::string& mode = opt_.pin_store;
        if (!is_pin_store(mode)) fail("--pin-store \"{}\": expected auto, 0 or 1", mode);
        const auto not_pinned = [&](const std::string& why) { pin_note_ = "store not pinned: " + why; };
        if (mode == "0") return not_pinned("--pin-store 0");
        if (in_.store == nullptr) return not_pinned("no expert store");
        if (!raw_store_) return not_pinned("a packed store (its records are not slot images)");
        if (!prefill_) return not_pinned("prompts run token by token");
        const std::span<const std::uint8_t> map = in_.store->mapping();
        const double gb = static_cast<double>(map.size()) / 1e9;
        if (mode == "auto") {
            const std::uint64_t ram = system_memory().total_bytes;
            if (!pin_store_by_default(map.size(), ram)) {
                return not_pinned(ram == 0 ? std::string("the RAM size is unknown (--pin-store 1 pins it anyway)")
                                           : fmt::format("{:.1f} GB is more than half of the {:.1f} GB of RAM "
                                                         "(--pin-store 1 pins it anyway)",
                                                         gb, static_cast<double>(ram) / 1e9));
            }
        }
        const std::string asked = mode == "1" ? " (--pin-store 1 asked for it)" : "";
        // The mapping is read-only: registering it needs the read-only flag, which not every
        // device and driver has.
        int read_only = 0;
        if (cudaDeviceGetAttribute(&read_only, cudaDevAttrHostRegisterReadOnlySupported, opt_.device) != cudaSuccess) {
            cudaGetLastError();
            read_only = 0;
        }
        if (read_only == 0) {
            spdlog::warn("--pin-store: this GPU or driver cannot register read-only host memory (the store "
                         "mapping); prompts stage experts through the staging threads");
            return not_pinned("the device cannot register read-only memory" + asked);
        }
        const auto t0 = Clock::now();
        const cudaError_t e = cudaHostRegister(const_cast<std::uint8_t*>(map.data()), map.size(),
                                               cudaHostRegisterReadOnly | cudaHostRegisterPortable);
        pin_seconds_ = static_cast<double>(ns_since(t0)) / 1e9;
        if (e != cudaSuccess) {
            cudaGetLastError();  // registration errors are not sticky: clear it for later checks
            spdlog::warn("--pin-store: registering {} ({:.1f} GB) with CUDA failed after {:.2f} s: {}; prompts "
                         "stage experts through the staging threads",
                         in_.store->path().string(), gb, pin_seconds_, cudaGetErrorString(e));
            return not_pinned(fmt::format("registration failed: {}{}", cudaGetErrorString(e), asked));
        }
        pinned_ = map.data();
        in_.store->set_pinned(true);
        pin_note_ = fmt::format("store pinned ({:.1f} GB in {:.2f} s)", gb, pin_seconds_);
    }

    // --stream-misses (GpuOptions::stream_misses): with the store pinned, half of each layer's
    // missed experts (rounded down) are copied by DMA from the store mapping into prefill's
    // scratch slots (idle during decode: no VRAM added) and computed on the GPU, while the CPU
    // computes the other half from RAM: the two read RAM side by side (docs/CUDA.md "Streamed
    // misses"). Sets stream_note_ for the description; where it cannot run it warns and the CPU
    // keeps every miss.
    void init_stream_misses() {
        if (opt_.stream_misses != 0 && opt_.stream_misses != 1) fail("--stream-misses must be 0 or 1");
        if (opt_.stream_misses == 0) return;
        const auto off = [&](const std::string& why) {
            spdlog::warn("--stream-misses 1: every miss stays on the CPU: {}", why);
            stream_note_ = "misses not streamed: " + why;
        };
        if (pinned_ == nullptr) return off("the store is not pinned (--pin-store)");
        if (pf_scratch_ == nullptr || opt_.scratch_slots < 2) return off("it needs prefill's scratch slots (--scratch 2 or more)");
        NEURAL_CUDA(cudaStreamCreateWithFlags(&miss_stream_, cudaStreamNonBlocking));
        NEURAL_CUDA(cudaEventCreateWithFlags(&miss_landed_, cudaEventDisableTiming));
        NEURAL_CUDA(cudaEventCreateWithFlags(&miss_done_, cudaEventDisableTiming));
        miss_slot_ = dalloc<int>(static_cast<std::size_t>(K_), "streamed misses");
        miss_slot_host_ = HostBuffer(static_cast<std::size_t>(K_) * 4);
        // One graph per layer (few API calls per streamed layer: they are on the critical path):
        // the choices' slots from the pinned host array, then the resident-expert kernel over
        // the scratch slots, added to the resident sum.
        const cuda::ExpertShape shape = expert_shape();
        for (int l = 0; l < L_; ++l) {
            const LayerDevice& ld = layers_[static_cast<std::size_t>(l)];
            NEURAL_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
            NEURAL_CUDA(cudaMemcpyAsync(miss_slot_, miss_slot_host_.ptr, static_cast<std::size_t>(K_) * 4,
                                        cudaMemcpyHostToDevice, stream_));
            cuda::experts_resident(pf_scratch_, stride_, shape, ld.sel, ld.gate, miss_slot_, ld.gate_up_bias,
                                   ld.down_bias, h_, act_, moe_gpu_, stream_, true);
            miss_graphs_.push_back(end_capture());
        }
        stream_note_ = "half of each layer's misses streamed from the pinned store";
    }

    // Layer l's streamed misses (choices ks[0 .. ns)): each record is copied from the pinned
    // store into scratch slot j on miss_stream_ (after the previous streamed layer's kernel, the
    // slots' last reader), then, on stream_ after the layer's graph, the layer's miss graph
    // computes them from those slots and adds their gate-weighted sum, in choice order, to the
    // resident experts' (moe_gpu_), which the next layer's graph adds to x with the CPU's part.
    // The host writes the slot array after this layer's routing, when the previous layer's miss
    // graph (its reader) is done. A prompt synchronizes stream_ before it uses the scratch slots.
    // Deterministic: which misses stream depends only on the routing and the residency.
    void stream_misses(int l, const int* sel, const int* ks, int ns) {
        int* slots = miss_slot_host_.host<int>();
        for (int k = 0; k < K_; ++k) slots[k] = -1;
        NEURAL_CUDA(cudaStreamWaitEvent(miss_stream_, miss_done_, 0));
        for (int j = 0; j < ns; ++j) {
            slots[ks[j]] = j;
            NEURAL_CUDA(cudaMemcpyAsync(pf_scratch_ + static_cast<std::uint64_t>(j) * stride_, raw_record(l, sel[ks[j]]),
                                        record_bytes_, cudaMemcpyHostToDevice, miss_stream_));
        }
        NEURAL_CUDA(cudaEventRecord(miss_landed_, miss_stream_));
        NEURAL_CUDA(cudaStreamWaitEvent(stream_, miss_landed_, 0));
        NEURAL_CUDA(cudaGraphLaunch(miss_graphs_[static_cast<std::size_t>(l)], stream_));
        NEURAL_CUDA(cudaEventRecord(miss_done_, stream_));
    }

    // Prefill buffers (budget-accounted before the slot pool takes the rest; fit.cpp mirrors
    // them in gpu_memory_layout).
    void init_prefill() {
        const std::string& order = opt_.prefill_order;
        if (!is_prefill_order(order)) {
            fail("--prefill-order \"{}\": expected layer, block or token", order);
        }
        if (order == "token") return;
        if (d_ != cuda::kPrefillHeadDim) {
            spdlog::warn("GPU prefill needs head_dim {} (this model: {}); prompts run token by token",
                         cuda::kPrefillHeadDim, d_);
            return;
        }
        if (opt_.prefill_block < 1) fail("--prefill-block must be at least 1");
        if (opt_.scratch_slots < 1) fail("--scratch must be at least 1");
        if (opt_.staging_threads < 1 || opt_.staging_threads > 64) fail("--staging-threads must be 1..64");
        if (opt_.expert_streams != 1 && opt_.expert_streams != 2) fail("--expert-streams must be 1 or 2");
        if (opt_.prefill_cpu_tokens < 0 || opt_.prefill_cpu_tokens > cpu::ExpertKernel::kMaxTokens) {
            fail("--prefill-cpu-tokens must be 0..{}", cpu::ExpertKernel::kMaxTokens);
        }
        if (opt_.prefill_early < 0 || opt_.prefill_early > kMaxPrefillEarly) {
            fail("--prefill-early must be 0..{}", kMaxPrefillEarly);
        }
        const auto Hs = static_cast<std::size_t>(H_), Ks = static_cast<std::size_t>(K_),
                   ctx = static_cast<std::size_t>(ctx_);
        pf_block_ = static_cast<int>(std::min<std::int64_t>(opt_.prefill_block, ctx_));
        const auto B = static_cast<std::size_t>(pf_block_);
        pf_x_ = dalloc<float>(ctx * Hs, "prefill activations");
        pf_acc_ = dalloc<float>(ctx * Hs, "prefill activations");
        NEURAL_CUDA(cudaMemset(pf_acc_, 0, ctx * Hs * 4));
        pf_h_ = dalloc<float>(ctx * Hs, "prefill activations");
        pf_sel_ = dalloc<int>(ctx * Ks, "prefill routing");
        pf_gate_ = dalloc<float>(ctx * Ks, "prefill routing");
        pf_entries_ = dalloc<int>(ctx * Ks, "prefill routing");
        pf_hin_ = dalloc<float>(B * Hs, "prefill block buffers");
        pf_qkv_ = dalloc<float>(B * static_cast<std::size_t>(Q_ + 2 * KV_), "prefill block buffers");
        pf_attn_ = dalloc<float>(B * static_cast<std::size_t>(Q_), "prefill block buffers");
        pf_logits_ = dalloc<float>(B * static_cast<std::size_t>(E_), "prefill block buffers");
        pf_act_ = dalloc<float>(B * static_cast<std::size_t>(I_), "prefill block buffers");
        // --expert-streams 2: a second act buffer, so an expert's gate_up can run beside the
        // previous expert's down (expert_rows). The QKV rows are idle during a layer's experts and
        // larger at gpt-oss's shapes (5,120 columns against 2,880); else its own (fit.cpp mirrors).
        if (opt_.expert_streams == 2) {
            pf_act2_ = Q_ + 2 * KV_ >= I_ ? pf_qkv_ : dalloc<float>(B * static_cast<std::size_t>(I_), "prefill block buffers");
            NEURAL_CUDA(cudaStreamCreateWithFlags(&pf_side_, cudaStreamNonBlocking));
            NEURAL_CUDA(cudaEventCreateWithFlags(&pf_experts_start_, cudaEventDisableTiming));
            for (int b = 0; b < 2; ++b) {
                NEURAL_CUDA(cudaEventCreateWithFlags(&pf_gate_up_done_[b], cudaEventDisableTiming));
                NEURAL_CUDA(cudaEventCreateWithFlags(&pf_act_free_[b], cudaEventDisableTiming));
            }
        }
        // Grouped GEMM's down rows (y, [block, H]): the QKV rows are idle during a layer's experts
        // and are larger at gpt-oss's shapes (5,120 columns against 2,880); else their own.
        if (opt_.grouped_gemm) {
            pf_y_ = Q_ + 2 * KV_ >= H_ ? pf_qkv_ : dalloc<float>(B * Hs, "prefill block buffers");
        }
        const std::uint64_t record = cpu::ExpertRecordView::raw_bytes(H_, I_);
        const std::uint64_t stride = (record + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
        pf_scratch_ = dalloc<std::uint8_t>(static_cast<std::size_t>(opt_.scratch_slots) * stride, "prefill scratch slots");
        for (int i = 0; i < opt_.scratch_slots; ++i) {
            cudaEvent_t a, b;
            NEURAL_CUDA(cudaEventCreateWithFlags(&a, cudaEventDisableTiming));
            NEURAL_CUDA(cudaEventCreateWithFlags(&b, cudaEventDisableTiming));
            pf_landed_.push_back(a);
            pf_free_.push_back(b);
        }
        NEURAL_CUDA(cudaEventCreateWithFlags(&pf_h_ready_, cudaEventDisableTiming));
        NEURAL_CUDA(cudaEventCreateWithFlags(&pf_first_routed_, cudaEventDisableTiming));
        pf_emb_ = HostBuffer(B * Hs * 4);
        pf_route_host_ = HostBuffer(ctx * Ks * 8);
        pf_entries_host_ = HostBuffer(ctx * Ks * 4);
        pf_h_host_ = HostBuffer(ctx * Hs * 4);
        if (opt_.prefill_cpu_tokens > 0) {
            pf_cpu_rows_ = HostBuffer(static_cast<std::size_t>(E_) * static_cast<std::size_t>(opt_.prefill_cpu_tokens) * Hs * 4);
            pf_cpu_start_ = HostBuffer((ctx + 1) * 4);
        }
        prefill_ = true;
    }

    // Whether a captured graph can record a timing event (an external event-record node) and
    // report its elapsed time; tried once on a throwaway graph, the stream left as it was.
    static bool graphs_can_time(cudaStream_t stream) {
        cudaEvent_t a = nullptr, b = nullptr;
        cudaGraph_t g = nullptr;
        cudaGraphExec_t exec = nullptr;
        bool ok = cudaEventCreate(&a) == cudaSuccess && cudaEventCreate(&b) == cudaSuccess &&
                  cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
        if (ok) {
            const bool recorded = cudaEventRecordWithFlags(a, stream, cudaEventRecordExternal) == cudaSuccess &&
                                  cudaEventRecordWithFlags(b, stream, cudaEventRecordExternal) == cudaSuccess;
            ok = cudaStreamEndCapture(stream, &g) == cudaSuccess && recorded;
        }
        float ms = 0;
        ok = ok && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess && cudaGraphLaunch(exec, stream) == cudaSuccess &&
             cudaStreamSynchronize(stream) == cudaSuccess && cudaEventElapsedTime(&ms, a, b) == cudaSuccess;
        if (exec != nullptr) cudaGraphExecDestroy(exec);
        if (g != nullptr) cudaGraphDestroy(g);
        for (cudaEvent_t e : {a, b}) {
            if (e != nullptr) cudaEventDestroy(e);
        }
        (void)cudaGetLastError();  // a refusal above is an answer, not an error for later checks
        return ok;
    }

    void capture_graphs() {
        const ModelConfig& c = *in_.config;
        const cuda::ExpertShape shape = expert_shape();
        float* in_x = in_x_.device<float>();
        float* h_host = h_host_.device<float>();
        float* cpu_out = cpu_out_.device<float>();
        int* route = route_.device<int>();
        const cuda::RouterOut host_out{route, reinterpret_cast<float*>(route + K_), route + 2 * K_};
        // Timing events (the bench's GPU time per token, GpuOptions::time_gpu) where this
        // device's graphs can hold them; else plain events and no GPU times.
        timed_ = opt_.time_gpu && graphs_can_time(stream_);
        cpu_busy_.assign(static_cast<std::size_t>(L_), 0);
        const unsigned event_flags = timed_ ? cudaEventDefault : cudaEventDisableTiming;
        auto event = [&](std::vector<cudaEvent_t>& into) {
            cudaEvent_t ev;
            NEURAL_CUDA(cudaEventCreateWithFlags(&ev, event_flags));
            into.push_back(ev);
            return ev;
        };
        auto mark = [&](cudaEvent_t ev) { NEURAL_CUDA(cudaEventRecordWithFlags(ev, stream_, cudaEventRecordExternal)); };
        for (int l = 0; l < L_; ++l) {
            const LayerDevice& ld = layers_[static_cast<std::size_t>(l)];
            const cudaEvent_t ev = event(routed_);
            const cudaEvent_t start = timed_ ? event(layer_start_) : nullptr;
            const cudaEvent_t end = timed_ ? event(layer_end_) : nullptr;
            NEURAL_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
            if (timed_) mark(start);
            if (l == 0) {
                cuda::copy_vector(in_x, x_, H_, stream_);
            } else {
                cuda::add_moe(x_, moe_gpu_, cpu_out, H_, stream_);
            }
            cuda::rms_norm(x_, ld.input_norm, c.rms_norm_eps, H_, h_, nullptr, stream_);
            cuda::gemv_bf16(ld.qkv_w, ld.qkv_b, h_, qkv_, Q_ + 2 * KV_, H_, false, stream_);
            cuda::rope_kv(qkv_, nq_, nkv_, d_, inv_freq_, concentration_, pos_, ld.k_cache,
                          ld.v_cache, ld.ring, stream_);
            const int window = c.layer_is_sliding[static_cast<std::size_t>(l)] ? c.sliding_window : 0;
            cuda::attention_decode(qkv_, ld.k_cache, ld.v_cache, ld.sinks, nq_, nkv_, d_, window, ld.ring,
                                   pos_, splits_, scratch_, attn_, stream_);
            cuda::gemv_bf16(ld.o_w, ld.o_b, attn_, x_, H_, Q_, true, stream_);
            cuda::rms_norm(x_, ld.post_norm, c.rms_norm_eps, H_, h_, h_host, stream_);
            cuda::gemv_bf16(ld.router_w, ld.router_b, h_, router_logits_, E_, H_, false, stream_);
            cuda::router_topk(router_logits_, E_, K_, table_ + static_cast<std::size_t>(l) * E_,
                              {ld.sel, ld.gate, ld.slot}, host_out, stream_);
            mark(ev);
            cuda::experts_resident(pool_, stride_, shape, ld.sel, ld.gate, ld.slot, ld.gate_up_bias,
                                   ld.down_bias, h_, act_, moe_gpu_, stream_);
            if (timed_) mark(end);
            graphs_.push_back(end_capture());
        }
        if (timed_) {
            event(tail_marks_);
            event(tail_marks_);
        }
        NEURAL_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
        if (timed_) mark(tail_marks_[0]);
        cuda::add_moe(x_, moe_gpu_, cpu_out, H_, stream_);
        cuda::rms_norm(x_, final_norm_, c.rms_norm_eps, H_, h_, nullptr, stream_);
        cuda::gemv_bf16(lm_head_, nullptr, h_, logits_, V_, H_, false, stream_);
        if (timed_) mark(tail_marks_[1]);
        NEURAL_CUDA(cudaMemcpyAsync(logits_host_.ptr, logits_, static_cast<std::size_t>(V_) * 4,
                                    cudaMemcpyDeviceToHost, stream_));
        tail_ = end_capture();
        // Prefill's logits: x_ holds a prompt row (copied from the prefill activations).
        NEURAL_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
        cuda::rms_norm(x_, final_norm_, c.rms_norm_eps, H_, h_, nullptr, stream_);
        cuda::gemv_bf16(lm_head_, nullptr, h_, logits_, V_, H_, false, stream_);
        NEURAL_CUDA(cudaMemcpyAsync(logits_host_.ptr, logits_, static_cast<std::size_t>(V_) * 4,
                                    cudaMemcpyDeviceToHost, stream_));
        tail_rows_ = end_capture();
    }

    cudaGraphExec_t end_capture() {
        cudaGraph_t g = nullptr;
        NEURAL_CUDA(cudaGetLastError());
        NEURAL_CUDA(cudaStreamEndCapture(stream_, &g));
        cudaGraphExec_t exec = nullptr;
        const cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
        cudaGraphDestroy(g);
        NEURAL_CUDA(e);
        return exec;
    }

    void release() {
        if (stream_ != nullptr) cudaStreamSynchronize(stream_);
        if (copy_stream_ != nullptr) cudaStreamSynchronize(copy_stream_);
        if (pf_side_ != nullptr) cudaStreamSynchronize(pf_side_);
        if (miss_stream_ != nullptr) cudaStreamSynchronize(miss_stream_);
        // The store's registration first (no copy from it is in flight any more); the store
        // outlives the backend (Model destroys its backend first).
        if (pinned_ != nullptr) {
            cudaHostUnregister(const_cast<void*>(pinned_));
            in_.store->set_pinned(false);
            pinned_ = nullptr;
        }
        for (auto g : graphs_) cudaGraphExecDestroy(g);
        if (tail_ != nullptr) cudaGraphExecDestroy(tail_);
        if (tail_rows_ != nullptr) cudaGraphExecDestroy(tail_rows_);
        ring_.reset();
        early_.reset();
        if (pf_side_ != nullptr) cudaStreamDestroy(pf_side_);
        if (miss_stream_ != nullptr) cudaStreamDestroy(miss_stream_);
        for (auto g : miss_graphs_) cudaGraphExecDestroy(g);
        for (cudaEvent_t e : {miss_landed_, miss_done_}) {
            if (e != nullptr) cudaEventDestroy(e);
        }
        for (cudaEvent_t e : {pf_experts_start_, pf_gate_up_done_[0], pf_gate_up_done_[1], pf_act_free_[0], pf_act_free_[1]}) {
            if (e != nullptr) cudaEventDestroy(e);
        }
        for (auto e : pf_landed_) cudaEventDestroy(e);
        if (pf_first_routed_ != nullptr) cudaEventDestroy(pf_first_routed_);
        for (auto e : pf_free_) cudaEventDestroy(e);
        if (pf_h_ready_ != nullptr) cudaEventDestroy(pf_h_ready_);
        for (auto e : routed_) cudaEventDestroy(e);
        for (auto e : layer_start_) cudaEventDestroy(e);
        for (auto e : layer_end_) cudaEventDestroy(e);
        for (auto e : tail_marks_) cudaEventDestroy(e);
        for (auto e : capture_done_) cudaEventDestroy(e);
        if (evict_ != nullptr) cudaEventDestroy(evict_);
        for (void* p : allocations_) cudaFree(p);
        allocations_.clear();
        if (stream_ != nullptr) cudaStreamDestroy(stream_);
        if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
        stream_ = copy_stream_ = nullptr;
    }

    // ---- expert records --------------------------------------------------------------------
    // Writes expert (layer, e) as a raw record (the slot image) into dst: a copy of a raw store
    // record, else assembled row by row from the packed store or the checkpoint tensors.
    void fill_record(int layer, int e, std::uint8_t* dst) const {
        if (raw_store_) {
            std::memcpy(dst, raw_record(layer, e), record_bytes_);
            return;
        }
        if (in_.store != nullptr) in_.store->prepare(layer, e);
        const LayerWeights& lw = in_.weights->layers[static_cast<std::size_t>(layer)];
        std::uint64_t off = 0;
        std::vector<std::uint8_t> scale_buf(1024);
        for (const Projection p : {Projection::kGateUp, Projection::kDown}) {
            const Mxfp4Experts& m = p == Projection::kGateUp ? lw.gate_up : lw.down;
            const std::int64_t rows = m.rows, G = m.blocks_per_row();
            std::uint8_t* codes = dst + off;
            std::uint8_t* scales = codes + rows * G * 16;
            for (std::int64_t r = 0; r < rows; ++r) {
                ExpertRow row = in_.store != nullptr
                                    ? in_.store->row(layer, p, e, r, scale_buf.data())
                                    : ExpertRow{m.row_blocks(e, r), m.row_scales(e, r)};
                std::memcpy(codes + r * G * 16, row.blocks, static_cast<std::size_t>(G * 16));
                std::memcpy(scales + r * G, row.scales, static_cast<std::size_t>(G));
            }
            off += static_cast<std::uint64_t>(rows * G * 17);
        }
    }

    // The experts' shape as the decode kernels take it (bf16 hi + lo operands for the GEMMs).
    cuda::ExpertShape expert_shape() const {
        const ModelConfig& c = *in_.config;
        return cuda::ExpertShape{H_, I_, K_, E_, c.swiglu_limit, c.swiglu_alpha};
    }

    // The shape prefill's expert GEMMs get for a layer: fp16 operands (--prefill-fp16) scaled for
    // the bound of their input, the post-attention RMS norm: |x_i| / rms(x) <= sqrt(H), so
    // |h_i| <= sqrt(H) * max|w| (cuda::with_half_operands; a non-finite weight keeps bf16 hi + lo).
    cuda::ExpertShape prefill_expert_shape(const LayerWeights& lw) const {
        const cuda::ExpertShape shape = expert_shape();
        if (!opt_.prefill_fp16) return shape;
        float w_max = 0.0f;
        for (std::int64_t i = 0; i < H_; ++i) {
            const float v = std::fabs(lw.post_norm.at(i));
            w_max = std::isfinite(v) ? std::max(w_max, v) : std::numeric_limits<float>::infinity();
        }
        return cuda::with_half_operands(shape, std::sqrt(static_cast<float>(H_)) * w_max);
    }

    // What the description says about the prefill experts' operands.
    std::string expert_operands() const {
        const auto half = std::count_if(prefill_shapes_.begin(), prefill_shapes_.end(),
                                        [](const cuda::ExpertShape& s) { return s.half_operands; });
        if (half == 0) return "bf16 hi + lo experts";
        if (half == static_cast<std::ptrdiff_t>(prefill_shapes_.size())) return "fp16 experts";
        return fmt::format("fp16 experts in {} of {} layers (the others' norm has no finite bound)", half,
                           prefill_shapes_.size());
    }

    // A raw store's record of expert (layer, e): the slot image, in the store mapping. Every
    // copy or CPU read of a raw record comes through here, so its checksum is checked the first
    // time (ExpertStore::verify_record: an error naming it, never a wrong answer).
    const std::uint8_t* raw_record(int layer, int e) const {
        in_.store->verify_record(layer, e);
        const auto rec = in_.store->record(layer, e);
        if (rec.size() < record_bytes_) fail("store record ({}, {}) is shorter than a raw record", layer, e);
        return rec.data();
    }

    cpu::ExpertInput cpu_input(int layer, int e, int k) {
        const LayerWeights& lw = in_.weights->layers[static_cast<std::size_t>(layer)];
        cpu::ExpertInput x;
        if (in_.store != nullptr) {
            in_.store->prepare(layer, e);  // a damaged record is an error, never a wild read
            const auto rec = in_.store->record(layer, e);
            x.record = cpu::ExpertRecordView::make(
                rec.data(), H_, I_, raw_store_ ? cpu::RecordKind::raw : cpu::RecordKind::packed,
                in_.store->entry(layer, e).payload_bytes);
        } else {
            std::uint8_t* buf = assembled_[static_cast<std::size_t>(k)].host<std::uint8_t>();
            fill_record(layer, e, buf);
            x.record = cpu::ExpertRecordView::make(buf, H_, I_, cpu::RecordKind::raw);
        }
        x.gate_up_bias = lw.gate_up.bias.row(e);
        x.down_bias = lw.down.bias.row(e);
        return x;
    }


    // Token id's embedding row (bf16 in RAM) widened to fp32 into dst [H]: the decode graph's
    // input and the prefill's residual stream start the same way.
    void embed(TokenId id, float* dst) const {
        const Bf16View& emb = in_.weights->embed;
        for (int i = 0; i < H_; ++i) dst[i] = emb.at(id, i);
    }

    // ---- sequence switches and K/V checkpoints -------------------------------------------
    // With a K/V ring, the positions [0, valid) can be kept only while the rings still hold the
    // window before `valid`: positions written since (up to kv_high_) overwrote the rows of the
    // positions a ring's length before them.
    bool ring_keeps(std::int64_t valid) const {
        return kv_ring_ == 0 || valid == 0 || kv_high_ - valid + in_.config->sliding_window - 1 <= kv_ring_;
    }

    // Positions [first, first + count) of one layer's K/V cache (row p, or p % ring) in runs of
    // consecutive rows: copy(device row pointer, index of the run's first position, run length).
    template <typename Copy>
    void for_kv_runs(const LayerDevice& ld, std::int64_t first, std::int64_t count, Copy copy) const {
        for (std::int64_t p = first; p < first + count;) {
            const std::int64_t row = ld.ring > 0 ? p % ld.ring : p;
            const std::int64_t run = ld.ring > 0 ? std::min<std::int64_t>(first + count - p, ld.ring - row) : first + count - p;
            copy(static_cast<std::size_t>(row) * static_cast<std::size_t>(KV_), static_cast<std::size_t>(p - first),
                 static_cast<std::size_t>(run));
            p += run;
        }
    }

    // Checkpoint copies: positions [first, first + count) of layer `ld` to / from host rows
    // (k, v: [count][kv_dim] each, position order).
    void save_kv_rows(const LayerDevice& ld, std::int64_t first, std::int64_t count, float* k, float* v) const {
        const auto kv = static_cast<std::size_t>(KV_);
        for_kv_runs(ld, first, count, [&](std::size_t row, std::size_t i, std::size_t run) {
            NEURAL_CUDA(cudaMemcpy(k + i * kv, ld.k_cache + row, run * kv * 4, cudaMemcpyDeviceToHost));
            NEURAL_CUDA(cudaMemcpy(v + i * kv, ld.v_cache + row, run * kv * 4, cudaMemcpyDeviceToHost));
        });
    }
    void restore_kv_rows(const LayerDevice& ld, std::int64_t first, std::int64_t count, const float* k, const float* v) const {
        const auto kv = static_cast<std::size_t>(KV_);
        for_kv_runs(ld, first, count, [&](std::size_t row, std::size_t i, std::size_t run) {
            NEURAL_CUDA(cudaMemcpy(ld.k_cache + row, k + i * kv, run * kv * 4, cudaMemcpyHostToDevice));
            NEURAL_CUDA(cudaMemcpy(ld.v_cache + row, v + i * kv, run * kv * 4, cudaMemcpyHostToDevice));
        });
    }

    // The GPU holds sequence resident_id_'s K/V for positions [0, resident_len_). Another
    // sequence (id, its tokens `seq`, of which at most `limit` positions may be skipped) keeps
    // what it shares with it in place, or restores a longer matching prefix from a checkpoint;
    // the outgoing sequence is checkpointed first. Returns the positions valid for the incoming one.
    // With a K/V ring the checkpoint keeps the rings' last positions (ring checkpoints,
    // runtime/kv_checkpoints.h) and a restore sets kv_high_ to the restored length.
    std::int64_t switch_sequence(std::uint64_t id, const std::vector<std::int32_t>& seq, std::int64_t limit) {
        const std::span<const std::int32_t> want(seq.data(), static_cast<std::size_t>(limit));
        const std::int64_t held = std::min<std::int64_t>(resident_len_, static_cast<std::int64_t>(resident_tokens_.size()));
        std::int64_t in_place = std::min(
            common_prefix(std::span<const std::int32_t>(resident_tokens_.data(), static_cast<std::size_t>(held)), want), limit);
        if (!ring_keeps(in_place)) in_place = 0;
        BackendCounters* bc = in_.counters;
        constexpr auto rl = std::memory_order_relaxed;
        if (checkpoints_ && held > 0 && resident_id_ != 0) {
            NEURAL_CUDA(cudaStreamSynchronize(stream_));
            // The rings hold positions [kv_high_ - ring, kv_high_); those before `held` are this sequence's.
            const std::int64_t ring_rows = kv_ring_ > 0 ? std::max<std::int64_t>(0, held - std::max<std::int64_t>(0, kv_high_ - kv_ring_)) : held;
            const auto kv = static_cast<std::size_t>(KV_);
            std::size_t floats = 0;
            for (const LayerDevice& ld : layers_) floats += 2 * kv * static_cast<std::size_t>(ld.ring > 0 ? ring_rows : held);
            std::vector<float> data(floats);
            float* at = data.data();
            for (const LayerDevice& ld : layers_) {
                const std::int64_t count = ld.ring > 0 ? ring_rows : held;
                save_kv_rows(ld, held - count, count, at, at + static_cast<std::size_t>(count) * kv);
                at += 2 * kv * static_cast<std::size_t>(count);
            }
            std::vector<std::int32_t> toks(resident_tokens_.begin(), resident_tokens_.begin() + held);
            if (checkpoints_->save(resident_id_, std::move(toks), std::move(data), ring_rows) && bc != nullptr) {
                bc->kv_saved.fetch_add(static_cast<std::uint64_t>(held), rl);
            }
        }
        std::int64_t valid = in_place;
        if (checkpoints_) {
            const KvCheckpoints::Match m = checkpoints_->best(id, want, limit);
            if (m.entry != nullptr && m.length > in_place) {
                NEURAL_CUDA(cudaStreamSynchronize(stream_));
                const auto n = static_cast<std::int64_t>(m.entry->tokens.size());
                const auto kv = static_cast<std::size_t>(KV_);
                const std::int64_t len = m.length;
                const float* at = m.entry->data.data();
                for (const LayerDevice& ld : layers_) {
                    const std::int64_t count = ld.ring > 0 ? m.entry->ring_rows : n;
                    const std::int64_t first = n - count;  // the entry's first position of this layer
                    // Positions [from, len): all of them for a full layer, the ring's reach for a ring layer.
                    const std::int64_t from = ld.ring > 0 ? std::max(first, len - ld.ring) : 0;
                    if (len > from) {
                        const float* k = at + static_cast<std::size_t>(from - first) * kv;
                        restore_kv_rows(ld, from, len - from, k, k + static_cast<std::size_t>(count) * kv);
                    }
                    at += 2 * kv * static_cast<std::size_t>(count);
                }
                valid = len;
                kv_high_ = len;  // the rings now hold this sequence's positions up to len
                if (bc != nullptr) bc->kv_restored.fetch_add(static_cast<std::uint64_t>(len), rl);
            }
        }
        if (bc != nullptr && valid == in_place) bc->kv_reused.fetch_add(static_cast<std::uint64_t>(in_place), rl);
        return valid;
    }

    // ---- prefill ---------------------------------------------------------------------------
    // Runs `work` at positions start .. start + n - 1 (docs/CUDA.md "Prefill"), writing the
    // logits of rows first_out .. n - 1 to `logits_out` ([n - first_out, V]); the observer sees
    // the routing of positions >= observe_from.
    void prefill(const std::vector<TokenId>& work, std::int64_t start, std::int64_t first_out,
                 float* logits_out, std::int64_t observe_from, RouterObserver* observer,
                 const std::atomic<bool>* cancel) {
        const auto t_begin = Clock::now();
        const int n = static_cast<int>(work.size());
        const std::size_t Hs = static_cast<std::size_t>(H_);
        PrefillStats st;
        // Admissions in flight finish first: the host's slot map must equal the device table.
        // Streamed misses' copies into the scratch slots too (their kernels are on stream_,
        // synchronized below before any prompt copy).
        NEURAL_CUDA(cudaStreamSynchronize(copy_stream_));
        if (miss_stream_ != nullptr) NEURAL_CUDA(cudaStreamSynchronize(miss_stream_));
        poll_uploads();

        // The cancel flag is checked per block and layer, and per expert of a layer
        // (expert_rows): a long prompt stops within one block's dense part or one expert. A
        // Cancelled leaves through run(), which drops this call's positions (resident_len_ back
        // to at most pos0, kv_high_ already covers every position written).
        pf_cancel_ = cancel;
        struct ClearCancel {
            const std::atomic<bool>*& p;
            ~ClearCancel() { p = nullptr; }
        } clear_cancel{pf_cancel_};

        // Embeddings (bf16 rows widened on the host) into the prompt's residual stream.
        for (int b0 = 0; b0 < n; b0 += pf_block_) {
            throw_if_cancelled(cancel);
            const int rows = std::min(pf_block_, n - b0);
            float* dst = pf_emb_.host<float>();
            for (int r = 0; r < rows; ++r) embed(work[static_cast<std::size_t>(b0 + r)], dst + static_cast<std::size_t>(r) * Hs);
            NEURAL_CUDA(cudaMemcpyAsync(pf_x_ + static_cast<std::size_t>(b0) * Hs, dst,
                                        static_cast<std::size_t>(rows) * Hs * 4, cudaMemcpyHostToDevice, stream_));
            NEURAL_CUDA(cudaStreamSynchronize(stream_));  // pf_emb_ is reused by the next block
        }

        // Grouped GEMM only for a prompt of one block of 1,024-4,096 new tokens (DESIGN.md).
        const bool grouped = opt_.grouped_gemm && n <= pf_block_ && n >= kGroupedGemmMin && n <= kGroupedGemmMax;
        if (opt_.prefill_order == "layer") {
            const int rows0 = std::min(pf_block_, n);
            const bool early = early_ != nullptr && n > pf_block_;
            std::vector<int> early_of;
            for (int l = 0; l < L_; ++l) {
                throw_if_cancelled(cancel);
                dense_rows(l, 0, rows0, start, st);
                if (early) {
                    // The first block's routing comes to the host as soon as its dense part is
                    // done, while the GPU goes on with the other blocks.
                    NEURAL_CUDA(cudaMemcpyAsync(pf_route_host_.host<int>(), pf_sel_, static_cast<std::size_t>(rows0) * K_ * 4,
                                                cudaMemcpyDeviceToHost, stream_));
                    NEURAL_CUDA(cudaEventRecord(pf_first_routed_, stream_));
                }
                for (int b0 = pf_block_; b0 < n; b0 += pf_block_) {
                    throw_if_cancelled(cancel);
                    dense_rows(l, b0, std::min(pf_block_, n - b0), start, st);
                }
                if (early) early_of = stage_early(l, rows0, st);
                expert_rows(l, 0, n, start, observe_from, observer, st, early_of, grouped);
            }
        } else {
            for (int b0 = 0; b0 < n; b0 += pf_block_) {
                const int rows = std::min(pf_block_, n - b0);
                for (int l = 0; l < L_; ++l) {
                    throw_if_cancelled(cancel);
                    dense_rows(l, b0, rows, start, st);
                    expert_rows(l, b0, rows, start, observe_from, observer, st, {}, grouped);
                }
            }
        }

        // Logits of the rows asked for, through the decode tail's kernels.
        for (std::int64_t r = first_out; r < n; ++r) {
            throw_if_cancelled(cancel);
            NEURAL_CUDA(cudaMemcpyAsync(x_, pf_x_ + static_cast<std::size_t>(r) * Hs, Hs * 4,
                                        cudaMemcpyDeviceToDevice, stream_));
            NEURAL_CUDA(cudaGraphLaunch(tail_rows_, stream_));
            NEURAL_CUDA(cudaStreamSynchronize(stream_));
            std::memcpy(logits_out + (r - first_out) * V_, logits_host_.ptr, static_cast<std::size_t>(V_) * 4);
        }
        NEURAL_CUDA(cudaStreamSynchronize(stream_));
        const std::uint64_t total_ns = ns_since(t_begin);
        spdlog::info("prefill: {} tokens in {:.3f} s ({:.0f} tok/s), {}-major: host launch {:.3f} s, routing sync "
                     "{:.3f} s, staging wait {:.3f} s, CPU multi-token {:.3f} s (waited {:.3f} s); {} experts "
                     "staged ({:.2f} GB, {} early), {} from slots, {} on the CPU",
                     n, total_ns / 1e9, n / (total_ns / 1e9), opt_.prefill_order, st.launch_ns / 1e9,
                     st.route_ns / 1e9, st.staging_ns / 1e9, st.cpu_ns / 1e9, st.cpu_wait_ns / 1e9, st.staged,
                     static_cast<double>(st.staged * record_bytes_) / 1e9, st.early, st.resident, st.cpu_groups);
        if (BackendCounters* bc = in_.counters) {
            constexpr auto rl = std::memory_order_relaxed;
            bc->prefill_tokens.fetch_add(static_cast<std::uint64_t>(n), rl);
            bc->prefill_ns.fetch_add(total_ns, rl);
            bc->prefill_launch_ns.fetch_add(st.launch_ns, rl);
            bc->prefill_route_ns.fetch_add(st.route_ns, rl);
            bc->prefill_staging_ns.fetch_add(st.staging_ns, rl);
            bc->prefill_cpu_ns.fetch_add(st.cpu_ns, rl);
            bc->prefill_cpu_wait_ns.fetch_add(st.cpu_wait_ns, rl);
            bc->prefill_staged.fetch_add(st.staged, rl);
            bc->prefill_staged_bytes.fetch_add(st.staged * record_bytes_, rl);
            bc->prefill_resident.fetch_add(st.resident, rl);
            bc->prefill_cpu_groups.fetch_add(st.cpu_groups, rl);
            bc->prefill_early.fetch_add(st.early, rl);
            bc->prefill_grouped.fetch_add(st.grouped, rl);
        }
    }

    struct PrefillStats {
        std::uint64_t launch_ns = 0, route_ns = 0, staging_ns = 0, cpu_ns = 0, cpu_wait_ns = 0;
        std::uint64_t staged = 0, resident = 0, cpu_groups = 0, early = 0, grouped = 0;
    };

    // Layer l, layer-major, more than one block: the experts that the first block's `rows0`
    // tokens alone send to staging (not resident, more than --prefill-cpu-tokens tokens: the
    // whole prompt can only add tokens) start staging now, up to --prefill-early of them in
    // index order, into the early ring's own pinned buffers, while the GPU runs the other blocks'
    // dense parts. Returns expert -> early job (-1: not early); expert_rows uploads them in the
    // usual expert index order, so the results are the same bits as without.
    std::vector<int> stage_early(int l, int rows0, PrefillStats& st) {
        const auto t0 = Clock::now();
        NEURAL_CUDA(cudaEventSynchronize(pf_first_routed_));
        st.route_ns += ns_since(t0);
        const int* sel = pf_route_host_.host<int>();
        std::vector<int> count(static_cast<std::size_t>(E_), 0);
        for (std::size_t i = 0; i < static_cast<std::size_t>(rows0) * static_cast<std::size_t>(K_); ++i) {
            const int e = sel[i];
            if (e < 0 || e >= E_) fail("prefill: router chose expert {} of {}", e, E_);
            ++count[static_cast<std::size_t>(e)];
        }
        std::vector<int> early_of(static_cast<std::size_t>(E_), -1);
        std::vector<std::pair<int, int>> jobs;
        for (int e = 0; e < E_ && static_cast<int>(jobs.size()) < opt_.prefill_early; ++e) {
            if (count[static_cast<std::size_t>(e)] > opt_.prefill_cpu_tokens && residency_->slot_of(l, e) < 0) {
                early_of[static_cast<std::size_t>(e)] = static_cast<int>(jobs.size());
                jobs.emplace_back(l, e);
            }
        }
        if (!jobs.empty()) early_->start(std::move(jobs));
        return early_of;
    }

    // Layer l's attention half for rows b0 .. b0 + rows - 1 of the prompt (positions start + b0 ..):
    // norm, QKV, RoPE + K/V, attention, output projection (+= x), norm (the experts' input),
    // router, top-k.
    void dense_rows(int l, int b0, int rows, std::int64_t start, PrefillStats& st) {
        const auto t0 = Clock::now();
        const ModelConfig& c = *in_.config;
        const LayerDevice& ld = layers_[static_cast<std::size_t>(l)];
        const std::size_t Hs = static_cast<std::size_t>(H_);
        float* x = pf_x_ + static_cast<std::size_t>(b0) * Hs;
        const int qkv_cols = Q_ + 2 * KV_;
        const int pos0 = static_cast<int>(start + b0);
        cuda::rms_norm_rows(x, ld.input_norm, c.rms_norm_eps, H_, rows, pf_hin_, stream_);
        cuda::gemm_bf16_rows(pf_hin_, rows, H_, ld.qkv_w, ld.qkv_b, qkv_cols, pf_qkv_, qkv_cols, false, stream_);
        cuda::rope_kv_rows(pf_qkv_, rows, nq_, nkv_, d_, inv_freq_, concentration_, pos0, ld.k_cache,
                           ld.v_cache, ld.ring, stream_);
        const int window = c.layer_is_sliding[static_cast<std::size_t>(l)] ? c.sliding_window : 0;
        cuda::attention_prefill(pf_qkv_, qkv_cols, rows, pos0, ld.k_cache, ld.v_cache, ld.sinks, nq_, nkv_,
                                window, ld.ring, pf_attn_, stream_);
        cuda::gemm_bf16_rows(pf_attn_, rows, Q_, ld.o_w, ld.o_b, H_, x, H_, true, stream_);
        float* h = pf_h_ + static_cast<std::size_t>(b0) * Hs;
        cuda::rms_norm_rows(x, ld.post_norm, c.rms_norm_eps, H_, rows, h, stream_);
        cuda::gemm_bf16_rows(h, rows, H_, ld.router_w, ld.router_b, E_, pf_logits_, E_, false, stream_);
        cuda::router_topk_rows(pf_logits_, rows, E_, K_, pf_sel_ + static_cast<std::size_t>(b0) * K_,
                               pf_gate_ + static_cast<std::size_t>(b0) * K_, stream_);
        NEURAL_CUDA(cudaGetLastError());
        st.launch_ns += ns_since(t0);
    }

    // Layer l's experts for rows b0 .. b0 + rows - 1: the routing comes to the host, tokens are
    // grouped by expert (token order within a group), and each expert runs once over its tokens,
    // in expert index order: from its VRAM slot, staged through the ring into a scratch slot, or
    // (few tokens, not resident) on the CPU with the multi-token kernel while the GPU works.
    void expert_rows(int l, int b0, int rows, std::int64_t start, std::int64_t observe_from,
                     RouterObserver* observer, PrefillStats& st, const std::vector<int>& early_of, bool grouped) {
        const std::size_t Hs = static_cast<std::size_t>(H_), Ks = static_cast<std::size_t>(K_);
        const LayerDevice& ld = layers_[static_cast<std::size_t>(l)];
        int* sel_host = pf_route_host_.host<int>();
        float* gate_host = reinterpret_cast<float*>(sel_host + static_cast<std::size_t>(ctx_) * Ks);
        auto t0 = Clock::now();
        NEURAL_CUDA(cudaMemcpyAsync(sel_host + b0 * Ks, pf_sel_ + b0 * Ks, rows * Ks * 4, cudaMemcpyDeviceToHost, stream_));
        NEURAL_CUDA(cudaMemcpyAsync(gate_host + b0 * Ks, pf_gate_ + b0 * Ks, rows * Ks * 4, cudaMemcpyDeviceToHost, stream_));
        NEURAL_CUDA(cudaStreamSynchronize(stream_));
        st.route_ns += ns_since(t0);
        t0 = Clock::now();

        // Groups: entries t * K + k (t relative to the prompt), token order within an expert.
        std::vector<int> count(static_cast<std::size_t>(E_), 0);
        for (int t = b0; t < b0 + rows; ++t) {
            const int* sel = sel_host + static_cast<std::size_t>(t) * Ks;
            for (int k = 0; k < K_; ++k) {
                const int e = sel[k];
                if (e < 0 || e >= E_) fail("prefill: router chose expert {} of {}", e, E_);
                ++count[static_cast<std::size_t>(e)];
            }
            residency_->observe(l, std::span<const int>(sel, Ks), true);
            if (observer != nullptr && start + t >= observe_from) {
                observer->on_route(l, start + t, std::span<const int>(sel, Ks),
                                   std::span<const float>(gate_host + static_cast<std::size_t>(t) * Ks, Ks));
            }
        }
        std::vector<int> offset(static_cast<std::size_t>(E_) + 1, 0);
        for (int e = 0; e < E_; ++e) offset[static_cast<std::size_t>(e) + 1] = offset[static_cast<std::size_t>(e)] + count[static_cast<std::size_t>(e)];
        int* entries = pf_entries_host_.host<int>();
        {
            std::vector<int> fill(offset.begin(), offset.end() - 1);
            for (int t = b0; t < b0 + rows; ++t) {
                for (int k = 0; k < K_; ++k) {
                    const int e = sel_host[static_cast<std::size_t>(t) * Ks + static_cast<std::size_t>(k)];
                    entries[fill[static_cast<std::size_t>(e)]++] = t * K_ + k;
                }
            }
        }
        NEURAL_CUDA(cudaMemcpyAsync(pf_entries_, entries, static_cast<std::size_t>(offset.back()) * 4,
                                    cudaMemcpyHostToDevice, stream_));

        // Where each expert runs.
        enum Where { kNone, kSlot, kStaged, kCpu };
        std::vector<Where> where(static_cast<std::size_t>(E_), kNone);
        std::vector<std::pair<int, int>> staged;
        std::vector<int> cpu_experts;
        for (int e = 0; e < E_; ++e) {
            const int cnt = count[static_cast<std::size_t>(e)];
            if (cnt == 0) continue;
            if (residency_->slot_of(l, e) >= 0) {
                where[static_cast<std::size_t>(e)] = kSlot;
            } else if (cnt <= opt_.prefill_cpu_tokens) {
                where[static_cast<std::size_t>(e)] = kCpu;
                cpu_experts.push_back(e);
            } else {
                where[static_cast<std::size_t>(e)] = kStaged;
                if (early_of.empty() || early_of[static_cast<std::size_t>(e)] < 0) staged.emplace_back(l, e);
            }
            if (!early_of.empty() && early_of[static_cast<std::size_t>(e)] >= 0 && where[static_cast<std::size_t>(e)] != kStaged) {
                fail("prefill: expert {} of layer {} was staged early but is not staged", e, l);
            }
        }
        // A pinned store's records need no producer (expert_rows copies them from the mapping).
        if (!staged.empty() && pinned_ == nullptr) ring_->start(staged);

        // The CPU's experts on a worker thread: one output row per (token, choice), grouped by
        // token (CSR in pf_cpu_start_) so the add kernel sums a token's rows in a fixed order.
        std::future<std::uint64_t> cpu_job;
        const int* cpu_start_dev = nullptr;
        if (!cpu_experts.empty()) {
            NEURAL_CUDA(cudaMemcpyAsync(pf_h_host_.host<float>() + static_cast<std::size_t>(b0) * Hs,
                                        pf_h_ + static_cast<std::size_t>(b0) * Hs,
                                        static_cast<std::size_t>(rows) * Hs * 4, cudaMemcpyDeviceToHost, stream_));
            NEURAL_CUDA(cudaEventRecord(pf_h_ready_, stream_));
            int* cstart = pf_cpu_start_.host<int>();
            std::vector<int> row_of_entry(static_cast<std::size_t>(rows) * Ks, -1);
            int next = 0;
            for (int t = b0; t < b0 + rows; ++t) {
                cstart[t - b0] = next;
                for (int k = 0; k < K_; ++k) {
                    const int e = sel_host[static_cast<std::size_t>(t) * Ks + static_cast<std::size_t>(k)];
                    if (where[static_cast<std::size_t>(e)] == kCpu) row_of_entry[static_cast<std::size_t>(t - b0) * Ks + static_cast<std::size_t>(k)] = next++;
                }
            }
            cstart[rows] = next;
            cpu_start_dev = pf_cpu_start_.device<int>();
            cpu_job = std::async(std::launch::async, [this, l, b0, rows, &cpu_experts, &offset, entries, gate_host,
                                                      row_of_entry = std::move(row_of_entry)]() {
                const auto c0 = Clock::now();
                NEURAL_CUDA(cudaEventSynchronize(pf_h_ready_));
                const std::size_t H = static_cast<std::size_t>(H_);
                const float* hb = pf_h_host_.host<float>();
                float* out_rows = pf_cpu_rows_.host<float>();
                for (const int e : cpu_experts) {
                    const int o0 = offset[static_cast<std::size_t>(e)], o1 = offset[static_cast<std::size_t>(e) + 1];
                    std::vector<const float*> xp;
                    std::vector<float*> outp;
                    std::vector<float> w;
                    for (int j = o0; j < o1; ++j) {
                        const int entry = entries[j], t = entry / K_;
                        const float* xr = hb + static_cast<std::size_t>(t) * H;
                        float* orow = out_rows + static_cast<std::size_t>(row_of_entry[static_cast<std::size_t>(entry - b0 * K_)]) * H;
                        std::memset(orow, 0, H * 4);
                        xp.push_back(xr);
                        outp.push_back(orow);
                        w.push_back(gate_host[entry]);
                    }
                    cpu::ExpertInput in = cpu_input(l, e, 0);
                    kernel_->multi(*team_, in, xp, w, outp);
                }
                (void)rows;
                return ns_since(c0);
            });
            st.cpu_groups += cpu_experts.size();
        }

        // The GPU's experts, in expert index order.
        const cuda::ExpertShape& shape = prefill_shapes_[static_cast<std::size_t>(l)];
        std::size_t next_staged = 0, next_scratch = 0;
        std::uint64_t staging_wait = 0;
        // Grouped GEMM: resident experts' jobs (an expert's rows, at most a block) wait here until
        // a group is full (kMaxGroupedExperts jobs or a block of rows) or a staged expert comes next
        // (it runs alone, as soon as its copy lands: grouping staged experts made the GPU wait for
        // several copies and cost 13% on the 20b staging-bound prompt, docs/BENCHMARKS.md).
        std::vector<cuda::ExpertJob> group;
        int group_rows = 0;
        const auto flush = [&] {
            if (group.empty()) return;
            cuda::expert_gemm_grouped(group.data(), static_cast<int>(group.size()), shape, pf_entries_, pf_h_, pf_gate_,
                                      ld.gate_up_bias, ld.down_bias, pf_act_, pf_y_, pf_acc_, stream_);
            ++st.grouped;
            group.clear();
            group_rows = 0;
        };
        // --expert-streams 2 (not with grouped GEMM, whose down rows use the QKV rows too): each
        // expert's gate_up runs on pf_side_ into act buffer n % 2 while the previous expert's down
        // runs on stream_, so one launch's tail wave and the downs' partial waves (half as many
        // blocks as a gate_up) leave no SMs idle. The downs stay on stream_ in expert order, each
        // after its own gate_up: acc is the same bits as with one stream (tested).
        const bool overlap = pf_side_ != nullptr && !grouped;
        cudaStream_t gate_up_stream = overlap ? pf_side_ : stream_;
        int launches = 0;
        if (overlap) {
            // This block's h, entries and routing (and the QKV rows' last reader) come first.
            NEURAL_CUDA(cudaEventRecord(pf_experts_start_, stream_));
            NEURAL_CUDA(cudaStreamWaitEvent(pf_side_, pf_experts_start_, 0));
        }
        try {
            for (int e = 0; e < E_; ++e) {
                const Where w = where[static_cast<std::size_t>(e)];
                if (w != kSlot && w != kStaged) continue;
                // Inside the try: a cancel waits for the CPU's experts and the side stream.
                throw_if_cancelled(pf_cancel_);
                const std::uint8_t* record;
                int scratch = -1;
                if (w == kSlot) {
                    record = pool_ + static_cast<std::uint64_t>(residency_->slot_of(l, e)) * stride_;
                    ++st.resident;
                } else {
                    // The group's experts come before this one: launched before the GPU waits for
                    // this one's copy (and before the host waits for its producer).
                    flush();
                    // A pinned store's record is copied straight from the mapping (registered
                    // with CUDA); else from the early ring (staged since the first block's
                    // routing) or the ring.
                    const void* src;
                    StagingRing* from = nullptr;
                    std::size_t j = 0;
                    if (pinned_ != nullptr) {
                        src = raw_record(l, e);
                    } else {
                        const int ej = early_of.empty() ? -1 : early_of[static_cast<std::size_t>(e)];
                        from = ej >= 0 ? early_.get() : ring_.get();
                        j = ej >= 0 ? static_cast<std::size_t>(ej) : next_staged++;
                        if (ej >= 0) ++st.early;
                        const auto w0 = Clock::now();
                        src = from->wait(j).ptr;
                        staging_wait += ns_since(w0);
                    }
                    scratch = static_cast<int>(next_scratch++ % pf_landed_.size());
                    std::uint8_t* slot = pf_scratch_ + static_cast<std::uint64_t>(scratch) * stride_;
                    // The scratch slot's previous expert must be done before it is overwritten.
                    NEURAL_CUDA(cudaStreamWaitEvent(copy_stream_, pf_free_[static_cast<std::size_t>(scratch)], 0));
                    NEURAL_CUDA(cudaMemcpyAsync(slot, src, record_bytes_, cudaMemcpyHostToDevice, copy_stream_));
                    if (from != nullptr) from->issued(j, copy_stream_);
                    NEURAL_CUDA(cudaEventRecord(pf_landed_[static_cast<std::size_t>(scratch)], copy_stream_));
                    // The gate_up waits for the copy; the down waits for the gate_up.
                    NEURAL_CUDA(cudaStreamWaitEvent(gate_up_stream, pf_landed_[static_cast<std::size_t>(scratch)], 0));
                    record = slot;
                    ++st.staged;
                }
                const int o0 = offset[static_cast<std::size_t>(e)];
                const int cnt = count[static_cast<std::size_t>(e)];
                for (int m0 = 0; m0 < cnt; m0 += pf_block_) {
                    const int rows_m = std::min(pf_block_, cnt - m0);
                    if (overlap) {
                        const int b = launches++ % 2;
                        float* act = b == 0 ? pf_act_ : pf_act2_;
                        // act buffer b is free once the down of two launches ago has read it.
                        NEURAL_CUDA(cudaStreamWaitEvent(pf_side_, pf_act_free_[b], 0));
                        cuda::expert_gemm_gate_up(record, e, shape, pf_entries_ + o0 + m0, rows_m, pf_h_,
                                                  ld.gate_up_bias, act, pf_side_);
                        NEURAL_CUDA(cudaEventRecord(pf_gate_up_done_[b], pf_side_));
                        NEURAL_CUDA(cudaStreamWaitEvent(stream_, pf_gate_up_done_[b], 0));
                        cuda::expert_gemm_down(record, e, shape, pf_entries_ + o0 + m0, rows_m, act, pf_gate_,
                                               ld.down_bias, pf_acc_, stream_);
                        NEURAL_CUDA(cudaEventRecord(pf_act_free_[b], stream_));
                        continue;
                    }
                    if (!grouped || w == kStaged) {
                        cuda::expert_gemm(record, e, shape, pf_entries_ + o0 + m0, rows_m, pf_h_, pf_gate_,
                                          ld.gate_up_bias, ld.down_bias, pf_act_, pf_acc_, stream_);
                        continue;
                    }
                    if (static_cast<int>(group.size()) == cuda::kMaxGroupedExperts || group_rows + rows_m > pf_block_) flush();
                    group.push_back(cuda::ExpertJob{record, e, o0 + m0, rows_m, group_rows});
                    group_rows += rows_m;
                }
                if (scratch >= 0) NEURAL_CUDA(cudaEventRecord(pf_free_[static_cast<std::size_t>(scratch)], stream_));
            }
            flush();
            NEURAL_CUDA(cudaGetLastError());
        } catch (...) {
            if (cpu_job.valid()) cpu_job.wait();
            // A gate_up whose down was not enqueued is not ordered before stream_'s later work.
            if (overlap) cudaStreamSynchronize(pf_side_);
            throw;
        }
        st.staging_ns += staging_wait;
        st.launch_ns += ns_since(t0) - staging_wait;
        if (cpu_job.valid()) {
            const auto w0 = Clock::now();
            st.cpu_ns += cpu_job.get();
            st.cpu_wait_ns += ns_since(w0);
        }
        const std::size_t xs_off = static_cast<std::size_t>(b0) * Hs;
        cuda::add_moe_rows(pf_x_ + xs_off, pf_acc_ + xs_off, H_, rows, cpu_start_dev,
                           cpu_start_dev != nullptr ? pf_cpu_rows_.device<float>() : nullptr, stream_);
        NEURAL_CUDA(cudaGetLastError());
    }

    // ---- the token loop --------------------------------------------------------------------
    std::vector<float> run(std::span<const TokenId> tokens, KvCache& cache, const ForwardOptions& opt) {
        const auto T = static_cast<std::int64_t>(tokens.size());
        if (T == 0) fail("forward: no tokens to process");
        for (TokenId t : tokens) {
            if (t < 0 || t >= V_) fail("token id {} is outside the model's vocabulary (0..{})", t, V_ - 1);
        }
        const std::int64_t pos0 = cache.size();
        if (pos0 + T > ctx_) {
            fail("context of {} tokens exceeds the {} positions of the GPU K/V cache (--context; the "
                 "model allows {})", pos0 + T, ctx_, in_.config->max_position_embeddings);
        }
        NEURAL_CUDA(cudaSetDevice(opt_.device));
        std::vector<std::int32_t>& seq = cache.tokens();
        if (static_cast<std::int64_t>(seq.size()) < pos0) {
            fail("this K/V cache holds {} positions without their tokens (filled by another backend)", pos0);
        }
        seq.resize(static_cast<std::size_t>(pos0));
        // The sequence after this call: the cache's tokens, then the new ones.
        std::vector<std::int32_t> full(seq);
        full.insert(full.end(), tokens.begin(), tokens.end());
        // The GPU holds one sequence's K/V (resident_tokens_). Positions before `valid` are kept:
        // those whose tokens match what the GPU holds (this cache's, or another sequence's that
        // starts the same way), or a longer prefix restored from a K/V checkpoint. New tokens can
        // be skipped too, except the rows whose logits are asked for and when an observer must
        // see every route (neural rank).
        const std::int64_t limit = opt.all_logits || opt.observer != nullptr ? pos0 : pos0 + T - 1;
        // Without --kv-checkpoints only this cache's own positions are kept (the rule before
        // checkpoints existed; the sharing rules above are opt-in until they have run on a GPU).
        std::int64_t valid;
        if (checkpoints_ == nullptr) {
            valid = cache.id() == resident_id_ ? std::min(resident_len_, pos0) : 0;
            // With --kv-ring, positions written after `valid` (an edit, a regenerate) may have
            // overwritten the window before it in the sliding layers' rings: then start over.
            if (!ring_keeps(valid)) valid = 0;
        } else if (cache.id() == resident_id_) {
            const std::int64_t held = std::min<std::int64_t>(resident_len_, static_cast<std::int64_t>(resident_tokens_.size()));
            valid = std::min(common_prefix(std::span<const std::int32_t>(resident_tokens_.data(), static_cast<std::size_t>(held)),
                                           full),
                             limit);
            if (!ring_keeps(valid)) valid = 0;
        } else {
            valid = switch_sequence(cache.id(), full, limit);
        }
        if (in_.counters != nullptr && pos0 > valid) {
            in_.counters->kv_reprocessed.fetch_add(static_cast<std::uint64_t>(pos0 - valid), std::memory_order_relaxed);
        }
        resident_id_ = cache.id();
        resident_len_ = valid;
        // Highest position written since the K/V last started over (the ring rule above).
        kv_high_ = valid == 0 ? pos0 + T : std::max(kv_high_, pos0 + T);
        resident_tokens_.assign(full.begin(), full.begin() + valid);
        const std::int64_t first_out = opt.all_logits ? 0 : T - 1;  // among the new tokens
        std::vector<float> logits(static_cast<std::size_t>((T - first_out) * V_));
        try {
            if (prefill_ && pos0 + T - valid >= 2) {
                // Everything from `valid` on at once: re-processed positions and the prompt.
                const std::vector<TokenId> work(full.begin() + valid, full.end());
                prefill(work, valid, pos0 + first_out - valid, logits.data(), pos0, opt.observer, opt.cancel);
            } else {
                for (std::int64_t p = valid; p < pos0 + T; ++p) {
                    const bool fresh = p >= pos0;
                    float* out = fresh && p - pos0 >= first_out ? logits.data() + (p - pos0 - first_out) * V_ : nullptr;
                    token(full[static_cast<std::size_t>(p)], p, !fresh || T > 1, out,
                          fresh ? opt.observer : nullptr, opt.cancel);
                    resident_len_ = p + 1;
                }
            }
        } catch (...) {
            cudaStreamSynchronize(stream_);
            cudaStreamSynchronize(copy_stream_);
            if (miss_stream_ != nullptr) cudaStreamSynchronize(miss_stream_);
            if (ring_) ring_->abandon();
            if (early_) early_->abandon();
            // The cache stays at pos0 (contract); the GPU keeps what was computed for it.
            resident_len_ = std::min(resident_len_, pos0);
            resident_tokens_.assign(full.begin(), full.begin() + resident_len_);
            throw;
        }
        resident_len_ = pos0 + T;
        resident_tokens_ = full;
        seq = std::move(full);
        cache.commit(pos0 + T);
        return logits;
    }

    void token(TokenId id, std::int64_t pos, bool prompt, float* logits_out, RouterObserver* observer,
               const std::atomic<bool>* cancel) {
        BackendCounters* bc = in_.counters;
        telemetry::MoeCounters* mc = in_.moe;
        const bool counting = mc != nullptr && mc->enabled.load(std::memory_order_relaxed);
        *pos_host_.host<int>() = static_cast<int>(pos);
        NEURAL_CUDA(cudaMemcpyAsync(pos_, pos_host_.ptr, 4, cudaMemcpyHostToDevice, stream_));
        embed(id, in_x_.host<float>());
        volatile int* route = route_.host<int>();
        const float* h_host = h_host_.host<float>();
        float* cpu_out = cpu_out_.host<float>();
        std::uint64_t submit = 0, wait = 0, cpu_ns = 0, adm_ns = 0, hits = 0, misses = 0, streamed_total = 0;
        for (int l = 0; l < L_; ++l) {
            throw_if_cancelled(cancel);
            auto t0 = Clock::now();
            NEURAL_CUDA(cudaGraphLaunch(graphs_[static_cast<std::size_t>(l)], stream_));
            submit += ns_since(t0);
            t0 = Clock::now();
            for (;;) {
                const cudaError_t q = cudaEventQuery(routed_[static_cast<std::size_t>(l)]);
                if (q == cudaSuccess) break;
                if (q != cudaErrorNotReady) NEURAL_CUDA(q);
                std::this_thread::yield();
            }
            wait += ns_since(t0);
            int sel[cuda::kRouterMaxK], slot[cuda::kRouterMaxK];
            float gate[cuda::kRouterMaxK];
            for (int k = 0; k < K_; ++k) {
                sel[k] = route[k];
                const int g = route[K_ + k];
                std::memcpy(&gate[k], &g, 4);
                slot[k] = route[2 * K_ + k];
            }
            if (observer != nullptr) {
                observer->on_route(l, pos, std::span<const int>(sel, static_cast<std::size_t>(K_)),
                                   std::span<const float>(gate, static_cast<std::size_t>(K_)));
            }
            residency_->observe(l, std::span<const int>(sel, static_cast<std::size_t>(K_)), prompt);

            // The misses, on the CPU, while the GPU computes the resident experts; with
            // --stream-misses, half of them (rounded down; not those waiting for admission,
            // which the CPU captures) are streamed to the GPU instead.
            t0 = Clock::now();
            std::memset(cpu_out, 0, static_cast<std::size_t>(H_) * 4);
            cpu::ExpertInput inputs[cuda::kRouterMaxK];
            int capture_of[cuda::kRouterMaxK], missed_k[cuda::kRouterMaxK], streamed_k[cuda::kRouterMaxK];
            bool admit[cuda::kRouterMaxK], streamed[cuda::kRouterMaxK] = {};
            for (int k = 0; k < K_; ++k) {
                admit[k] = slot[k] < 0 && raw_store_ && !residency_->frozen() && residency_->admission_for(l, sel[k]);
            }
            const int ns = miss_stream_ == nullptr
                               ? 0
                               : streamed_choices(std::span<const int>(slot, static_cast<std::size_t>(K_)),
                                                  std::span<const bool>(admit, static_cast<std::size_t>(K_)),
                                                  opt_.scratch_slots, streamed_k);
            for (int j = 0; j < ns; ++j) streamed[streamed_k[j]] = true;
            int n = 0;
            for (int k = 0; k < K_; ++k) {
                if (slot[k] >= 0) {
                    ++hits;
                    continue;
                }
                if (streamed[k]) continue;
                inputs[n] = cpu_input(l, sel[k], k);
                inputs[n].weight = gate[k];
                capture_of[n] = -1;
                missed_k[n] = k;
                if (admit[k]) {
                    const int b = free_capture();
                    if (b >= 0) {
                        inputs[n].capture = captures_[static_cast<std::size_t>(b)].host<std::uint8_t>();
                        capture_of[n] = b;
                        capture_busy_[static_cast<std::size_t>(b)] = true;
                    }
                }
                ++n;
            }
            if (ns > 0) {
                const auto s0 = Clock::now();
                stream_misses(l, sel, streamed_k, ns);
                streamed_total += static_cast<std::uint64_t>(ns);
                submit += ns_since(s0);
                t0 = Clock::now();
            }
            if (n > 0) kernel_->decode(*team_, std::span<const cpu::ExpertInput>(inputs, static_cast<std::size_t>(n)), h_host, cpu_out);
            cpu_busy_[static_cast<std::size_t>(l)] = n > 0;
            misses += static_cast<std::uint64_t>(n);
            cpu_ns += ns_since(t0);

            // Admissions: start uploads of what was captured (or assemble candidates from a
            // packed store / the checkpoint), flip the table for uploads that landed.
            t0 = Clock::now();
            if (!residency_->frozen()) {
                for (int j = 0; j < n; ++j) {
                    const int expert = sel[missed_k[j]];
                    const auto pending = residency_->admission_for(l, expert);
                    if (!pending) continue;
                    int b = capture_of[j];
                    if (b < 0 && !raw_store_) {
                        // Packed store / checkpoint: a record is not a slot image, so admission
                        // assembles one (an extra pass over the expert, counted here).
                        b = free_capture();
                        if (b < 0) continue;
                        capture_busy_[static_cast<std::size_t>(b)] = true;
                        fill_record(l, expert, captures_[static_cast<std::size_t>(b)].host<std::uint8_t>());
                    }
                    if (b < 0) continue;
                    start_upload(*pending, b);
                }
                poll_uploads();
            }
            adm_ns += ns_since(t0);
        }
        if (logits_out != nullptr) {
            auto t0 = Clock::now();
            NEURAL_CUDA(cudaGraphLaunch(tail_, stream_));
            submit += ns_since(t0);
            t0 = Clock::now();
            NEURAL_CUDA(cudaStreamSynchronize(stream_));
            wait += ns_since(t0);
            std::memcpy(logits_out, logits_host_.ptr, static_cast<std::size_t>(V_) * 4);
            if (bc != nullptr && timed_) add_gpu_times(*bc);
        }
        if (!prompt) residency_->end_token();
        if (bc != nullptr) {
            bc->graph_submit_ns.fetch_add(submit, std::memory_order_relaxed);
            bc->gpu_wait_ns.fetch_add(wait, std::memory_order_relaxed);
            bc->admission_ns.fetch_add(adm_ns, std::memory_order_relaxed);
            bc->experts_hit.fetch_add(hits, std::memory_order_relaxed);
            bc->experts_streamed.fetch_add(streamed_total, std::memory_order_relaxed);
        }
        if (counting) {
            mc->ns.fetch_add(cpu_ns, std::memory_order_relaxed);
            mc->experts.fetch_add(misses, std::memory_order_relaxed);
            // A raw record is exactly an expert's MXFP4 blocks + scales (3 H I / 32 * 17 bytes).
            mc->bytes.fetch_add(misses * record_bytes_, std::memory_order_relaxed);
        }
    }

    // The token's GPU time from the timing marks of its graphs (all complete: the tail was
    // synchronized). A mark that cannot be read (never recorded) leaves the token untimed.
    void add_gpu_times(BackendCounters& bc) {
        auto ns = [](cudaEvent_t a, cudaEvent_t b, std::uint64_t& out) {
            float ms = 0;
            if (cudaEventElapsedTime(&ms, a, b) != cudaSuccess) {
                (void)cudaGetLastError();  // not sticky; leaves nothing for later checks
                return false;
            }
            out = static_cast<std::uint64_t>(std::max(0.0f, ms) * 1e6f);
            return true;
        };
        std::uint64_t dense = 0, experts = 0, alone = 0, tail = 0;
        for (int l = 0; l < L_; ++l) {
            const auto i = static_cast<std::size_t>(l);
            std::uint64_t d = 0, e = 0;
            if (!ns(layer_start_[i], routed_[i], d) || !ns(routed_[i], layer_end_[i], e)) return;
            dense += d;
            experts += e;
            if (!cpu_busy_[i]) alone += e;
        }
        if (!ns(tail_marks_[0], tail_marks_[1], tail)) return;
        constexpr auto r = std::memory_order_relaxed;
        bc.gpu_dense_ns.fetch_add(dense, r);
        bc.gpu_experts_ns.fetch_add(experts, r);
        bc.gpu_experts_alone_ns.fetch_add(alone, r);
        bc.gpu_tail_ns.fetch_add(tail, r);
    }

    int free_capture() const {
        for (int b = 0; b < kCaptureBuffers; ++b) {
            if (!capture_busy_[static_cast<std::size_t>(b)]) return b;
        }
        return -1;
    }

    // The victim leaves the table (ordered after every graph already launched), then the copy
    // stream uploads the captured record into its slot.
    void start_upload(const Residency::Admission& a, int buffer) {
        residency_->begin(a);
        if (a.victim_layer >= 0) {
            cuda::set_int(table_ + static_cast<std::size_t>(a.victim_layer) * E_ + a.victim_expert, -1, stream_);
        }
        NEURAL_CUDA(cudaEventRecord(evict_, stream_));
        NEURAL_CUDA(cudaStreamWaitEvent(copy_stream_, evict_, 0));
        NEURAL_CUDA(cudaMemcpyAsync(pool_ + static_cast<std::uint64_t>(a.slot) * stride_,
                                    captures_[static_cast<std::size_t>(buffer)].ptr, record_bytes_,
                                    cudaMemcpyHostToDevice, copy_stream_));
        NEURAL_CUDA(cudaEventRecord(capture_done_[static_cast<std::size_t>(buffer)], copy_stream_));
        uploads_.push_back({a, buffer});
    }

    // Uploads that landed: the slot joins the table on the compute stream.
    void poll_uploads() {
        for (std::size_t i = 0; i < uploads_.size();) {
            const Upload& u = uploads_[i];
            const cudaError_t q = cudaEventQuery(capture_done_[static_cast<std::size_t>(u.buffer)]);
            if (q == cudaErrorNotReady) {
                ++i;
                continue;
            }
            NEURAL_CUDA(q);
            cuda::set_int(table_ + static_cast<std::size_t>(u.a.layer) * E_ + u.a.expert, u.a.slot, stream_);
            residency_->complete(u.a);
            capture_busy_[static_cast<std::size_t>(u.buffer)] = false;
            if (in_.counters != nullptr) in_.counters->admissions.fetch_add(1, std::memory_order_relaxed);
            uploads_.erase(uploads_.begin() + static_cast<std::ptrdiff_t>(i));
        }
    }

    struct Upload {
        Residency::Admission a;
        int buffer;
    };

    GpuBackendInputs in_;
    GpuOptions opt_;
    std::string description_;
    int H_ = 0, I_ = 0, E_ = 0, K_ = 0, L_ = 0, nq_ = 0, nkv_ = 0, d_ = 0, Q_ = 0, KV_ = 0, V_ = 0;
    std::int64_t ctx_ = 0;
    int kv_ring_ = 0;              // --kv-ring positions of the sliding layers (0: whole context)
    std::int64_t kv_high_ = 0;     // see forward(): positions [0, kv_high_) were written
    int splits_ = 1;
    std::uint64_t budget_ = 0, used_ = 0, core_bytes_ = 0, kv_bytes_ = 0;
    std::vector<void*> allocations_;
    cudaStream_t stream_ = nullptr, copy_stream_ = nullptr;
    std::vector<LayerDevice> layers_;
    std::vector<cuda::ExpertShape> prefill_shapes_;  // per layer (prefill_expert_shape)
    std::uint16_t *final_norm_ = nullptr, *lm_head_ = nullptr;
    float* inv_freq_ = nullptr;
    float concentration_ = 1.0f;
    float *x_ = nullptr, *h_ = nullptr, *qkv_ = nullptr, *attn_ = nullptr, *scratch_ = nullptr,
          *router_logits_ = nullptr, *act_ = nullptr, *moe_gpu_ = nullptr, *logits_ = nullptr;
    int *pos_ = nullptr, *table_ = nullptr;
    std::uint8_t* pool_ = nullptr;
    std::uint64_t record_bytes_ = 0, stride_ = 0;
    HostBuffer in_x_, h_host_, cpu_out_, route_, logits_host_, pos_host_;
    std::vector<HostBuffer> captures_, assembled_;
    std::vector<cudaEvent_t> capture_done_;
    bool capture_busy_[kCaptureBuffers] = {};
    cudaEvent_t evict_ = nullptr;
    std::vector<Upload> uploads_;
    std::vector<cudaGraphExec_t> graphs_;
    cudaGraphExec_t tail_ = nullptr, tail_rows_ = nullptr;
    std::vector<cudaEvent_t> routed_;
    // Timing marks of the decode graphs (timed_: the device's graphs hold timing events): each
    // layer's start and end (its routed_ event splits it), the tail's start and lm_head's end;
    // cpu_busy_[l]: the CPU computed misses of layer l in the token just run.
    bool timed_ = false;
    std::vector<cudaEvent_t> layer_start_, layer_end_, tail_marks_;
    std::vector<char> cpu_busy_;
    // Prefill (init_prefill): prompt-sized device buffers, block-sized scratch, scratch slots.
    bool prefill_ = false;
    int pf_block_ = 0;
    float* pf_y_ = nullptr;  // grouped GEMM's down rows (may be pf_qkv_)
    // --expert-streams 2 (expert_rows): the second act buffer (may be pf_qkv_), the gate_ups'
    // stream, and the events that order the two.
    float* pf_act2_ = nullptr;
    cudaStream_t pf_side_ = nullptr;
    cudaEvent_t pf_experts_start_ = nullptr, pf_gate_up_done_[2] = {nullptr, nullptr}, pf_act_free_[2] = {nullptr, nullptr};
    float *pf_x_ = nullptr, *pf_acc_ = nullptr, *pf_qkv_ = nullptr, *pf_logits_ = nullptr,
          *pf_gate_ = nullptr, *pf_h_ = nullptr, *pf_hin_ = nullptr, *pf_attn_ = nullptr, *pf_act_ = nullptr;
    int *pf_sel_ = nullptr, *pf_entries_ = nullptr;
    std::uint8_t* pf_scratch_ = nullptr;
    std::vector<cudaEvent_t> pf_landed_, pf_free_;
    cudaEvent_t pf_h_ready_ = nullptr;
    HostBuffer pf_emb_, pf_route_host_, pf_entries_host_, pf_h_host_, pf_cpu_rows_, pf_cpu_start_;
    std::unique_ptr<StagingRing> ring_;
    std::unique_ptr<StagingRing> early_;  // --prefill-early (layer-major), or null
    cudaEvent_t pf_first_routed_ = nullptr;
    std::unique_ptr<Residency> residency_;
    std::unique_ptr<cpu::ExpertKernel> kernel_;
    std::unique_ptr<cpu::WorkerTeam> team_;
    bool raw_store_ = false;
    // The running prompt's cancel flag, for expert_rows (null outside prefill()).
    const std::atomic<bool>* pf_cancel_ = nullptr;
    // --pin-store (pin_store): the registered store mapping (null: not pinned), how long the
    // registration took, and what the description says about it.
    const void* pinned_ = nullptr;
    // --stream-misses (init_stream_misses): the copies' stream, their landing event, the scratch
    // slot of each choice (-1: not streamed) on the device and its pinned host staging.
    cudaStream_t miss_stream_ = nullptr;
    cudaEvent_t miss_landed_ = nullptr, miss_done_ = nullptr;
    int* miss_slot_ = nullptr;
    HostBuffer miss_slot_host_;
    std::vector<cudaGraphExec_t> miss_graphs_;
    std::string stream_note_;
    double pin_seconds_ = 0;
    std::string pin_note_;
    std::uint64_t resident_id_ = 0;
    std::int64_t resident_len_ = 0;
    std::vector<std::int32_t> resident_tokens_;  // the tokens of the resident positions
    std::unique_ptr<KvCheckpoints> checkpoints_;
};

}  // namespace

std::vector<GpuDevice> gpu_devices(std::string* why) {
    std::vector<GpuDevice> out;
    for (const auto& d : cuda::list_devices(why)) {
        out.push_back({d.index, d.name, d.total_bytes, d.free_bytes});
    }
    return out;
}

bool cuda_backend_available(std::string* why) {
    std::string reason;
    const auto devices = cuda::list_devices(&reason);
    if (devices.empty()) {
        if (why != nullptr) *why = reason.empty() ? "no CUDA device" : reason;
        return false;
    }
    return true;
}

std::unique_ptr<Backend> make_cuda_backend(const GpuBackendInputs& inputs, const GpuOptions& gpu) {
    if (inputs.config == nullptr || inputs.weights == nullptr) fail("make_cuda_backend: no model");
    return std::make_unique<CudaBackend>(inputs, gpu);
}

}  // namespace neural
