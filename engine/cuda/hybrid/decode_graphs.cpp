// The decode step's graphs (decode_step.h, the file comment of hybrid_backend.h): one per layer,
// the tail, the prompt rows' logits tail; and the GPU time of a token from their timing marks
// (GpuOptions::time_gpu).
#include <algorithm>

#include "cuda/driver/gpu.h"

#include "cuda/attention.h"
#include "cuda/decode_fused.h"
#include "cuda/expert_mxfp4.h"
#include "cuda/gemv_bf16.h"
#include "cuda/hybrid/clock.h"
#include "cuda/hybrid/decode_step.h"
#include "cuda/residual.h"
#include "cuda/rms_norm.h"
#include "cuda/rope_kv.h"
#include "cuda/router.h"
#include "model/config.h"

namespace neural::hybrid {

// Whether a captured graph can record a timing event (an external event-record node) and
// report its elapsed time; tried once on a throwaway graph, the stream left as it was.
bool DecodeStep::graphs_can_time(CUstream stream) {
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

void DecodeStep::capture_graphs() {
    const ModelConfig& c = config_;
    const cuda::ExpertShape shape = expert_shape_;
    float* in_x = decode_.in_x.device<float>();
    float* h_host = decode_.h_host.device<float>();
    float* cpu_out = decode_.cpu_out.device<float>();
    int* route = decode_.route.device<int>();
    const cuda::RouterOut host_out{route, reinterpret_cast<float*>(route + shape_.top_k),
                                   route + 2 * shape_.top_k};
    // Timing events (the bench's GPU time per token, GpuOptions::time_gpu) where this
    // device's graphs can hold them; else plain events and no GPU times.
    timing_.on = opt_.time_gpu && graphs_can_time(stream_);
    timing_.cpu_busy.assign(static_cast<std::size_t>(shape_.layers), 0);
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
    for (int l = 0; l < shape_.layers; ++l) {
        const LayerDevice& ld = layers_[static_cast<std::size_t>(l)];
        const CUevent ev = event(decode_.routed);
        const CUevent start = timing_.on ? event(timing_.layer_start) : nullptr;
        const CUevent end = timing_.on ? event(timing_.layer_end) : nullptr;
        NEURAL_CUDA(cuda::drv::stream_begin_capture(stream_, cuda::drv::kCaptureThreadLocal));
        if (timing_.on) mark(start);
        if (l == 0) {
            cuda::copy_vector(in_x, decode_.x, shape_.hidden, stream_);
        } else {
            cuda::add_moe(decode_.x, decode_.moe_gpu, cpu_out, shape_.hidden, stream_);
        }
        const int window = c.layer_is_sliding[static_cast<std::size_t>(l)] ? c.sliding_window : 0;
        const int* table = slots_.table + static_cast<std::size_t>(l) * shape_.experts;
        if (opt_.fused_decode) {
            // 3 launches (cuda/decode_fused.h) for the 9 below, with their device functions (the
            // same bits expected). decode_.h is not
            // written before the post-attention norm: nothing reads the input norm's h but QKV.
            cuda::NormQkvRope a;
            a.x = decode_.x;
            a.norm_w = ld.input_norm;
            a.eps = c.rms_norm_eps;
            a.hidden = shape_.hidden;
            a.qkv_w = ld.qkv_w;
            a.qkv_b = ld.qkv_b;
            a.q_heads = shape_.q_heads;
            a.kv_heads = shape_.kv_heads;
            a.head_dim = shape_.head_dim;
            a.inv_freq = inv_freq_;
            a.concentration = concentration_;
            a.pos = decode_.pos;
            a.k_cache = ld.k_cache;
            a.v_cache = ld.v_cache;
            a.ring = ld.ring;
            a.qkv = decode_.qkv;
            cuda::norm_qkv_rope(a, stream_);
            cuda::attention_decode(decode_.qkv, ld.k_cache, ld.v_cache, ld.sinks, shape_.q_heads,
                                   shape_.kv_heads, shape_.head_dim, window, ld.ring, decode_.pos,
                                   decode_.splits, decode_.attn_scratch, decode_.attn, stream_,
                                   decode_.fused_counters + 1);
            cuda::OprojRoute o;
            o.o_w = ld.o_w;
            o.o_b = ld.o_b;
            o.attn = decode_.attn;
            o.attn_width = shape_.q_width;
            o.x = decode_.x;
            o.hidden = shape_.hidden;
            o.norm_w = ld.post_norm;
            o.eps = c.rms_norm_eps;
            o.h = decode_.h;
            o.h_mirror = h_host;
            o.router_w = ld.router_w;
            o.router_b = ld.router_b;
            o.experts = shape_.experts;
            o.k = shape_.top_k;
            o.router_logits = decode_.router_logits;
            o.slot_table = table;
            o.device_out = {ld.sel, ld.gate, ld.slot};
            o.host_out = host_out;
            o.counter = decode_.fused_counters;
            cuda::oproj_norm_route(o, stream_);
        } else {
            cuda::rms_norm(decode_.x, ld.input_norm, c.rms_norm_eps, shape_.hidden, decode_.h,
                           nullptr, stream_);
            cuda::gemv_bf16(ld.qkv_w, ld.qkv_b, decode_.h, decode_.qkv,
                            shape_.q_width + 2 * shape_.kv_width, shape_.hidden, false, stream_);
            cuda::rope_kv(decode_.qkv, shape_.q_heads, shape_.kv_heads, shape_.head_dim, inv_freq_,
                          concentration_, decode_.pos, ld.k_cache, ld.v_cache, ld.ring, stream_);
            cuda::attention_decode(decode_.qkv, ld.k_cache, ld.v_cache, ld.sinks, shape_.q_heads,
                                   shape_.kv_heads, shape_.head_dim, window, ld.ring, decode_.pos,
                                   decode_.splits, decode_.attn_scratch, decode_.attn, stream_);
            cuda::gemv_bf16(ld.o_w, ld.o_b, decode_.attn, decode_.x, shape_.hidden, shape_.q_width,
                            true, stream_);
            cuda::rms_norm(decode_.x, ld.post_norm, c.rms_norm_eps, shape_.hidden, decode_.h,
                           h_host, stream_);
            cuda::gemv_bf16(ld.router_w, ld.router_b, decode_.h, decode_.router_logits,
                            shape_.experts, shape_.hidden, false, stream_);
            cuda::router_topk(decode_.router_logits, shape_.experts, shape_.top_k, table,
                              {ld.sel, ld.gate, ld.slot}, host_out, stream_);
        }
        mark(ev);
        cuda::experts_resident(slots_.base, slots_.stride, shape, ld.sel, ld.gate, ld.slot,
                               ld.gate_up_bias, ld.down_bias, decode_.h, decode_.act,
                               decode_.moe_gpu, stream_);
        if (timing_.on) mark(end);
        decode_.graphs.push_back(end_capture());
    }
    if (timing_.on) {
        event(timing_.tail_marks);
        event(timing_.tail_marks);
    }
    NEURAL_CUDA(cuda::drv::stream_begin_capture(stream_, cuda::drv::kCaptureThreadLocal));
    if (timing_.on) mark(timing_.tail_marks[0]);
    cuda::add_moe(decode_.x, decode_.moe_gpu, cpu_out, shape_.hidden, stream_);
    cuda::rms_norm(decode_.x, final_norm_, c.rms_norm_eps, shape_.hidden, decode_.h, nullptr,
                   stream_);
    cuda::gemv_bf16(lm_head_, nullptr, decode_.h, decode_.logits, shape_.vocab, shape_.hidden,
                    false, stream_);
    if (timing_.on) mark(timing_.tail_marks[1]);
    NEURAL_CUDA(cuda::drv::memcpy_async(decode_.logits_host.ptr, decode_.logits,
                                        static_cast<std::size_t>(shape_.vocab) * 4,
                                        cuda::drv::kDeviceToHost, stream_));
    decode_.tail = end_capture();
    // Prefill's logits: decode_.x holds a prompt row (copied from the prefill activations).
    NEURAL_CUDA(cuda::drv::stream_begin_capture(stream_, cuda::drv::kCaptureThreadLocal));
    cuda::rms_norm(decode_.x, final_norm_, c.rms_norm_eps, shape_.hidden, decode_.h, nullptr,
                   stream_);
    cuda::gemv_bf16(lm_head_, nullptr, decode_.h, decode_.logits, shape_.vocab, shape_.hidden,
                    false, stream_);
    NEURAL_CUDA(cuda::drv::memcpy_async(decode_.logits_host.ptr, decode_.logits,
                                        static_cast<std::size_t>(shape_.vocab) * 4,
                                        cuda::drv::kDeviceToHost, stream_));
    decode_.tail_rows = end_capture();
}

CUgraphExec DecodeStep::end_capture() {
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
void DecodeStep::add_gpu_times(BackendCounters& bc) {
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
    for (int l = 0; l < shape_.layers; ++l) {
        const auto i = static_cast<std::size_t>(l);
        std::uint64_t d = 0, e = 0;
        if (!ns(timing_.layer_start[i], decode_.routed[i], d) ||
            !ns(decode_.routed[i], timing_.layer_end[i], e))
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
