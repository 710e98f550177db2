// The sampler's weights, AVX2 variant (compiled with the AVX2 flags and no FMA contraction;
// called only where cpu_features() reports AVX2): sampler_weights.inl over 8 lanes.
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
    static __m256d dzero() { return _mm256_setzero_pd(); }
    static __m256d dadd(__m256d acc, __m256 x) {
        return _mm256_add_pd(acc, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x)),
                                                _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))));
    }
    static double dsum(__m256d acc) {  // in registers (sampler_weights_avx512.cpp)
        const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(acc), _mm256_extractf128_pd(acc, 1));
        return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
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
