// The decode graphs (the file comment of hybrid_backend.h): one per layer, the tail, prefill's
// logits tail; and the GPU time of a token from their timing marks (GpuOptions::time_gpu).
#include <algorithm>

#include "cuda/driver/gpu.h"

#include "cuda/attention.h"
#include "cuda/decode_fused.h"
#include "cuda/expert_mxfp4.h"
#include "cuda/gemv_bf16.h"
#include "cuda/hybrid/hybrid_backend.h"
#include "cuda/residual.h"
#include "cuda/rms_norm.h"
#include "cuda/rope_kv.h"
#include "cuda/router.h"
#include "model/config.h"

namespace neural::hybrid {

// Whether a captured graph can record a timing event (an external event-record node) and
// report its elapsed time; tried once on a throwaway graph, the stream left as it was.
bool HybridBackend::graphs_can_time(CUstream stream) {
    CUevent a = nullptr, b = nullptr;
    CUgraph g = nullptr;
    CUgraphExec exec = nullptr;
    bool ok =
        cuda::drv::event_create(&a) == CUDA_SUCCESS &&
        cuda::drv::event_create(&b) == CUDA_SUCCESS &&
        cuda::drv::stream_begin_capture(stream, cuda::drv::kCaptureThreadLocal) == CUDA_SUCCESS;
    if (ok) {
        const bool recorded = cuda::drv::event_record_with_flags(
                                  a, stream, cuda::drv::kEventRecordExternal) == CUDA_SUCCESS &&
                              cuda::drv::event_record_with_flags(
                                  b, stream, cuda::drv::kEventRecordExternal) == CUDA_SUCCESS;
        ok = cuda::drv::stream_end_capture(stream, &g) == CUDA_SUCCESS && recorded;
    }
    float ms = 0;
    ok = ok && cuda::drv::graph_instantiate(&exec, g, 0) == CUDA_SUCCESS &&
         cuda::drv::graph_launch(exec, stream) == CUDA_SUCCESS &&
         cuda::drv::stream_synchronize(stream) == CUDA_SUCCESS &&
         cuda::drv::event_elapsed_time(&ms, a, b) == CUDA_SUCCESS;
    if (exec != nullptr) cuda::drv::graph_exec_destroy(exec);
    if (g != nullptr) cuda::drv::graph_destroy(g);
    for (CUevent e : {a, b}) {
        if (e != nullptr) cuda::drv::event_destroy(e);
    }
    (void)
        cuda::drv::get_last_error();  // a refusal above is an answer, not an error for later checks
    return ok;
}

void HybridBackend::capture_graphs() {
    const ModelConfig& c = *in_.config;
    const cuda::ExpertShape shape = expert_shape();
    float* in_x = dec_.in_x.device<float>();
    float* h_host = dec_.h_host.device<float>();
    float* cpu_out = dec_.cpu_out.device<float>();
    int* route = dec_.route.device<int>();
    const cuda::RouterOut host_out{route, reinterpret_cast<float*>(route + K_), route + 2 * K_};
    // Timing events (the bench's GPU time per token, GpuOptions::time_gpu) where this
    // device's graphs can hold them; else plain events and no GPU times.
    timing_.on = opt_.time_gpu && graphs_can_time(stream_);
    timing_.cpu_busy.assign(static_cast<std::size_t>(L_), 0);
    const unsigned event_flags =
        timing_.on ? cuda::drv::kEventDefault : cuda::drv::kEventDisableTiming;
    auto event = [&](std::vector<CUevent>& into) {
        CUevent ev;
        NEURAL_CUDA(cuda::drv::event_create(&ev, event_flags));
        into.push_back(ev);
        return ev;
    };
    auto mark = [&](CUevent ev) {
        NEURAL_CUDA(
            cuda::drv::event_record_with_flags(ev, stream_, cuda::drv::kEventRecordExternal));
    };
    for (int l = 0; l < L_; ++l) {
        const LayerDevice& ld = layers_[static_cast<std::size_t>(l)];
        const CUevent ev = event(dec_.routed);
        const CUevent start = timing_.on ? event(timing_.layer_start) : nullptr;
        const CUevent end = timing_.on ? event(timing_.layer_end) : nullptr;
        NEURAL_CUDA(cuda::drv::stream_begin_capture(stream_, cuda::drv::kCaptureThreadLocal));
        if (timing_.on) mark(start);
        if (l == 0) {
            cuda::copy_vector(in_x, dec_.x, H_, stream_);
        } else {
            cuda::add_moe(dec_.x, dec_.moe_gpu, cpu_out, H_, stream_);
        }
        const int window = c.layer_is_sliding[static_cast<std::size_t>(l)] ? c.sliding_window : 0;
        const int* table = slots_.table + static_cast<std::size_t>(l) * E_;
        if (opt_.fused_decode) {
            // 3 launches (cuda/decode_fused.h) for the 9 below, with their device functions (the
            // same bits expected). dec_.h is not
            // written before the post-attention norm: nothing reads the input norm's h but QKV.
            cuda::NormQkvRope a;
            a.x = dec_.x;
            a.norm_w = ld.input_norm;
            a.eps = c.rms_norm_eps;
            a.hidden = H_;
            a.qkv_w = ld.qkv_w;
            a.qkv_b = ld.qkv_b;
            a.q_heads = nq_;
            a.kv_heads = nkv_;
            a.head_dim = d_;
            a.inv_freq = inv_freq_;
            a.concentration = concentration_;
            a.pos = dec_.pos;
            a.k_cache = ld.k_cache;
            a.v_cache = ld.v_cache;
            a.ring = ld.ring;
            a.qkv = dec_.qkv;
            cuda::norm_qkv_rope(a, stream_);
            cuda::attention_decode(dec_.qkv, ld.k_cache, ld.v_cache, ld.sinks, nq_, nkv_, d_,
                                   window, ld.ring, dec_.pos, dec_.splits, dec_.attn_scratch,
                                   dec_.attn, stream_, dec_.fused_counters + 1);
            cuda::OprojRoute o;
            o.o_w = ld.o_w;
            o.o_b = ld.o_b;
            o.attn = dec_.attn;
            o.attn_width = Q_;
            o.x = dec_.x;
            o.hidden = H_;
            o.norm_w = ld.post_norm;
            o.eps = c.rms_norm_eps;
            o.h = dec_.h;
            o.h_mirror = h_host;
            o.router_w = ld.router_w;
            o.router_b = ld.router_b;
            o.experts = E_;
            o.k = K_;
            o.router_logits = dec_.router_logits;
            o.slot_table = table;
            o.device_out = {ld.sel, ld.gate, ld.slot};
            o.host_out = host_out;
            o.counter = dec_.fused_counters;
            cuda::oproj_norm_route(o, stream_);
        } else {
            cuda::rms_norm(dec_.x, ld.input_norm, c.rms_norm_eps, H_, dec_.h, nullptr, stream_);
            cuda::gemv_bf16(ld.qkv_w, ld.qkv_b, dec_.h, dec_.qkv, Q_ + 2 * KV_, H_, false, stream_);
            cuda::rope_kv(dec_.qkv, nq_, nkv_, d_, inv_freq_, concentration_, dec_.pos, ld.k_cache,
                          ld.v_cache, ld.ring, stream_);
            cuda::attention_decode(dec_.qkv, ld.k_cache, ld.v_cache, ld.sinks, nq_, nkv_, d_,
                                   window, ld.ring, dec_.pos, dec_.splits, dec_.attn_scratch,
                                   dec_.attn, stream_);
            cuda::gemv_bf16(ld.o_w, ld.o_b, dec_.attn, dec_.x, H_, Q_, true, stream_);
            cuda::rms_norm(dec_.x, ld.post_norm, c.rms_norm_eps, H_, dec_.h, h_host, stream_);
            cuda::gemv_bf16(ld.router_w, ld.router_b, dec_.h, dec_.router_logits, E_, H_, false,
                            stream_);
            cuda::router_topk(dec_.router_logits, E_, K_, table, {ld.sel, ld.gate, ld.slot},
                              host_out, stream_);
        }
        mark(ev);
        cuda::experts_resident(slots_.base, slots_.stride, shape, ld.sel, ld.gate, ld.slot,
                               ld.gate_up_bias, ld.down_bias, dec_.h, dec_.act, dec_.moe_gpu,
                               stream_);
        if (timing_.on) mark(end);
        dec_.graphs.push_back(end_capture());
    }
    if (timing_.on) {
        event(timing_.tail_marks);
        event(timing_.tail_marks);
    }
    NEURAL_CUDA(cuda::drv::stream_begin_capture(stream_, cuda::drv::kCaptureThreadLocal));
    if (timing_.on) mark(timing_.tail_marks[0]);
    cuda::add_moe(dec_.x, dec_.moe_gpu, cpu_out, H_, stream_);
    cuda::rms_norm(dec_.x, final_norm_, c.rms_norm_eps, H_, dec_.h, nullptr, stream_);
    cuda::gemv_bf16(lm_head_, nullptr, dec_.h, dec_.logits, V_, H_, false, stream_);
    if (timing_.on) mark(timing_.tail_marks[1]);
    NEURAL_CUDA(cuda::drv::memcpy_async(dec_.logits_host.ptr, dec_.logits,
                                        static_cast<std::size_t>(V_) * 4, cuda::drv::kDeviceToHost,
                                        stream_));
    dec_.tail = end_capture();
    // Prefill's logits: dec_.x holds a prompt row (copied from the prefill activations).
    NEURAL_CUDA(cuda::drv::stream_begin_capture(stream_, cuda::drv::kCaptureThreadLocal));
    cuda::rms_norm(dec_.x, final_norm_, c.rms_norm_eps, H_, dec_.h, nullptr, stream_);
    cuda::gemv_bf16(lm_head_, nullptr, dec_.h, dec_.logits, V_, H_, false, stream_);
    NEURAL_CUDA(cuda::drv::memcpy_async(dec_.logits_host.ptr, dec_.logits,
                                        static_cast<std::size_t>(V_) * 4, cuda::drv::kDeviceToHost,
                                        stream_));
    dec_.tail_rows = end_capture();
}

CUgraphExec HybridBackend::end_capture() {
    CUgraph g = nullptr;
    NEURAL_CUDA(cuda::drv::get_last_error());
    NEURAL_CUDA(cuda::drv::stream_end_capture(stream_, &g));
    CUgraphExec exec = nullptr;
    const CUresult e = cuda::drv::graph_instantiate(&exec, g, 0);
    cuda::drv::graph_destroy(g);
    NEURAL_CUDA(e);
    return exec;
}

// The token's GPU time from the timing marks of its graphs (all complete: the tail was
// synchronized). A mark that cannot be read (never recorded) leaves the token untimed.
void HybridBackend::add_gpu_times(BackendCounters& bc) {
    auto ns = [](CUevent a, CUevent b, std::uint64_t& out) {
        float ms = 0;
        if (cuda::drv::event_elapsed_time(&ms, a, b) != CUDA_SUCCESS) {
            (void)cuda::drv::get_last_error();  // not sticky; leaves nothing for later checks
            return false;
        }
        out = static_cast<std::uint64_t>(std::max(0.0f, ms) * 1e6f);
        return true;
    };
    std::uint64_t dense = 0, experts = 0, alone = 0, tail = 0;
    for (int l = 0; l < L_; ++l) {
        const auto i = static_cast<std::size_t>(l);
        std::uint64_t d = 0, e = 0;
        if (!ns(timing_.layer_start[i], dec_.routed[i], d) ||
            !ns(dec_.routed[i], timing_.layer_end[i], e))
            return;
        dense += d;
        experts += e;
        if (!timing_.cpu_busy[i]) alone += e;
    }
    if (!ns(timing_.tail_marks[0], timing_.tail_marks[1], tail)) return;
    constexpr auto r = std::memory_order_relaxed;
    bc.gpu_dense_ns.fetch_add(dense, r);
    bc.gpu_experts_ns.fetch_add(experts, r);
    bc.gpu_experts_alone_ns.fetch_add(alone, r);
    bc.gpu_tail_ns.fetch_add(tail, r);
}

}  // namespace neural::hybrid
