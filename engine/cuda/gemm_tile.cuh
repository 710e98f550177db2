// The tensor-core tile of the prefill GEMMs (gemm_bf16_rows.cu, expert_gemm.cu): a 64 x BN
// output tile (BN = 64 or 128, see kLdc) of C = A W^T, A fp32 [M, K] (rows gathered through a row map), W [N, K] given as
// bf16 rows or as MXFP4 rows (dequantized to bf16 in shared memory; exact: an E2M1 value times a
// power of two is a bf16 number), fp32 accumulation in tensor-core fragments, K in steps of 32
// (one MXFP4 block). 4 warps, each 32 x BN/2 of the tile. The activations are split into two bf16
// halves, a = hi + lo (hi = bf16(a), lo = bf16(a - hi)), and both are multiplied: the weights
// are exact in bf16, so the products carry ~16 bits of the activation instead of bf16's 8 (bf16
// activations missed the golden logits' 5e-2 on the tiny fixture). Every output element is one fixed-order
// dot product, whatever rows share its tile, so grouping tokens differently (layer- or
// block-major, resident or staged weights, one or many launches) gives bit-identical results.
//
// Two implementations of that one product, the same bits (test CudaPrefillKernels.*FastTile*):
//  - gemm_tile_fast: the pipelined tile. Step g + 1's global loads (activations, weight codes) are
//    issued into registers before step g's tensor-core products and stored (split, decoded) into
//    the other of two shared-memory stages after them: one barrier per step, the loads' latency
//    hidden behind the products. Conversions are paired (bf16x2) and stores 8/16 bytes wide; the
//    products are raw mma.sync with ldmatrix operand loads (mma_step_fast).
//  - gemm_tile_reference: the plain tile (load, convert, barrier, multiply, barrier), kept as the
//    reference path (KernelPath::reference, kernel_path.h) that tests and neural_cuda_bench compare against.
// Both issue the same tensor-core products (mma.m16n8k16; the reference through WMMA, which
// compiles to them) in the same order (per step: k 0..15 then 16..31, hi then lo) on the same
// operand bits, so each output element sees the same sequence of fp32 accumulations.
// After either returns, the tile's fp32 results are in Smem::c for the caller's epilogue.
//
// Operands::half (MXFP4 weights only: the expert GEMMs, ExpertShape::half_operands): one fp16
// product instead of two bf16 ones. fp16 carries 11 bits of each activation (bf16 hi + lo: ~16,
// bf16 alone: 8) and an E2M1 value times a power of two exactly, but only in fp16's range, so:
//  - the activations come scaled by a power of two (a_scale) that keeps them below 2^15: the
//    caller derives it from a bound of the values (expert_mxfp4.h);
//  - each weight row n is decoded times 2^shift[n], shift[n] = 140 - (the row's largest scale
//    byte), so its largest values reach 6 * 2^13 and every block within 2^36 of it is exact
//    (smaller ones round, deterministically; a NaN scale byte stays NaN). The tile scans the
//    row's scales first and leaves shift[] in Smem for the epilogue, which multiplies by
//    2^-(shift[n] + log2 a_scale).
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include "cuda/common.cuh"
#include "cuda/kernel_path.h"
#include "cuda/launch_shapes.h"

