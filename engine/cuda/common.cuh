// Shared device helpers of the CUDA kernels: bf16 widening, E2M1/E8M0 decoding (the formats of
// model/mxfp4.h) and a warp sum with a fixed shuffle order (deterministic results).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/launch_shapes.h"

namespace neural::cuda {

// bf16 bits -> fp32 (exact).
__device__ __forceinline__ float bf16_bits_to_float(std::uint16_t b) {
    return __uint_as_float(static_cast<std::uint32_t>(b) << 16);
}

// The low and high bf16 of a 32-bit word.
__device__ __forceinline__ float bf16_lo(std::uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(std::uint32_t w) {
    return __uint_as_float(w & 0xFFFF0000u);
}

// Two fp32 values as one bf16x2 word, rounded to nearest (`lo` in the low half).
__device__ __forceinline__ std::uint32_t bf16x2_bits(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    std::uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

// The prefill kernels' operand split x = hi + lo for two values: hi = their bf16 pair, lo = the
// bf16 pair of what hi leaves over (~16 bits of each value in two bf16 products).
__device__ __forceinline__ void split_bf16x2(float a, float b, std::uint32_t& hi,
                                             std::uint32_t& lo) {
    hi = bf16x2_bits(a, b);
    lo = bf16x2_bits(a - bf16_lo(hi), b - bf16_hi(hi));
}

// ---- raw tensor-core instructions (PTX ISA: "warp-level matrix instructions") ----------------
// mma.sync.m16n8k16, fp32 accumulate: D += A B. Fragments per lane = 4g + q (g = lane / 4):
// A (16 x 16, row-major) a0 = rows g, k 2q..2q+1; a1 = row g + 8; a2, a3 the same at k + 8.
// B (16 x 8, "col": stored as 8 rows of 16 k) b0 = k 2q..2q+1 of column g; b1 = k + 8.
// D d0, d1 = row g, columns 2q, 2q + 1; d2, d3 = row g + 8.
__device__ __forceinline__ void mma16816_bf16(float (&d)[4], const std::uint32_t (&a)[4],
                                              std::uint32_t b0, std::uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma16816_f16(float (&d)[4], const std::uint32_t (&a)[4],
                                             std::uint32_t b0, std::uint32_t b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// ldmatrix .x4: four 8 x 8 matrices of 16-bit values from shared memory; lanes 8j .. 8j + 7 give
// the 16-byte-aligned addresses of matrix j's rows, and r[j] holds matrix j the way an mma
// fragment word does (lane 4g + q: row g, columns 2q, 2q + 1). One instruction instead of four
// 32-bit loads per lane (the WMMA loads compiled to generic 32-bit loads).
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* smem_row) {
    const auto addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem_row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

// E2M1 code -> value (sign bit 3, exponent bits 2..1, mantissa bit 0), built as fp32 bits in
// registers (a table indexed per element would live in local memory): exponent e > 0 gives
// 2^(e-1) * (1 + m/2), e = 0 the subnormals 0 and 0.5.
__device__ __forceinline__ float e2m1(std::uint32_t code) {
    const std::uint32_t e = (code >> 1) & 3u, m = code & 1u;
    const std::uint32_t mag =
        e != 0u ? ((e + 126u) << 23) | (m << 22) : (m != 0u ? 0x3F000000u : 0u);
    return __uint_as_float(mag | ((code & 8u) << 28));
}

// E8M0 scale 2^(s-127); s = 255 is NaN (OCP MX), s = 0 the subnormal 2^-127.
__device__ __forceinline__ float e8m0(std::uint32_t s) {
    if (s == 0u) return __uint_as_float(0x00400000u);
    if (s == 255u) return __uint_as_float(0x7FC00000u);
    return __uint_as_float(s << 23);
}

// Sum over the 32 lanes of a warp; every lane gets the result. Fixed butterfly order.
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
    return v;
}

// Two E2M1 codes (bits 0..3 and 16..19 of v) as fp32, times 2^-14: placed into fp16 bit
// positions (exponent+mantissa at bits 9..11, sign at 15) they are exact fp16 numbers 2^14 times
// smaller (normal and subnormal alike), and one half2 -> float2 conversion widens both. This
// costs about a third of the integer work of building fp32 bits per element, which is what
// bounded the resident-expert kernel (it is ALU-bound on the decode, not memory-bound).
__device__ __forceinline__ float2 e2m1x2_scaled(std::uint32_t v) {
    const std::uint32_t h = ((v & 0x00070007u) << 9) | ((v & 0x00080008u) << 12);
    __half2 hh;
    static_assert(sizeof(hh) == sizeof(h));
    memcpy(&hh, &h, sizeof(h));
    return __half22float2(hh);
}

// Dot product of one MXFP4 block (16 code bytes in `codes`, element 2j in the low nibble of
// byte j) with 32 floats of x, times the block's scale.
__device__ __forceinline__ float mxfp4_block_dot(uint4 codes, std::uint32_t scale, const float* x) {
    const std::uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
    float acc = 0.0f;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const std::uint32_t lo = w[q] & 0x0F0F0F0Fu, hi = (w[q] >> 4) & 0x0F0F0F0Fu;
        const float* xq = x + 8 * q;                                     // elements 8q .. 8q+7
        const float2 e02 = e2m1x2_scaled(__byte_perm(lo, 0u, 0x4140u));  // elements 0, 2
        const float2 e46 = e2m1x2_scaled(__byte_perm(lo, 0u, 0x4342u));  // elements 4, 6
        const float2 e13 = e2m1x2_scaled(__byte_perm(hi, 0u, 0x4140u));  // elements 1, 3
        const float2 e57 = e2m1x2_scaled(__byte_perm(hi, 0u, 0x4342u));  // elements 5, 7
        acc += e02.x * xq[0] + e13.x * xq[1] + e02.y * xq[2] + e13.y * xq[3] + e46.x * xq[4] +
               e57.x * xq[5] + e46.y * xq[6] + e57.y * xq[7];
    }
    return (acc * 16384.0f) * e8m0(scale);  // 2^14 first: 2^14 * 2^(s-127) overflows for s > 240
}

// Activations for MXFP4 dots live in shared memory padded to 33 floats per 32-element block
// (block b at 33 * b): a lane per block reading its 32 values then hits bank (b + j) % 32, so a
// warp's reads never conflict (unpadded, all 32 lanes would hit one bank on every read).
__device__ __forceinline__ int padded_index(int i) { return (i >> 5) * 33 + (i & 31); }

// Elements i .. i + 3 (i a multiple of 4: the same 32-element block) of a padded vector.
__device__ __forceinline__ void store_padded4(float* xp, int i, float4 v) {
    float* d = xp + padded_index(i);
    d[0] = v.x;
    d[1] = v.y;
    d[2] = v.z;
    d[3] = v.w;
}

// One MXFP4 row (G blocks: codes G*16 bytes, 16-byte aligned; scales G bytes) dotted with the
// padded activations xp by a whole warp, one 16-byte block per lane per step, Steps steps' loads
// issued before the first block is used (a row of the gpt-oss experts is 90 blocks: 3 steps, one
// memory round trip instead of three); every lane gets the sum. Fixed order: lane-partial sums
// over steps, then warp_sum (the same bits for any Steps).
template <int Steps = 4>
__device__ __forceinline__ float mxfp4_row_dot(const std::uint8_t* codes,
                                               const std::uint8_t* scales, int G, const float* xp) {
    const int lane = threadIdx.x % 32;
    const uint4* blocks = reinterpret_cast<const uint4*>(codes);
    float acc = 0.0f;
    for (int b0 = lane; b0 < G; b0 += 32 * Steps) {
        uint4 c[Steps];
        std::uint32_t sc[Steps];
#pragma unroll
        for (int j = 0; j < Steps; ++j) {
            const int b = b0 + 32 * j;
            c[j] = b < G ? __ldg(blocks + b) : make_uint4(0, 0, 0, 0);
            sc[j] = b < G ? __ldg(scales + b) : 0u;
        }
#pragma unroll
        for (int j = 0; j < Steps; ++j) {
            const int b = b0 + 32 * j;
            if (b < G) acc += mxfp4_block_dot(c[j], sc[j], xp + 33 * b);
        }
    }
    return warp_sum(acc);
}

// use(i, load(i)) for i = threadIdx.x, threadIdx.x + Threads, ... below n, in that order, with
// Steps loads issued before the first use. A block's strided pass over a small vector (an
// activation row into shared memory, a sum of squares) otherwise compiles to one load, wait,
// use per element: a dozen dependent L2 round trips per thread where one or two suffice.
template <int Threads, int Steps, class Load, class Use>
__device__ __forceinline__ void for_strided(int n, Load load, Use use) {
    using T = decltype(load(0));
    for (int i0 = static_cast<int>(threadIdx.x); i0 < n; i0 += Threads * Steps) {
        T v[Steps];
#pragma unroll
        for (int j = 0; j < Steps; ++j) {
            const int i = i0 + Threads * j;
            if (i < n) v[j] = load(i);
        }
#pragma unroll
        for (int j = 0; j < Steps; ++j) {
            const int i = i0 + Threads * j;
            if (i < n) use(i, v[j]);
        }
    }
}

}  // namespace neural::cuda
