// Shared device helpers of the CUDA kernels: bf16 widening, E2M1/E8M0 decoding (the formats of
// model/mxfp4.h) and a warp sum with a fixed shuffle order (deterministic results).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace neural::cuda {

// bf16 bits -> fp32 (exact).
__device__ __forceinline__ float bf16_bits_to_float(std::uint16_t b) {
    return __uint_as_float(static_cast<std::uint32_t>(b) << 16);
}

// The low and high bf16 of a 32-bit word.
__device__ __forceinline__ float bf16_lo(std::uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(std::uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }

// E2M1 code -> value (sign bit 3, exponent bits 2..1, mantissa bit 0), built as fp32 bits in
// registers (a table indexed per element would live in local memory): exponent e > 0 gives
// 2^(e-1) * (1 + m/2), e = 0 the subnormals 0 and 0.5.
__device__ __forceinline__ float e2m1(std::uint32_t code) {
    const std::uint32_t e = (code >> 1) & 3u, m = code & 1u;
    const std::uint32_t mag = e != 0u ? ((e + 126u) << 23) | (m << 22) : (m != 0u ? 0x3F000000u : 0u);
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

// Dot product of one MXFP4 block (16 code bytes in `codes`, element 2j in the low nibble of
// byte j) with 32 floats of x, times the block's scale.
__device__ __forceinline__ float mxfp4_block_dot(uint4 codes, std::uint32_t scale, const float* x) {
    const std::uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
    float acc = 0.0f;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
#pragma unroll
        for (int b = 0; b < 4; ++b) {
            const std::uint32_t byte = (w[q] >> (8 * b)) & 0xFFu;
            const int j = 2 * (4 * q + b);
            acc += e2m1(byte & 0xFu) * x[j];
            acc += e2m1(byte >> 4) * x[j + 1];
        }
    }
    return acc * e8m0(scale);
}

// A quarter of an MXFP4 block: 4 code bytes (8 elements, element 2j in the low nibble of byte j)
// dotted with the 8 matching floats of x, unscaled. A warp covers 8 blocks (128 contiguous code
// bytes) per step with 4 lanes per block: coalesced loads, and x read as two float4 per lane
// from shared memory at a stride of 8 floats (at most 2-way bank conflicts; one lane per block
// reading 32 consecutive floats would make every access a 32-way conflict).
__device__ __forceinline__ float mxfp4_quarter_dot(std::uint32_t codes, const float* x8) {
    const float4 a = *reinterpret_cast<const float4*>(x8);
    const float4 b = *reinterpret_cast<const float4*>(x8 + 4);
    return e2m1(codes & 0xFu) * a.x + e2m1((codes >> 4) & 0xFu) * a.y +
           e2m1((codes >> 8) & 0xFu) * a.z + e2m1((codes >> 12) & 0xFu) * a.w +
           e2m1((codes >> 16) & 0xFu) * b.x + e2m1((codes >> 20) & 0xFu) * b.y +
           e2m1((codes >> 24) & 0xFu) * b.z + e2m1(codes >> 28) * b.w;
}

// One MXFP4 row (G blocks: codes G*16 bytes, 4-byte aligned; scales G bytes) dotted with x
// (G*32 floats in shared memory, 16-byte aligned) by a whole warp; every lane gets the sum.
// Fixed order: lane-partial sums over steps, then warp_sum.
__device__ __forceinline__ float mxfp4_row_dot(const std::uint8_t* codes, const std::uint8_t* scales,
                                               int G, const float* x) {
    const int lane = threadIdx.x % 32;
    const std::uint32_t* words = reinterpret_cast<const std::uint32_t*>(codes);
    float acc = 0.0f;
    for (int w = lane; w < 4 * G; w += 32) {  // word w: block w / 4, quarter w % 4
        const int blk = w >> 2;
        acc += mxfp4_quarter_dot(__ldg(words + w), x + 8 * w) * e8m0(__ldg(scales + blk));
    }
    return warp_sum(acc);
}

}  // namespace neural::cuda