namespace neural::cuda::gemm {

constexpr int kBK = 32;        // kBM, kThreads: launch_shapes.h
constexpr int kLds = kBK + 8;  // bf16 row stride of the A/B tiles (multiple of 8 for WMMA)
// Tile widths: BN = 64 or 128 output columns (weight rows) per block; the 4 warps own 32 x BN/2
// each. 128 halves the shared-memory operand traffic per product (the 64-wide fast tile kept the
// L1/shared pipe 90% busy, ncu) but needs twice the registers and leaves half as many blocks:
// launches pick it where the grid still fills the GPU (wide_tile_pays, below). The width does
// not change any result: every output element is the same dot product in the same order.
template <int BN>
inline constexpr int kLdc = BN + 4;  // fp32 row stride of the C tile
// Blocks per SM the expert kernels are compiled for (__launch_bounds__), per width: 64 wide, 5
// caps the registers at 102 (96 used, 4-8 bytes spilled), so 5 blocks fit an SM and one expert's
// gate_up at ~400 rows (630 blocks) runs in one wave of an H200's 132 SMs instead of 1.19 waves
// at 4 (ncu: 128 registers, "waves per SM 1.19"), which makes the experts faster. The dense
// GEMMs (gemm_bf16_rows.cu) fill the GPU anyway and are slower with the cap, so they keep the
// compiler's choice (docs/CUDA.md "The prefill kernels' speed"). 128 wide: 3 (170 registers;
// the tile's accumulators alone are 64).
template <int BN>
inline constexpr int kMinBlocks = BN == 64 ? 5 : 3;

// The operands of the tensor-core products (see the file comment).
enum class Operands { split_bf16, half };

// A stage's tiles hold bf16 (split_bf16: a = hi, a_lo = lo) or fp16 bits (half: a, b; a_lo unused).
template <int BN>
struct Stage {
    __nv_bfloat16 a[kBM * kLds];
    __nv_bfloat16 a_lo[kBM * kLds];
    __nv_bfloat16 b[BN * kLds];
};

template <int BN>
struct Smem {
    union {
        Stage<BN> st[2];  // the reference tile uses st[0] only
        float c[kBM * kLdc<BN>];
    };
    int shift[BN];  // Operands::half: weight row n0 + i was decoded times 2^shift[i]
};

// A: rows of fp32 activations; row(m) is the address of tile row m's K values or nullptr (zero).
// W as bf16 rows [N, K] (mxfp4 == false) or MXFP4: codes [N, K/32, 16], scales [N, K/32].
struct WeightRows {
    const std::uint16_t* bf16 = nullptr;
    const std::uint8_t* codes = nullptr;
    const std::uint8_t* scales = nullptr;
};

// The reference tile's tensor-core products of one 32-wide K step on a stage: warp (wm, wn)'s
// 32 x BN/2 of the tile, in WMMA 16 x 16 x 16 fragments.
template <int BN>
using RefAcc = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>[2][BN / 32];

template <Operands kOps, int BN>
__device__ __forceinline__ void mma_step(const Stage<BN>& st, RefAcc<BN>& acc, int wm, int wn) {
    using namespace nvcuda;
    constexpr int kJ = BN / 32;
    if constexpr (kOps == Operands::half) {
        const __half* a = reinterpret_cast<const __half*>(st.a);
        const __half* b = reinterpret_cast<const __half*>(st.b);
#pragma unroll
        for (int kk = 0; kk < 32; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb[kJ];
#pragma unroll
            for (int i = 0; i < 2; ++i)
                wmma::load_matrix_sync(fa[i], &a[(wm + 16 * i) * kLds + kk], kLds);
#pragma unroll
            for (int j = 0; j < kJ; ++j)
                wmma::load_matrix_sync(fb[j], &b[(wn + 16 * j) * kLds + kk], kLds);
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < kJ; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
        }
    } else {
#pragma unroll
        for (int kk = 0; kk < 32; kk += 16) {
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[2], fl[2];
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb[kJ];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                wmma::load_matrix_sync(fa[i], &st.a[(wm + 16 * i) * kLds + kk], kLds);
                wmma::load_matrix_sync(fl[i], &st.a_lo[(wm + 16 * i) * kLds + kk], kLds);
            }
#pragma unroll
            for (int j = 0; j < kJ; ++j)
                wmma::load_matrix_sync(fb[j], &st.b[(wn + 16 * j) * kLds + kk], kLds);
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < kJ; ++j) {
                    wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
                    wmma::mma_sync(acc[i][j], fl[i], fb[j], acc[i][j]);
                }
        }
    }
}

template <int BN>
__device__ __forceinline__ void store_tile(Smem<BN>& s, RefAcc<BN>& acc, int wm, int wn) {
    using namespace nvcuda;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < BN / 32; ++j)
            wmma::store_matrix_sync(&s.c[(wm + 16 * i) * kLdc<BN> + wn + 16 * j], acc[i][j],
                                    kLdc<BN>, wmma::mem_row_major);
    __syncthreads();
}

