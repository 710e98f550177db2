// The sampler's weights, AVX2 variant (compiled with the AVX2 flags and no FMA contraction;
// called only where cpu_features() reports AVX2): sampler_weights.inl over 8 lanes, two vectors per 16 lanes of sums.
#include <immintrin.h>

#include "cpu/kernels/sampler_weights_impl.h"

namespace neural::cpu::sampler_detail {
namespace {
struct Avx2 {
    static constexpr std::size_t W = 8;
    static __m256 zero() { return _mm256_setzero_ps(); }
    static __m256 set1(float x) { return _mm256_set1_ps(x); }
    static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
    static void store(float* p, __m256 x) { _mm256_storeu_ps(p, x); }
    static __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
    static __m256 sub(__m256 a, __m256 b) { return _mm256_sub_ps(a, b); }
    static __m256 mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
    static __m256 max(__m256 a, __m256 b) { return _mm256_max_ps(a, b); }  // NaN: b
    static __m256 keep_ge(__m256 a, __m256 b, __m256 x) {
        return _mm256_and_ps(_mm256_cmp_ps(a, b, _CMP_GE_OQ), x);
    }
    static __m256 scale2(__m256 p, __m256 r) {
        const __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(r), 23);
        return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
    }
    // Double lanes 0-3 and 4-7 (sampler_weights.inl): lane j += f_j + f_{j+8}, f in two halves.
    struct D {
        __m256d a, b;
    };
    static D dzero() { return {_mm256_setzero_pd(), _mm256_setzero_pd()}; }
    static void dadd(D& acc, const __m256 (&f)[2]) {
        acc.a = _mm256_add_pd(acc.a, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(f[0])),
                                                   _mm256_cvtps_pd(_mm256_castps256_ps128(f[1]))));
        acc.b =
            _mm256_add_pd(acc.b, _mm256_add_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(f[0], 1)),
                                               _mm256_cvtps_pd(_mm256_extractf128_ps(f[1], 1))));
    }
    static double dsum(const D& acc) {  // 4 + 4, 2 + 2, 1 + 1, in registers
        const __m256d s4 = _mm256_add_pd(acc.a, acc.b);
        const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
        return _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
    }
};
}  // namespace
}  // namespace neural::cpu::sampler_detail

#include "cpu/kernels/sampler_weights.inl"

namespace neural::cpu::sampler_detail {
WeightSums weights_avx2(const float* v, float* w, std::size_t n, float top, float inv_t,
                        float min_p) {
    return weights_simd<Avx2>(v, w, n, top, inv_t, min_p);
}
}  // namespace neural::cpu::sampler_detail
