// The sampler's weights (sampler_weights.h): the baseline variant (SSE2 on x86-64, else scalar),
// the largest value, and the dispatch to the AVX2 / AVX-512 variants.
#include "cpu/kernels/sampler_weights.h"

#include "cpu/kernels/sampler_weights_impl.h"
#include "neural/error.h"

#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>
#define NEURAL_SAMPLER_SSE2 1
#else
#define NEURAL_SAMPLER_SSE2 0
#endif

#if NEURAL_SAMPLER_SSE2
namespace neural::cpu::sampler_detail {
namespace {
struct Sse2 {
    static constexpr std::size_t W = 4;
    static __m128 zero() { return _mm_setzero_ps(); }
    static __m128 set1(float x) { return _mm_set1_ps(x); }
    static __m128 load(const float* p) { return _mm_loadu_ps(p); }
    static void store(float* p, __m128 x) { _mm_storeu_ps(p, x); }
    static __m128 add(__m128 a, __m128 b) { return _mm_add_ps(a, b); }
    static __m128 sub(__m128 a, __m128 b) { return _mm_sub_ps(a, b); }
    static __m128 mul(__m128 a, __m128 b) { return _mm_mul_ps(a, b); }
    // MAXPS returns its second operand when either is NaN.
    static __m128 max(__m128 a, __m128 b) { return _mm_max_ps(a, b); }
    // x where a >= b, else 0 (NaN compares false).
    static __m128 keep_ge(__m128 a, __m128 b, __m128 x) {
        return _mm_and_ps(_mm_cmpge_ps(a, b), x);
    }
    // p * 2^r for integral r: r added to p's exponent field.
    static __m128 scale2(__m128 p, __m128 r) {
        const __m128i e = _mm_slli_epi32(_mm_cvtps_epi32(r), 23);
        return _mm_castsi128_ps(_mm_add_epi32(_mm_castps_si128(p), e));
    }
    // Double lanes 0-1, 2-3, 4-5, 6-7 (sampler_weights.inl): lane j += f_j + f_{j+8}, f in four
    // quarters (lanes 0-3, 4-7, 8-11, 12-15).
    struct D {
        __m128d d[4];
    };
    static D dzero() {
        return {{_mm_setzero_pd(), _mm_setzero_pd(), _mm_setzero_pd(), _mm_setzero_pd()}};
    }
    static void dadd(D& acc, const __m128 (&f)[4]) {
        for (int q = 0; q < 2; ++q) {  // f[q] and f[q + 2] hold lanes 4q.. and 4q + 8..
            acc.d[2 * q] =
                _mm_add_pd(acc.d[2 * q], _mm_add_pd(_mm_cvtps_pd(f[q]), _mm_cvtps_pd(f[q + 2])));
            acc.d[2 * q + 1] = _mm_add_pd(
                acc.d[2 * q + 1], _mm_add_pd(_mm_cvtps_pd(_mm_movehl_ps(f[q], f[q])),
                                             _mm_cvtps_pd(_mm_movehl_ps(f[q + 2], f[q + 2]))));
        }
    }
    static double dsum(const D& acc) {  // 4 + 4 (lanes j, j + 4), 2 + 2, 1 + 1
        const __m128d s2 =
            _mm_add_pd(_mm_add_pd(acc.d[0], acc.d[2]), _mm_add_pd(acc.d[1], acc.d[3]));
        return _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
    }
};
}  // namespace
}  // namespace neural::cpu::sampler_detail
#include "cpu/kernels/sampler_weights.inl"
#endif

namespace neural::cpu {

float exp_nonpositive(float x) { return sampler_detail::exp_element(x); }

WeightSums sampler_weights(KernelIsa isa, const float* v, float* w, std::size_t n, float top,
                           float inv_t, float min_p) {
    switch (isa) {
        case KernelIsa::scalar:
            break;
#ifdef NEURAL_KERNELS_X86
        case KernelIsa::avx2:
            return sampler_detail::weights_avx2(v, w, n, top, inv_t, min_p);
        case KernelIsa::avx512:
            return sampler_detail::weights_avx512(v, w, n, top, inv_t, min_p);
#endif
        default:
            fail("sampler weights: kernel \"{}\" is not in this build", kernel_isa_name(isa));
    }
#if NEURAL_SAMPLER_SSE2
    return sampler_detail::weights_simd<sampler_detail::Sse2>(v, w, n, top, inv_t, min_p);
#else
    WeightSums out;
    sampler_detail::weights_tail(v, w, 0, n, top, inv_t, min_p, out);
    return out;
#endif
}

float max_value(const float* v, std::size_t n) {
    std::size_t i = 0;
    float top = v[0];
#if NEURAL_SAMPLER_SSE2
    // Starting from v[0] in every lane, a NaN value never enters m (MAXPS above).
    __m128 m = _mm_set1_ps(top);
    for (; i + 4 <= n; i += 4) m = _mm_max_ps(_mm_loadu_ps(v + i), m);
    float lanes[4];
    _mm_storeu_ps(lanes, m);
    for (const float x : lanes) top = x > top ? x : top;
#endif
    for (; i < n; ++i) top = v[i] > top ? v[i] : top;
    return top;
}

std::size_t first_equal(const float* v, std::size_t n, float value) {
    std::size_t i = 0;
#if NEURAL_SAMPLER_SSE2
    const __m128 x = _mm_set1_ps(value);
    for (; i + 4 <= n; i += 4) {
        const int hit = _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(v + i), x));
        if (hit != 0) {
            for (std::size_t j = 0; j < 4; ++j) {
                if ((hit >> j) & 1) return i + j;
            }
        }
    }
#endif
    for (; i < n; ++i) {
        if (v[i] == value) return i;
    }
    return n;
}

}  // namespace neural::cpu
