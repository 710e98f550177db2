// Device functions shared by the one-step decode kernels (rms_norm.cu, gemv_bf16.cu, rope_kv.cu,
// router.cu) and their fused forms (decode_fused.cu), so that both compute every value with the
// same operations in the same order: the fused graphs give the reference graphs' bits.
// Device code only; included by .cu files.
#pragma once

#include <cfloat>
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "cuda/common.cuh"
#include "cuda/router.h"

namespace neural::cuda {

// 1 / sqrt(mean(x^2) + eps) of x [n] by a block of Threads threads (a multiple of 32; every
// thread gets it). Fixed order: thread partial sums over i = t, t + Threads, ... (loads four
// ahead, common.cuh for_strided), warp_sum, then
// the warps' sums in warp order. partial: shared memory [Threads / 32]; it must not be written
// again before the block's next __syncthreads().
template <int Threads>
__device__ __forceinline__ float rms_inv_block(const float* x, int n, float eps, float* partial) {
    float ss = 0.0f;
    for_strided<Threads, 4>(
        n, [&](int i) { return x[i]; }, [&](int, float v) { ss += v * v; });
    ss = warp_sum(ss);
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = ss;
    __syncthreads();
    float total = 0.0f;
    for (int i = 0; i < Threads / 32; ++i) total += partial[i];
    return 1.0f / sqrtf(total / static_cast<float>(n) + eps);
}

// Loads per lane issued before the first is used by the bf16 row dots below: a decode
// row is a dozen steps per lane, and one load in flight per lane left the QKV projection waiting
// on memory latency (measured: 17.8 -> 15.6 us per layer at the 20b shape on the H200, ncu). The
// sums keep their order (the same bits as one step at a time). common.cuh's MXFP4 row dot and
// for_strided do the same for the expert rows and the vectors copied into shared memory.
constexpr int kRowSteps = 4;

// Eight bf16 weights (one 16-byte load) dotted with x[0..8), summed left to right.
__device__ __forceinline__ float bf16x8_dot(uint4 v, const float* x) {
    return bf16_lo(v.x) * x[0] + bf16_hi(v.x) * x[1] + bf16_lo(v.y) * x[2] + bf16_hi(v.y) * x[3] +
           bf16_lo(v.z) * x[4] + bf16_hi(v.z) * x[5] + bf16_lo(v.w) * x[6] + bf16_hi(v.w) * x[7];
}

// Row `row` of a bf16 matrix w [rows, cols] (cols a multiple of 8, rows 16-byte aligned) dotted
// with x [cols] (shared memory) by one warp, plus bias[row] (bias may be null); every lane gets
// the result. Fixed order: lane partial sums over the 8-column groups lane, lane + 32, ..., then
// warp_sum, then the bias.
__device__ __forceinline__ float bf16_gemv_row(const std::uint16_t* __restrict__ w,
                                               const std::uint16_t* __restrict__ bias, int row,
                                               const float* x, int cols) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    const uint4* wr = reinterpret_cast<const uint4*>(w + static_cast<std::size_t>(row) * cols);
    const int n8 = cols / 8;
    float acc = 0.0f;
    for (int c0 = lane; c0 < n8; c0 += 32 * kRowSteps) {  // kRowSteps loads in flight
        uint4 v[kRowSteps];
#pragma unroll
        for (int j = 0; j < kRowSteps; ++j) {
            const int c8 = c0 + 32 * j;
            v[j] = c8 < n8 ? __ldg(wr + c8) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int j = 0; j < kRowSteps; ++j) {
            const int c8 = c0 + 32 * j;
            if (c8 < n8) acc += bf16x8_dot(v[j], x + 8 * c8);
        }
    }
    acc = warp_sum(acc);
    return acc + (bias != nullptr ? bf16_bits_to_float(bias[row]) : 0.0f);
}

