// The sampler's weights, AVX-512 variant (compiled with the AVX-512 flags and no FMA
// contraction; called only where cpu_features() reports AVX-512 F/BW/VL):
// sampler_weights.inl over 16 lanes.
#include <immintrin.h>

#include "cpu/kernels/sampler_weights_impl.h"

namespace neural::cpu::sampler_detail {
namespace {
struct Avx512 {
    static constexpr std::size_t W = 16;
    static __m512 zero() { return _mm512_setzero_ps(); }
    static __m512 set1(float x) { return _mm512_set1_ps(x); }
    static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
    static void store(float* p, __m512 x) { _mm512_storeu_ps(p, x); }
    static __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
    static __m512 sub(__m512 a, __m512 b) { return _mm512_sub_ps(a, b); }
    static __m512 mul(__m512 a, __m512 b) { return _mm512_mul_ps(a, b); }
    static __m512 max(__m512 a, __m512 b) { return _mm512_max_ps(a, b); }  // NaN: b
    static __m512 keep_ge(__m512 a, __m512 b, __m512 x) {
        return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(a, b, _CMP_GE_OQ), x);
    }
    static __m512 scale2(__m512 p, __m512 r) {
        const __m512i e = _mm512_slli_epi32(_mm512_cvtps_epi32(r), 23);
        return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), e));
    }
    // Double lanes 0-7 (sampler_weights.inl): lane j += f_j + f_{j+8}.
    static __m512d dzero() { return _mm512_setzero_pd(); }
    static void dadd(__m512d& acc, const __m512 (&f)[1]) {
        const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f[0]), 1));
        acc = _mm512_add_pd(
            acc, _mm512_add_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(f[0])), _mm512_cvtps_pd(hi)));
    }
    // 4 + 4, 2 + 2, 1 + 1, written out (not _mm512_reduce_add_pd, whose order is the compiler's),
    // in registers: a 64-byte store of the accumulator to a stack array crashed under GCC 12's
    // AddressSanitizer (a wild address for the array in the realigned frame).
    static double dsum(__m512d acc) {
        const __m256d s4 =
            _mm256_add_pd(_mm512_castpd512_pd256(acc), _mm512_extractf64x4_pd(acc, 1));
        const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
        return _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
    }
};
}  // namespace
}  // namespace neural::cpu::sampler_detail

#include "cpu/kernels/sampler_weights.inl"

namespace neural::cpu::sampler_detail {
WeightSums weights_avx512(const float* v, float* w, std::size_t n, float top, float inv_t,
                          float min_p) {
    return weights_simd<Avx512>(v, w, n, top, inv_t, min_p);
}
}  // namespace neural::cpu::sampler_detail