// Operands::half: weight row n's decode exponent shift[n] (file comment) from its G scale bytes.
// The thread pair (row, t % 2) of the decode scans every other block each; both get the result.
__device__ __forceinline__ int row_shift(const WeightRows& w, int n, int N, int G) {
    std::uint32_t m = 0;
    if (n < N) {
        const std::uint8_t* sc = w.scales + static_cast<std::size_t>(n) * G;
        for (int g = threadIdx.x % 2; g < G; g += 2)
            m = max(m, static_cast<std::uint32_t>(__ldg(sc + g)));
    }
    m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, 1));
    return 140 - static_cast<int>(m);
}

// 2^(s - 127 + shift): what a block with scale byte s is decoded times in a row of that shift
// (NaN for s = 255, as e8m0). At most 2^13; below 2^-126 an fp32 subnormal or 0.
__device__ __forceinline__ float shifted_scale(std::uint32_t s, int shift) {
    if (s == 255u) return __uint_as_float(0x7FC00000u);
    const int e = static_cast<int>(s) - 127 + shift;
    return e >= -126 ? __uint_as_float(static_cast<std::uint32_t>(e + 127) << 23) : ldexpf(1.0f, e);
}

// Operands::half: the shifts of this thread's weight rows (t / 2 + 64 r, r < BN / 64, as the
// decode), also left in s.shift.
template <int BN>
__device__ __forceinline__ void tile_shifts(Smem<BN>& s, const WeightRows& w, int n0, int N, int K,
                                            int (&shift)[BN / 64]) {
    const int t = threadIdx.x;
#pragma unroll
    for (int r = 0; r < BN / 64; ++r) {
        shift[r] = row_shift(w, n0 + t / 2 + 64 * r, N, K / 32);
        if (t % 2 == 0) s.shift[t / 2 + 64 * r] = shift[r];
    }
}

template <Operands kOps, int BN, typename RowOf>
__device__ __forceinline__ void gemm_tile_reference(Smem<BN>& s, RowOf row_of, const WeightRows& w,
                                                    int n0, int N, int K, float a_scale) {
    using namespace nvcuda;
    constexpr bool kHalf = kOps == Operands::half;
    Stage<BN>& st = s.st[0];
    __half* ah = reinterpret_cast<__half*>(st.a);
    __half* bh = reinterpret_cast<__half*>(st.b);
    const int t = threadIdx.x, warp = t / 32;
    const int wm = (warp / 2) * 32, wn = (warp % 2) * (BN / 2);
    RefAcc<BN> acc;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < BN / 32; ++j) wmma::fill_fragment(acc[i][j], 0.0f);
    int shift[BN / 64] = {};
    if constexpr (kHalf) tile_shifts(s, w, n0, N, K, shift);
    const int G = K / 32;
    for (int g = 0; g < G; ++g) {
        const int k0 = g * 32;
        // A: 64 rows x 32 fp32 = 512 float4 pieces, four per thread, split into hi + lo (or
        // scaled to fp16).
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            const int idx = t + p * kThreads, r = idx / 8, part = idx % 8;
            const float* src = row_of(r);
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (src != nullptr) v = *reinterpret_cast<const float4*>(src + k0 + part * 4);
            const float f[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                if constexpr (kHalf) {
                    ah[r * kLds + part * 4 + i] = __float2half_rn(f[i] * a_scale);
                } else {
                    const __nv_bfloat16 hi = __float2bfloat16(f[i]);
                    st.a[r * kLds + part * 4 + i] = hi;
                    st.a_lo[r * kLds + part * 4 + i] =
                        __float2bfloat16(f[i] - __bfloat162float(hi));
                }
            }
        }
        if (w.bf16 != nullptr) {
#pragma unroll
            for (int p = 0; p < BN / 32; ++p) {
                const int idx = t + p * kThreads, r = idx / 4, part = idx % 4;
                const int n = n0 + r;
                uint4 v = make_uint4(0, 0, 0, 0);
                if (n < N)
                    v = __ldg(reinterpret_cast<const uint4*>(
                        w.bf16 + static_cast<std::size_t>(n) * K + k0 + part * 8));
                *reinterpret_cast<uint4*>(&st.b[r * kLds + part * 8]) = v;
            }
        } else {
            // One MXFP4 block per weight row; thread pair (r, half) decodes 16 elements of rows
            // t / 2 + 64 rr.
#pragma unroll
            for (int rr = 0; rr < BN / 64; ++rr) {
                const int r = t / 2 + 64 * rr, half = t % 2, n = n0 + r;
                const int o = r * kLds + half * 16;
                if (n < N) {
                    const uint2 c = __ldg(reinterpret_cast<const uint2*>(
                        w.codes + (static_cast<std::size_t>(n) * G + g) * 16 + half * 8));
                    const std::uint32_t sb = __ldg(w.scales + static_cast<std::size_t>(n) * G + g);
                    const float sc = kHalf ? shifted_scale(sb, shift[rr]) : e8m0(sb);
                    const std::uint32_t words[2] = {c.x, c.y};
#pragma unroll
                    for (int q = 0; q < 2; ++q) {
#pragma unroll
                        for (int b = 0; b < 4; ++b) {
                            const std::uint32_t byte = (words[q] >> (8 * b)) & 0xFFu;
                            const float v0 = e2m1(byte & 0xFu) * sc, v1 = e2m1(byte >> 4) * sc;
                            if constexpr (kHalf) {
                                bh[o + 8 * q + 2 * b] = __float2half_rn(v0);
                                bh[o + 8 * q + 2 * b + 1] = __float2half_rn(v1);
                            } else {
                                st.b[o + 8 * q + 2 * b] = __float2bfloat16(v0);
                                st.b[o + 8 * q + 2 * b + 1] = __float2bfloat16(v1);
                            }
                        }
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < 16; ++i)
                        st.b[o + i] = __float2bfloat16(0.0f);  // 0 bits, in fp16 too
                }
            }
        }
        __syncthreads();
        mma_step<kOps, BN>(st, acc, wm, wn);
        __syncthreads();
    }
    store_tile<BN>(s, acc, wm, wn);
}

