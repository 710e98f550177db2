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

// E2M1 code -> value (sign bit 3, exponent bits 2..1, mantissa bit 0).
__device__ __forceinline__ float e2m1(std::uint32_t code) {
    constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    const float m = kMag[code & 7u];
    return (code & 8u) ? -m : m;
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

}  // namespace neural::cuda
