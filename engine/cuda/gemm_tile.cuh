// The tensor-core tile of the prefill GEMMs (gemm_bf16_rows.cu, expert_gemm.cu): a 64 x 64
// output tile of C = A W^T, A fp32 [M, K] (rows gathered through a row map), W [N, K] given as
// bf16 rows or as MXFP4 rows (dequantized to bf16 in shared memory; exact: an E2M1 value times a
// power of two is a bf16 number), fp32 accumulation in WMMA 16x16x16 fragments, K in steps of 32
// (one MXFP4 block). 4 warps, each 32 x 32 of the tile. The activations are split into two bf16
// halves, a = hi + lo (hi = bf16(a), lo = bf16(a - hi)), and both are multiplied: the weights
// are exact in bf16, so the products carry ~16 bits of the activation instead of bf16's 8 (bf16
// activations missed the golden logits' 5e-2 on the tiny fixture). Every output element is one fixed-order
// dot product, whatever rows share its tile, so grouping tokens differently (layer- or
// block-major, resident or staged weights, one or many launches) gives bit-identical results.
// After gemm_tile() returns, the tile's fp32 results are in Smem::c for the caller's epilogue.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <mma.h>

#include "cuda/common.cuh"

namespace neural::cuda::gemm {

constexpr int kBM = 64, kBN = 64, kBK = 32;
constexpr int kLds = kBK + 8;  // bf16 row stride of the A/B tiles (multiple of 8 for WMMA)
constexpr int kLdc = kBN + 4;  // fp32 row stride of the C tile
constexpr int kThreads = 128;

struct Smem {
    union {
        struct {
            __nv_bfloat16 a[kBM * kLds];
            __nv_bfloat16 a_lo[kBM * kLds];
            __nv_bfloat16 b[kBN * kLds];
        } ab;
        float c[kBM * kLdc];
    };
};

// A: rows of fp32 activations; row(m) is the address of tile row m's K values or nullptr (zero).
// W as bf16 rows [N, K] (mxfp4 == false) or MXFP4: codes [N, K/32, 16], scales [N, K/32].
struct WeightRows {
    const std::uint16_t* bf16 = nullptr;
    const std::uint8_t* codes = nullptr;
    const std::uint8_t* scales = nullptr;
};

template <typename RowOf>
__device__ __forceinline__ void gemm_tile(Smem& s, RowOf row_of, const WeightRows& w, int n0, int N,
                                          int K) {
    using namespace nvcuda;
    const int t = threadIdx.x, warp = t / 32;
    const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    const int G = K / 32;
    for (int g = 0; g < G; ++g) {
        const int k0 = g * 32;
        // A: 64 rows x 32 fp32 = 512 float4 pieces, four per thread, split into hi + lo.
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            const int idx = t + p * kThreads, r = idx / 8, part = idx % 8;
            const float* src = row_of(r);
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (src != nullptr) v = *reinterpret_cast<const float4*>(src + k0 + part * 4);
            const float f[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const __nv_bfloat16 hi = __float2bfloat16(f[i]);
                s.ab.a[r * kLds + part * 4 + i] = hi;
                s.ab.a_lo[r * kLds + part * 4 + i] = __float2bfloat16(f[i] - __bfloat162float(hi));
            }
        }
        if (w.bf16 != nullptr) {
#pragma unroll
            for (int p = 0; p < 2; ++p) {
                const int idx = t + p * kThreads, r = idx / 4, part = idx % 4;
                const int n = n0 + r;
                uint4 v = make_uint4(0, 0, 0, 0);
                if (n < N) v = __ldg(reinterpret_cast<const uint4*>(w.bf16 + static_cast<std::size_t>(n) * K + k0 + part * 8));
                *reinterpret_cast<uint4*>(&s.ab.b[r * kLds + part * 8]) = v;
            }
        } else {
            // One MXFP4 block per weight row; thread pair (r, half) decodes 16 elements.
            const int r = t / 2, half = t % 2, n = n0 + r;
            __nv_bfloat16* dst = &s.ab.b[r * kLds + half * 16];
            if (n < N) {
                const uint2 c = __ldg(reinterpret_cast<const uint2*>(w.codes + (static_cast<std::size_t>(n) * G + g) * 16 + half * 8));
                const float sc = e8m0(__ldg(w.scales + static_cast<std::size_t>(n) * G + g));
                const std::uint32_t words[2] = {c.x, c.y};
#pragma unroll
                for (int q = 0; q < 2; ++q) {
#pragma unroll
                    for (int b = 0; b < 4; ++b) {
                        const std::uint32_t byte = (words[q] >> (8 * b)) & 0xFFu;
                        dst[8 * q + 2 * b] = __float2bfloat16(e2m1(byte & 0xFu) * sc);
                        dst[8 * q + 2 * b + 1] = __float2bfloat16(e2m1(byte >> 4) * sc);
                    }
                }
            } else {
#pragma unroll
                for (int i = 0; i < 16; ++i) dst[i] = __float2bfloat16(0.0f);
            }
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < 32; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[2], fl[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                wmma::load_matrix_sync(fa[i], &s.ab.a[(wm + 16 * i) * kLds + kk], kLds);
                wmma::load_matrix_sync(fl[i], &s.ab.a_lo[(wm + 16 * i) * kLds + kk], kLds);
            }
#pragma unroll
            for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &s.ab.b[(wn + 16 * j) * kLds + kk], kLds);
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
                    wmma::mma_sync(acc[i][j], fl[i], fb[j], acc[i][j]);
                }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
            wmma::store_matrix_sync(&s.c[(wm + 16 * i) * kLdc + wn + 16 * j], acc[i][j], kLdc, wmma::mem_row_major);
    __syncthreads();
}

}  // namespace neural::cuda::gemm
