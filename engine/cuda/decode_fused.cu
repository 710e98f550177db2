// The fused decode kernels (decode_fused.h): a layer's start (norm, QKV, RoPE + K/V) and its
// end up to the routing (output projection, norm, router, top-k) in one launch each, from the
// one-step kernels' device functions (decode_steps.cuh) so the values are the same bits.
#include "cuda/decode_fused.h"
#include "cuda/decode_steps.cuh"

namespace neural::cuda {

namespace decode_fused_kernels {

constexpr int kThreads =
    shape::kFusedThreads;  // rms_inv_block's reduction is the one of rms_norm.cu's blocks
constexpr int kWarps = shape::kFusedWarps;

extern "C" __global__ void __launch_bounds__(kThreads) norm_qkv_rope_kernel(const NormQkvRope p) {
    extern __shared__ float hs[];  // [hidden]: h = rms_norm(x) * norm_w, this block's own copy
    __shared__ float partial[kWarps];
    const float inv = rms_inv_block<kThreads>(p.x, p.hidden, p.eps, partial);
    for_strided<kThreads, 4>(
        p.hidden, [&](int i) { return make_float2(p.x[i], bf16_bits_to_float(p.norm_w[i])); },
        [&](int i, float2 v) { hs[i] = v.y * (v.x * inv); });
    __syncthreads();
    // Warp `pair` computes rows i and i + d/2 of head `head`: the two values RoPE rotates together.
    const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
    const int d = p.head_dim, half = d / 2;
    const int pair = static_cast<int>(blockIdx.x) * kWarps + warp;
    if (pair >= (p.q_heads + 2 * p.kv_heads) * half) return;
    const int head = pair / half, i = pair % half;
    float a, b;
    bf16_gemv_rows2(p.qkv_w, p.qkv_b, head * d + i, head * d + i + half, hs, p.hidden, a, b);
    if (lane != 0) return;
    float* z = p.qkv + static_cast<std::size_t>(head) * d;
    z[i] = a;
    z[i + half] = b;
    rope_kv_head(z, head, i, *p.pos, p.q_heads, p.kv_heads, d, p.inv_freq, p.concentration,
                 p.k_cache, p.v_cache, p.ring);
}

// Brings the 128-byte line at `at` into L2 (a hint: no value, no fault).
__device__ __forceinline__ void prefetch_l2(const void* at) {
    asm volatile("prefetch.L2 [%0];" ::"l"(at));
}

extern "C" __global__ void __launch_bounds__(kThreads) oproj_norm_route_kernel(const OprojRoute p) {
    extern __shared__ float smem[];
    float* as = smem;               // [attn_width]: the attention output
    float* hs = as + p.attn_width;  // [hidden]: x, then h (the last block)
    float* ls = hs + p.hidden;      // [experts]: router logits (the last block)
    __shared__ float partial[kWarps];
    __shared__ bool last;
    // This block's share of the router's weight lines, on their way to L2 for the last block.
    {
        const std::size_t lines =
            (static_cast<std::size_t>(p.experts) * p.hidden * sizeof(std::uint16_t) + 127) / 128;
        const std::size_t share = (lines + gridDim.x - 1) / gridDim.x;
        const std::size_t first = blockIdx.x * share;
        const std::size_t end = first + share < lines ? first + share : lines;
        const char* base = reinterpret_cast<const char*>(p.router_w);
        for (std::size_t l = first + threadIdx.x; l < end; l += kThreads)
            prefetch_l2(base + l * 128);
    }
    for_strided<kThreads, 4>(
        p.attn_width / 4,
        [&](int i4) { return __ldg(reinterpret_cast<const float4*>(p.attn) + i4); },
        [&](int i4, float4 v) { reinterpret_cast<float4*>(as)[i4] = v; });
    __syncthreads();
    const int warp = static_cast<int>(threadIdx.x / 32), lane = static_cast<int>(threadIdx.x % 32);
    const int row = static_cast<int>(blockIdx.x) * kWarps + warp;
    if (row < p.hidden) {
        const float r = bf16_gemv_row(p.o_w, p.o_b, row, as, p.attn_width);
        if (lane == 0) p.x[row] = p.x[row] + r;
    }
    // The last block to finish goes on: every block's rows of x are visible device-wide before it
    // counts itself (fence, then the count); the last one sets the counter back to zero for the
    // next launch (the graph's next replay).
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(p.counter, 1u) == gridDim.x - 1u;
    __syncthreads();
    if (!last) return;
    if (threadIdx.x == 0) *p.counter = 0u;
    __threadfence();
    for_strided<kThreads, 4>(  // past L1: other blocks wrote x
        p.hidden / 4, [&](int i4) { return __ldcg(reinterpret_cast<const float4*>(p.x) + i4); },
        [&](int i4, float4 v) { reinterpret_cast<float4*>(hs)[i4] = v; });
    __syncthreads();
    // h = rms_norm(x) * norm_w, as rms_norm.cu's block computes it; each thread rewrites only the
    // elements it summed.
    const float inv = rms_inv_block<kThreads>(hs, p.hidden, p.eps, partial);
    for_strided<kThreads, 4>(
        p.hidden, [&](int i) { return bf16_bits_to_float(p.norm_w[i]); },
        [&](int i, float w) {
            const float v = w * (hs[i] * inv);
            hs[i] = v;
            p.h[i] = v;
            if (p.h_mirror != nullptr) p.h_mirror[i] = v;
        });
    if (p.h_mirror != nullptr) __threadfence_system();
    __syncthreads();
    // Router logits: a warp per row, two rows (r, r + kWarps) at a time.
    for (int r = warp; r < p.experts; r += 2 * kWarps) {
        float y0, y1 = 0.0f;
        const bool two = r + kWarps < p.experts;
        if (two) {
            bf16_gemv_rows2(p.router_w, p.router_b, r, r + kWarps, hs, p.hidden, y0, y1);
        } else {
            y0 = bf16_gemv_row(p.router_w, p.router_b, r, hs, p.hidden);
        }
        if (lane == 0) {
            ls[r] = y0;
            p.router_logits[r] = y0;
            if (two) {
                ls[r + kWarps] = y1;
                p.router_logits[r + kWarps] = y1;
            }
        }
    }
    __syncthreads();
    if (warp != 0) return;
    int chosen[kRouterMaxK];
    float w[kRouterMaxK];
    topk_softmax_warp(ls, p.experts, p.k, chosen, w);
    if (lane == 0) store_route(chosen, w, p.k, p.slot_table, p.device_out, p.host_out);
}

}  // namespace decode_fused_kernels

}  // namespace neural::cuda
