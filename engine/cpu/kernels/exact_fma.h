// a * b + c rounded once to fp32, as a hardware FMA does, without the C library's fmaf
// (mingw-w64's is not correctly rounded): for the scalar references that must give the bits of
// the SIMD and tile variants (prompt_scalar.cpp, expert_bf16.cpp). The product of two floats is
// exact in double; the sum is rounded to odd in double (its two-sum error decides the last bit),
// and a round-to-odd result with 53 >= 2 x 24 + 2 bits rounds to fp32 exactly like one rounding.
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

}  // namespace neural::cpu
