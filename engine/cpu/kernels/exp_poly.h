// e^x without the C library, for the per-token arithmetic whose bits must not depend on the CPU
// or the OS (docs/KERNELS.md "Every variant the same bits"): the C library's expf differs between
// glibc (which even picks an FMA or a plain build of it by CPU) and the Windows runtime.
//
// Cephes expf, as the attention kernels' exp: x = n ln 2 + r (n = x log2 e rounded to nearest
// even, ln 2 in two parts, the first product exact), e^r = 1 + r + r^2 P(r) (degree 6 on
// |r| <= ln 2 / 2, ~1 ulp), times 2^n as two exact powers of two (one rounding, as vscalefps).
// Plain float operations: the kernel files compile it under -ffp-contract=off, and baseline
// x86-64 code has no fused multiply-add to contract into, so every file that includes it
// computes the same bits. Above 88.72 the result is +inf (where expf overflows too), below -104
// it is 0, a NaN stays NaN.
//
// `static inline`: one private copy per file, as the ISA files need (expert_kernel_impl.h).
#pragma once

#include <cstdint>
#include <cstring>

namespace neural::cpu {

// 2^k for k in [-126, 127]: the exponent field.
static inline float exp_poly_pow2(int k) {
    const std::uint32_t bits = static_cast<std::uint32_t>(k + 127) << 23;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

static inline float exp_poly(float x) {
    if (x != x) return x;
    if (x > 88.72f) return exp_poly_pow2(64) * exp_poly_pow2(64);  // +inf
    if (x < -104.0f) return 0.0f;
    // Round to nearest even by adding and subtracting 1.5 * 2^23 (exact for |x log2 e| < 151).
    const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + (r + 1.0f);
    const int k = static_cast<int>(n);                       // [-150, 128]
    const int k1 = k / 2;                                    // k1 and k - k1 in [-75, 64]
    return (p * exp_poly_pow2(k1)) * exp_poly_pow2(k - k1);  // p 2^k1 exact and normal
}

}  // namespace neural::cpu
