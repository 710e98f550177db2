// The sampler's weights over a vocabulary (docs/ARCHITECTURE.md "Sampling"): w[i] =
// exp((v[i] - top) * inv_t), set to 0 where it is below min_p, and their sums. The exp is
// exp_nonpositive's float arithmetic (range reduction to 2^r * 2^f, a degree-6 polynomial),
// written out in the same operations in the same order in every variant (no FMA), so every ISA
// writes the same weights; only the order of the sums differs. One variant per ISA, as the other
// kernels: scalar (SSE2 on x86-64, the baseline), AVX2, AVX-512; the sampler takes the fastest.
#pragma once

#include <cstddef>

#include "cpu/kernels/expert_kernel.h"

namespace neural::cpu {

struct WeightSums {
    double kept = 0;  // the weights written (min-p applied)
    double raw = 0;   // the same before min-p (equal to kept when min_p is 0)
};

// exp(x) for x <= 0 in float arithmetic alone; relative error below 1e-5 (1.2e-7 near 0); 0 below
// -87 and for NaN.
float exp_nonpositive(float x);

// Writes w[0, n) for v[0, n) and returns their sums (each variant sums 16 weights per lane in
// float, then in double). isa must be available (kernel_isa_available).
WeightSums sampler_weights(KernelIsa isa, const float* v, float* w, std::size_t n, float top,
                           float inv_t, float min_p);

// The largest of v[0, n) (n >= 1), skipping NaNs unless v[0] is one (then the result is NaN).
float max_value(const float* v, std::size_t n);
// The first i < n with v[i] == value; n when there is none.
std::size_t first_equal(const float* v, std::size_t n, float value);

}  // namespace neural::cpu
