#include <cfloat>

#include "cuda/attention.h"
#include "cuda/common.cuh"

namespace neural::cuda {

namespace attention_kernels {

constexpr int kThreads =
    shape::kAttentionThreads;  // keys per tile; >= head_dim (threads own dimensions)

__device__ float block_max(float v, float* red) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
    __syncthreads();
    float r = red[0];
    for (int i = 1; i < kThreads / 32; ++i) r = fmaxf(r, red[i]);
    __syncthreads();
    return r;
}

__device__ float block_sum(float v, float* red) {
    v = warp_sum(v);
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
    __syncthreads();
    float r = 0.0f;
    for (int i = 0; i < kThreads / 32; ++i) r += red[i];
    __syncthreads();
    return r;
}

// Merges head hq's split parts in split order (the block's threads own dimensions). Reads the
// parts past L1 (__ldcg): in the one-launch form other blocks of the same kernel wrote them.
__device__ void combine_head(const float* scratch, const std::uint16_t* __restrict__ sinks, int d,
                             int splits, float* out, int hq) {
    const int t = threadIdx.x;
    const float* part = scratch + static_cast<std::size_t>(hq) * splits * (d + 2);
    const float sink = bf16_bits_to_float(sinks[hq]);
    // kSplitSteps parts' loads in flight, then used in split order.
    constexpr int kSplitSteps = 8;
    float m = sink;
    for (int s0 = 0; s0 < splits; s0 += kSplitSteps) {
        float pm[kSplitSteps], pl[kSplitSteps];
#pragma unroll
        for (int j = 0; j < kSplitSteps; ++j) {
            const float* p = part + (s0 + j) * (d + 2);
            pm[j] = s0 + j < splits ? __ldcg(p) : 0.0f;
            pl[j] = s0 + j < splits ? __ldcg(p + 1) : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < kSplitSteps; ++j) {
            if (s0 + j < splits && pl[j] > 0.0f) m = fmaxf(m, pm[j]);
        }
    }
    float denom = expf(sink - m), acc = 0.0f;
    for (int s0 = 0; s0 < splits; s0 += kSplitSteps) {
        float pm[kSplitSteps], pl[kSplitSteps], pv[kSplitSteps];
#pragma unroll
        for (int j = 0; j < kSplitSteps; ++j) {
            const float* p = part + (s0 + j) * (d + 2);
            const bool in = s0 + j < splits;
            pm[j] = in ? __ldcg(p) : 0.0f;
            pl[j] = in ? __ldcg(p + 1) : 0.0f;
            pv[j] = in && t < d ? __ldcg(p + 2 + t) : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < kSplitSteps; ++j) {
            if (s0 + j >= splits || pl[j] <= 0.0f) continue;
            const float f = expf(pm[j] - m);
            denom += pl[j] * f;
            if (t < d) acc += pv[j] * f;
        }
    }
    if (t < d) out[hq * d + t] = acc / denom;
}

extern "C" __global__ void attention_split_kernel(
    const float* __restrict__ q, const float* __restrict__ kc, const float* __restrict__ vc,
    int q_heads, int kv_heads, int d, int window, int ring, const int* __restrict__ pos_ptr,
    int splits, float* __restrict__ scratch, const std::uint16_t* __restrict__ sinks, float* out,
    unsigned* counters) {
    __shared__ float qs[kAttentionMaxHeadDim];
    __shared__ bool last;
    __shared__ float ps[kThreads];
    __shared__ float red[kThreads / 32];
    const int hq = blockIdx.x, split = blockIdx.y, t = threadIdx.x;
    const int hk = hq / (q_heads / kv_heads);
    const int kv_dim = kv_heads * d;
    const int pos = *pos_ptr;
    const int first = window > 0 ? max(0, pos - window + 1) : 0;
    const int n = pos - first + 1;
    const int chunk = (n + splits - 1) / splits;
    const int j0 = first + split * chunk, j1 = min(first + n, j0 + chunk);
    const float scale = rsqrtf(static_cast<float>(d));
    if (t < d) qs[t] = q[hq * d + t];
    __syncthreads();
    float m = -FLT_MAX, l = 0.0f, acc = 0.0f;  // acc: dimension t of the weighted value sum
    const int warp = t / 32, lane = t % 32;
    for (int base = j0; base < j1; base += kThreads) {
        const int cnt = min(kThreads, j1 - base);
        // Scores: one warp per key, lanes over the head dimension (coalesced K rows); each warp
        // loads kKeySteps keys' rows before the first dot.
        constexpr int kKeySteps = 4, kDimSteps = kAttentionMaxHeadDim / 32;
        for (int u0 = warp; u0 < cnt; u0 += (kThreads / 32) * kKeySteps) {
            float kv[kKeySteps][kDimSteps];
#pragma unroll
            for (int j = 0; j < kKeySteps; ++j) {
                const int u = u0 + (kThreads / 32) * j;
                const int key = ring > 0 ? (base + u) % ring : base + u;
                const float* kj = kc + static_cast<std::size_t>(key) * kv_dim + hk * d;
#pragma unroll
                for (int s = 0; s < kDimSteps; ++s) {
                    const int i = lane + 32 * s;
                    kv[j][s] = u < cnt && i < d ? kj[i] : 0.0f;
                }
            }
#pragma unroll
            for (int j = 0; j < kKeySteps; ++j) {
                const int u = u0 + (kThreads / 32) * j;  // the same for the whole warp
                float part = 0.0f;
#pragma unroll
                for (int s = 0; s < kDimSteps; ++s) {
                    const int i = lane + 32 * s;
                    if (i < d) part += qs[i] * kv[j][s];
                }
                part = warp_sum(part);
                if (lane == 0 && u < cnt) ps[u] = part * scale;
            }
        }
        __syncthreads();
        const float s = t < cnt ? ps[t] : -FLT_MAX;
        const float m_new = fmaxf(m, block_max(s, red));  // also orders the reads of ps[] above
        const float p = t < cnt ? expf(s - m_new) : 0.0f;
        ps[t] = p;
        const float alpha = expf(m - m_new);
        const float tile = block_sum(p, red);  // also orders ps[] before the reads below
        l = l * alpha + tile;
        if (t < d) {
            // kValueSteps keys' values in flight, then summed in key order.
            constexpr int kValueSteps = 8;
            float a = acc * alpha;
            for (int u0 = 0; u0 < cnt; u0 += kValueSteps) {
                float v[kValueSteps];
#pragma unroll
                for (int j = 0; j < kValueSteps; ++j) {
                    const int u = u0 + j;
                    const int key = ring > 0 ? (base + u) % ring : base + u;
                    v[j] = u < cnt ? vc[static_cast<std::size_t>(key) * kv_dim + hk * d + t] : 0.0f;
                }
#pragma unroll
                for (int j = 0; j < kValueSteps; ++j) {
                    if (u0 + j < cnt) a += ps[u0 + j] * v[j];
                }
            }
            acc = a;
        }
        m = m_new;
        __syncthreads();
    }
    float* part = scratch + (static_cast<std::size_t>(hq) * splits + split) * (d + 2);
    if (t < d) part[2 + t] = acc;
    if (t == 0) {
        part[0] = j0 < j1 ? m : -FLT_MAX;
        part[1] = l;
    }
    if (counters == nullptr) return;  // the combine kernel follows
    // The last of the head's split blocks to finish combines it: each block's parts are visible
    // device-wide before it counts itself (fence, then the count); the last one sets the counter
    // back to zero for the next launch.
    __threadfence();
    __syncthreads();
    if (t == 0) last = atomicAdd(&counters[hq], 1u) == static_cast<unsigned>(splits) - 1u;
    __syncthreads();
    if (!last) return;
    if (t == 0) counters[hq] = 0u;
    __threadfence();
    combine_head(scratch, sinks, d, splits, out, hq);
}

extern "C" __global__ void attention_combine_kernel(const float* __restrict__ scratch,
                                                    const std::uint16_t* __restrict__ sinks, int d,
                                                    int splits, float* __restrict__ out) {
    combine_head(scratch, sinks, d, splits, out, blockIdx.x);
}

}  // namespace attention_kernels

}  // namespace neural::cuda