// ---- the pipelined tile ----------------------------------------------------------------------

// One thread's share of a K step, in registers between its global loads and its shared stores:
// A rows t / 8 + 16p (p = 0..3), columns 4 (t % 8) ..; bf16 weights: rows (t + 128p) / 4,
// columns 8 ((t + 128p) % 4) .. (p < BN / 32); MXFP4: rows t / 2 + 64 r (r < BN / 64), half t % 2
// of the block (8 code bytes) and the block's scale in b[r].z (b[r].w = 1 where the row exists).
template <int BN>
struct Fetched {
    float4 a[4];
    uint4 b[BN / 32];
};

template <int BN>
__device__ __forceinline__ void fetch_step(Fetched<BN>& f, const float* const (&rows)[4],
                                           const WeightRows& w, int n0, int N, int K, int g) {
    const int t = threadIdx.x, k0 = g * 32, part = t % 8;
#pragma unroll
    for (int p = 0; p < 4; ++p) {
        f.a[p] = rows[p] != nullptr ? *reinterpret_cast<const float4*>(rows[p] + k0 + part * 4)
                                    : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    if (w.bf16 != nullptr) {
#pragma unroll
        for (int p = 0; p < BN / 32; ++p) {
            const int idx = t + p * kThreads, r = idx / 4, bp = idx % 4, n = n0 + r;
            f.b[p] = n < N ? __ldg(reinterpret_cast<const uint4*>(
                                 w.bf16 + static_cast<std::size_t>(n) * K + k0 + bp * 8))
                           : make_uint4(0, 0, 0, 0);
        }
    } else {
        const int G = K / 32, half = t % 2;
#pragma unroll
        for (int rr = 0; rr < BN / 64; ++rr) {
            const int n = n0 + t / 2 + 64 * rr;
            if (n < N) {
                const uint2 c = __ldg(reinterpret_cast<const uint2*>(
                    w.codes + (static_cast<std::size_t>(n) * G + g) * 16 + half * 8));
                f.b[rr] =
                    make_uint4(c.x, c.y, __ldg(w.scales + static_cast<std::size_t>(n) * G + g), 1u);
            } else {
                f.b[rr] = make_uint4(0, 0, 0, 0);
            }
        }
    }
}

// Two fp32 values as one fp16x2 word, rounded to nearest (`lo` in the low half).
__device__ __forceinline__ std::uint32_t half2_bits(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    std::uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

// Operands::half: four E2M1 codes of a 32-bit word's low nibbles (elements 0, 2, 4, 6 of its 8)
// and high nibbles (1, 3, 5, 7), times the block's (shifted) scale, as four fp16 pairs (0,1) (2,3)
// (4,5) (6,7). Each value is (e2m1 * 2^-14) * 2^14 * scale: every step exact, so the bits equal
// the conversion of e2m1(code) * scale (the reference tile's).
__device__ __forceinline__ void decode_word_half(std::uint32_t word, float sc, std::uint32_t* out) {
    const std::uint32_t lo = word & 0x0F0F0F0Fu, hi = (word >> 4) & 0x0F0F0F0Fu;
    const float2 e02 = e2m1x2_scaled(__byte_perm(lo, 0u, 0x4140u));
    const float2 e46 = e2m1x2_scaled(__byte_perm(lo, 0u, 0x4342u));
    const float2 e13 = e2m1x2_scaled(__byte_perm(hi, 0u, 0x4140u));
    const float2 e57 = e2m1x2_scaled(__byte_perm(hi, 0u, 0x4342u));
    constexpr float k14 = 16384.0f;
    out[0] = half2_bits((e02.x * k14) * sc, (e13.x * k14) * sc);
    out[1] = half2_bits((e02.y * k14) * sc, (e13.y * k14) * sc);
    out[2] = half2_bits((e46.x * k14) * sc, (e57.x * k14) * sc);
    out[3] = half2_bits((e46.y * k14) * sc, (e57.y * k14) * sc);
}

// Two E2M1 codes (bits 0..3 and 16..19 of v) placed into bf16 bit positions (exponent and
// mantissa bits at 8..6, sign at 15): exact bf16 numbers 2^126 times smaller than their values
// (0.5 becomes the subnormal 2^-127, 0 stays 0).
__device__ __forceinline__ std::uint32_t e2m1x2_bf16_scaled(std::uint32_t v) {
    return ((v & 0x00070007u) << 6) | ((v & 0x00080008u) << 12);
}

// Operands::split_bf16: the same four pairs as bf16, from the block's scale byte s, in bf16x2
// arithmetic: the codes placed as above times 2^(s-1) (normal for s <= 128), in two exact
// multiplies where that factor is not a bf16 number (2^127, then 2^(s-128); 255 is NaN). Each
// product is the value exactly (code * 2^(s-127) needs a step of at least 2^-128; bf16 reaches
// 2^-133), or infinity where the fp32 route overflows too: the same bits as converting
// e2m1(code) * e8m0(s) to bf16 (the reference tile's), in about half the instructions of the fp32
// route (the weights' decode was the largest part of the tile's work). A NaN scale gives NaN
// either way, possibly with another payload.
__device__ __forceinline__ void decode_word_bf16(std::uint32_t word, std::uint32_t s,
                                                 std::uint32_t* out) {
    const std::uint32_t m1 = s <= 128u ? (s + 126u) << 7 : 254u << 7;
    const std::uint32_t m2 = s <= 128u ? 0x3F80u : (s == 255u ? 0x7FC0u : (s - 1u) << 7);
    __nv_bfloat162 f1, f2;
    const std::uint32_t w1 = m1 | (m1 << 16), w2 = m2 | (m2 << 16);
    memcpy(&f1, &w1, sizeof w1);
    memcpy(&f2, &w2, sizeof w2);
    const std::uint32_t shifted = word >> 4;
    // Pair j = elements (2j, 2j + 1): byte j's low nibble in the low half, its high nibble in the
    // high half (the other bits are masked off).
    const std::uint32_t sel[4] = {0x4400u, 0x5511u, 0x6622u, 0x7733u};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const std::uint32_t x = e2m1x2_bf16_scaled(__byte_perm(word, shifted, sel[j]));
        __nv_bfloat162 v;
        memcpy(&v, &x, sizeof x);
        v = __hmul2(__hmul2(v, f1), f2);
        memcpy(&out[j], &v, sizeof v);
    }
}

// Stores a fetched step into a stage. Operands::half: a_scale scales the activations, `shift`
// holds this thread's weight rows' (tile_shifts).
template <Operands kOps, int BN>
__device__ __forceinline__ void store_step(Stage<BN>& st, const Fetched<BN>& f, bool bf16_weights,
                                           float a_scale, const int (&shift)[BN / 64]) {
    const int t = threadIdx.x, part = t % 8;
#pragma unroll
    for (int p = 0; p < 4; ++p) {
        const int r = t / 8 + 16 * p;
        const float4 v = f.a[p];
        if constexpr (kOps == Operands::half) {
            *reinterpret_cast<uint2*>(&st.a[r * kLds + part * 4]) = make_uint2(
                half2_bits(v.x * a_scale, v.y * a_scale), half2_bits(v.z * a_scale, v.w * a_scale));
        } else {
            std::uint32_t h01, l01, h23, l23;
            split_bf16x2(v.x, v.y, h01, l01);
            split_bf16x2(v.z, v.w, h23, l23);
            *reinterpret_cast<uint2*>(&st.a[r * kLds + part * 4]) = make_uint2(h01, h23);
            *reinterpret_cast<uint2*>(&st.a_lo[r * kLds + part * 4]) = make_uint2(l01, l23);
        }
    }
    if (bf16_weights) {
#pragma unroll
        for (int p = 0; p < BN / 32; ++p) {
            const int idx = t + p * kThreads, r = idx / 4, bp = idx % 4;
            *reinterpret_cast<uint4*>(&st.b[r * kLds + bp * 8]) = f.b[p];
        }
    } else {
        const int half = t % 2;
#pragma unroll
        for (int rr = 0; rr < BN / 64; ++rr) {
            const int r = t / 2 + 64 * rr;
            std::uint32_t out[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            if (f.b[rr].w != 0u) {
                if constexpr (kOps == Operands::half) {
                    const float sc = shifted_scale(f.b[rr].z, shift[rr]);
                    decode_word_half(f.b[rr].x, sc, out);
                    decode_word_half(f.b[rr].y, sc, out + 4);
                } else {
                    decode_word_bf16(f.b[rr].x, f.b[rr].z, out);
                    decode_word_bf16(f.b[rr].y, f.b[rr].z, out + 4);
                }
            }
            uint4* dst = reinterpret_cast<uint4*>(&st.b[r * kLds + half * 16]);
            dst[0] = make_uint4(out[0], out[1], out[2], out[3]);
            dst[1] = make_uint4(out[4], out[5], out[6], out[7]);
        }
    }
}

// The fast tile's products: the same mma.m16n8k16 instructions the WMMA products compile to
// (a 16 x 16 x 16 WMMA product is two of them, one per 8 columns), in the same order per output
// element (k 0..15 hi, lo, then 16..31 hi, lo), so the same bits; the operands come from shared
// memory by ldmatrix (2 + 2 + BN / 32 per 16-wide k half per warp) instead of the WMMA loads'
// generic 32-bit loads (4 per 16 x 16 fragment), which kept the L1/shared pipe 74-79% busy (ncu,
// 20b QKV GEMM and expert gate_up). acc[i][j]: rows wm + 16 i .., columns wn + 8 j .. of the
// warp's 32 x BN/2 (fragment layout in common.cuh).
template <int BN>
struct Frag {
    float acc[2][BN / 16][4];
};

// Element offsets of this lane's ldmatrix rows in a stage's tiles (add kk): A rows wm + 16 i +
// lane % 16, k (lane / 16) 8; B rows (n) wn + 16 jj + (lane / 16) 8 + lane % 8, k ((lane / 8) % 2) 8.
template <int BN>
struct LaneRows {
    int a[2], b[BN / 32];
};

template <int BN>
__device__ __forceinline__ LaneRows<BN> lane_rows(int wm, int wn) {
    const int lane = threadIdx.x % 32;
    LaneRows<BN> r;
#pragma unroll
    for (int i = 0; i < 2; ++i) r.a[i] = (wm + 16 * i + lane % 16) * kLds + (lane / 16) * 8;
#pragma unroll
    for (int jj = 0; jj < BN / 32; ++jj)
        r.b[jj] = (wn + 16 * jj + (lane / 16) * 8 + lane % 8) * kLds + ((lane / 8) % 2) * 8;
    return r;
}

template <Operands kOps, int BN>
__device__ __forceinline__ void mma_step_fast(const Stage<BN>& st, Frag<BN>& f,
                                              const LaneRows<BN>& lr) {
    constexpr bool kHalf = kOps == Operands::half;
#pragma unroll
    for (int kk = 0; kk < 32; kk += 16) {
        std::uint32_t b[BN / 32][4];
#pragma unroll
        for (int jj = 0; jj < BN / 32; ++jj) ldmatrix_x4(b[jj], &st.b[lr.b[jj] + kk]);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            std::uint32_t a[4], al[4];
            ldmatrix_x4(a, &st.a[lr.a[i] + kk]);
            if constexpr (!kHalf) ldmatrix_x4(al, &st.a_lo[lr.a[i] + kk]);
#pragma unroll
            for (int j = 0; j < BN / 16; ++j) {
                const std::uint32_t b0 = b[j / 2][2 * (j % 2)], b1 = b[j / 2][2 * (j % 2) + 1];
                if constexpr (kHalf) {
                    mma16816_f16(f.acc[i][j], a, b0, b1);
                } else {
                    mma16816_bf16(f.acc[i][j], a, b0, b1);
                    mma16816_bf16(f.acc[i][j], al, b0, b1);
                }
            }
        }
    }
}

// The fragments into Smem::c (the stages' space: every warp must be past its last mma_step).
template <int BN>
__device__ __forceinline__ void store_tile_fast(Smem<BN>& s, const Frag<BN>& f, int wm, int wn) {
    const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < BN / 16; ++j) {
            float* c = &s.c[(wm + 16 * i + g) * kLdc<BN> + wn + 8 * j + 2 * q];
            *reinterpret_cast<float2*>(c) = make_float2(f.acc[i][j][0], f.acc[i][j][1]);
            *reinterpret_cast<float2*>(c + 8 * kLdc<BN>) =
                make_float2(f.acc[i][j][2], f.acc[i][j][3]);
        }
    __syncthreads();
}

