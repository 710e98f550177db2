// a * b + c rounded once to fp32, as a hardware FMA does, without the C library's fmaf
// (mingw-w64's is not correctly rounded): for the scalar references that must give the bits of
// the SIMD and tile variants (prompt_scalar.cpp, expert_bf16.cpp). The product of two floats is
// exact in double; the sum is rounded to odd in double (its two-sum error decides the last bit),
// and a round-to-odd result with 53 >= 2 x 24 + 2 bits rounds to fp32 exactly like one rounding.
// Beside it the tiles' flush rules in software (ftz, daz_bf16), for the same references.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace neural::cpu {

inline float exact_fmaf(float a, float b, float c) {
    const double p = static_cast<double>(a) * static_cast<double>(b);
    const double cd = c;
    double s = p + cd;
    if (!std::isfinite(s)) return static_cast<float>(s);
    const double bb = s - p;
    const double err = (p - (s - bb)) + (cd - bb);
    std::uint64_t bits;
    std::memcpy(&bits, &s, sizeof bits);
    if (err != 0.0 && (bits & 1u) == 0) {
        bits = (err > 0) == (s > 0) ? bits + 1 : bits - 1;  // the odd neighbour toward err
        std::memcpy(&s, &bits, sizeof s);
    }
    return static_cast<float>(s);
}

// FTZ: a result below 2^-126 in magnitude becomes zero of its sign.
inline float ftz(float v) {
    return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v;
}

// DAZ: bf16 bits to fp32, subnormals as zero of their sign.
inline float daz_bf16(std::uint16_t v) {
    if ((v & 0x7F80u) == 0) v &= 0x8000u;
    const std::uint32_t bits = static_cast<std::uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

}  // namespace neural::cpu
