// The constants and the scalar element of the sampler's weights (sampler_weights.h), shared by
// the variants: their vector code repeats these operations in this order.
#pragma once

#include <cstdint>
#include <cstring>

#include "cpu/kernels/sampler_weights.h"

namespace neural::cpu::sampler_detail {

constexpr float kLow = -87.0f;  // below it (and for NaN) the weight is 0
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
// ln(2)^k / k!, k = 6 down to 0: 2^f for |f| <= 1/2 (truncation 1.2e-7).
constexpr float kExp2[7] = {1.5403530393381606e-4f,
                            1.3333558146428443e-3f,
                            9.6181291076284772e-3f,
                            5.5504108664821580e-2f,
                            2.4022650695910071e-1f,
                            6.9314718055994531e-1f,
                            1.0f};

inline float exp_element(float x) {
    const float xc = x >= kLow ? x : kLow;
    const float t = xc * kLog2e;
    const float r = (t + kRound) - kRound;
    const float f = t - r;
    float p = kExp2[0];
    for (int c = 1; c < 7; ++c) p = p * f + kExp2[c];
    // 2^r by adding r to the exponent field (r >= -126 here: a normal float).
    std::int32_t bits;
    std::memcpy(&bits, &p, 4);
    bits += static_cast<std::int32_t>(r) * (1 << 23);
    float w;
    std::memcpy(&w, &bits, 4);
    return x >= kLow ? w : 0.0f;
}

// The scalar tail of every variant: elements [i, n).
inline void weights_tail(const float* v, float* w, std::size_t i, std::size_t n, float top,
                         float inv_t, float min_p, WeightSums& out) {
    for (; i < n; ++i) {
        const float wr = exp_element((v[i] - top) * inv_t);
        const float wk = wr >= min_p ? wr : 0.0f;
        w[i] = wk;
        out.kept += wk;
        out.raw += wr;
    }
}

WeightSums weights_avx2(const float* v, float* w, std::size_t n, float top, float inv_t,
                        float min_p);
WeightSums weights_avx512(const float* v, float* w, std::size_t n, float top, float inv_t,
                          float min_p);

}  // namespace neural::cpu::sampler_detail