template <Operands kOps, int BN, typename RowOf>
__device__ __forceinline__ void gemm_tile_fast(Smem<BN>& s, RowOf row_of, const WeightRows& w,
                                               int n0, int N, int K, float a_scale) {
    const int t = threadIdx.x, warp = t / 32;
    const int wm = (warp / 2) * 32, wn = (warp % 2) * (BN / 2);
    Frag<BN> acc;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < BN / 16; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc.acc[i][j][e] = 0.0f;
    const LaneRows<BN> lr = lane_rows<BN>(wm, wn);
    const float* rows[4];
#pragma unroll
    for (int p = 0; p < 4; ++p) rows[p] = row_of(t / 8 + 16 * p);
    const bool bf16_weights = w.bf16 != nullptr;
    const int G = K / 32;
    int shift[BN / 64] = {};
    if constexpr (kOps == Operands::half) tile_shifts(s, w, n0, N, K, shift);
    Fetched<BN> f;
    fetch_step(f, rows, w, n0, N, K, 0);
    store_step<kOps>(s.st[0], f, bf16_weights, a_scale, shift);
    __syncthreads();
    for (int g = 0; g < G; ++g) {
        const bool more = g + 1 < G;
        if (more) fetch_step(f, rows, w, n0, N, K, g + 1);
        mma_step_fast<kOps>(s.st[g & 1], acc, lr);
        if (more) store_step<kOps>(s.st[(g + 1) & 1], f, bf16_weights, a_scale, shift);
        __syncthreads();
    }
    store_tile_fast(s, acc, wm, wn);
}

// The tile of a kernel instantiated for one path, one width and one kind of operands
// (Operands::half needs MXFP4 weights; a_scale is its activations' power-of-two scale, unused
// otherwise).
template <KernelPath kPath, Operands kOps = Operands::split_bf16, int BN, typename RowOf>
__device__ __forceinline__ void gemm_tile(Smem<BN>& s, RowOf row_of, const WeightRows& w, int n0,
                                          int N, int K, float a_scale = 1.0f) {
    if constexpr (kPath == KernelPath::fast) {
        gemm_tile_fast<kOps, BN>(s, row_of, w, n0, N, K, a_scale);
    } else {
        gemm_tile_reference<kOps, BN>(s, row_of, w, n0, N, K, a_scale);
    }
}

}  // namespace neural::cuda::gemm