// Two rows at once (their loads together), each the same bits as bf16_gemv_row.
__device__ __forceinline__ void bf16_gemv_rows2(const std::uint16_t* __restrict__ w,
                                                const std::uint16_t* __restrict__ bias, int row0,
                                                int row1, const float* x, int cols, float& y0,
                                                float& y1) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    const uint4* w0 = reinterpret_cast<const uint4*>(w + static_cast<std::size_t>(row0) * cols);
    const uint4* w1 = reinterpret_cast<const uint4*>(w + static_cast<std::size_t>(row1) * cols);
    const int n8 = cols / 8;
    float acc0 = 0.0f, acc1 = 0.0f;
    for (int c0 = lane; c0 < n8; c0 += 32 * kRowSteps) {
        uint4 v0[kRowSteps], v1[kRowSteps];
#pragma unroll
        for (int j = 0; j < kRowSteps; ++j) {
            const int c8 = c0 + 32 * j;
            v0[j] = c8 < n8 ? __ldg(w0 + c8) : make_uint4(0, 0, 0, 0);
            v1[j] = c8 < n8 ? __ldg(w1 + c8) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int j = 0; j < kRowSteps; ++j) {
            const int c8 = c0 + 32 * j;
            if (c8 < n8) {
                acc0 += bf16x8_dot(v0[j], x + 8 * c8);
                acc1 += bf16x8_dot(v1[j], x + 8 * c8);
            }
        }
    }
    acc0 = warp_sum(acc0);
    acc1 = warp_sum(acc1);
    y0 = acc0 + (bias != nullptr ? bf16_bits_to_float(bias[row0]) : 0.0f);
    y1 = acc1 + (bias != nullptr ? bf16_bits_to_float(bias[row1]) : 0.0f);
}

// One head of one token at position pos, pair i of its d/2 pairs: RoPE on a query or key head
// (key heads also into the K cache), value heads copied into the V cache. z: the head's values.
// ring > 0: the caches keep positions modulo ring (a sliding layer's K/V ring), row pos % ring.
__device__ __forceinline__ void rope_kv_head(float* z, int head, int i, int pos, int q_heads,
                                             int kv_heads, int d,
                                             const float* __restrict__ inv_freq,
                                             float concentration, float* k_cache, float* v_cache,
                                             int ring) {
    const int half = d / 2, kv_dim = kv_heads * d;
    if (i >= half) return;
    const int slot = ring > 0 ? pos % ring : pos;
    if (head < q_heads + kv_heads) {
        // fp32 angle and sincos, like cpu/rope.cpp (cosf/sinf, not the fast intrinsics).
        const float angle = static_cast<float>(pos) * inv_freq[i];
        const float c = cosf(angle) * concentration, s = sinf(angle) * concentration;
        const float a = z[i], b = z[i + half];
        const float ra = a * c - b * s, rb = b * c + a * s;
        z[i] = ra;
        z[i + half] = rb;
        if (head >= q_heads) {
            float* kc = k_cache + static_cast<std::size_t>(slot) * kv_dim + (head - q_heads) * d;
            kc[i] = ra;
            kc[i + half] = rb;
        }
    } else {
        const int vh = head - q_heads - kv_heads;
        float* vc = v_cache + static_cast<std::size_t>(slot) * kv_dim + vh * d;
        vc[i] = z[i];
        vc[i + half] = z[i + half];
    }
}

// Top-k of one token's logits by one warp (descending, ties to the lower index), then softmax
// over the k selected, op for op like the CPU reference; lane 0's chosen/w are the result.
__device__ __forceinline__ void topk_softmax_warp(const float* __restrict__ logits, int experts,
                                                  int k, int* chosen, float* w) {
    const int lane = static_cast<int>(threadIdx.x % 32);
    float value[kRouterMaxK];
    for (int r = 0; r < k; ++r) {
        float best = -FLT_MAX;
        int arg = 0x7FFFFFFF;
        for (int e = lane; e < experts; e += 32) {
            bool taken = false;
            for (int q = 0; q < r; ++q) taken |= chosen[q] == e;
            const float v = logits[e];
            if (!taken && (v > best || (v == best && e < arg))) {
                best = v;
                arg = e;
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float ob = __shfl_xor_sync(0xFFFFFFFFu, best, o);
            const int oa = __shfl_xor_sync(0xFFFFFFFFu, arg, o);
            if (ob > best || (ob == best && oa < arg)) {
                best = ob;
                arg = oa;
            }
        }
        chosen[r] = arg;
        value[r] = best;
    }
    float g[kRouterMaxK], sum = 0.0f;
    for (int r = 0; r < k; ++r) {
        g[r] = expf(value[r] - value[0]);
        sum += g[r];
    }
    for (int r = 0; r < k; ++r) w[r] = g[r] / sum;
}

// A decode layer's routing (topk_softmax_warp's lane-0 result) with each choice's slot from the
// slot table, to device and host-mapped memory, fenced for the host. One thread.
__device__ __forceinline__ void store_route(const int* chosen, const float* w, int k,
                                            const int* __restrict__ table, RouterOut dev,
                                            RouterOut host) {
    for (int r = 0; r < k; ++r) {
        const int s = table[chosen[r]];
        dev.sel[r] = chosen[r];
        dev.gate[r] = w[r];
        dev.slot[r] = s;
        host.sel[r] = chosen[r];
        host.gate[r] = w[r];
        host.slot[r] = s;
    }
    __threadfence_system();
}

}  // namespace neural::cuda
