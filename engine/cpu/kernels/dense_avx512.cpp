// AVX-512F dense kernel (compiled with -mavx512f -mavx512bw -mavx512vl; called only after
// cpu_features() reported them): 32 bf16 weights per 64-byte load widen to the 16 odd and the
// 16 even elements as fp32 (mask / shift by 16), and two FMAs per operand part add them to the
// 16 lane sums in vdpbf16ps's order (odd, then even).
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "cpu/kernels/dense_impl.h"

namespace neural::cpu::dense_detail {
namespace {

inline float hsum512(__m512 v) {
    const __m256 lo = _mm512_castps512_ps256(v);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    const __m256 s8 = _mm256_add_ps(lo, hi);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
    return _mm_cvtss_f32(s1);
}

constexpr int kPrefetchBytes = 2048;

// One 32-column chunk: the rows' widened weights against every token's operand.
template <int NR, int NT>
inline void chunk(const __m512i* wv, const std::uint16_t* const* x, std::int64_t lo,
                  std::int64_t c, __m512 (&acc)[NR][NT]) {
    const __m512i hi_mask = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    __m512 we[NR], wo[NR];
    for (int r = 0; r < NR; ++r) {
        we[r] = _mm512_castsi512_ps(_mm512_slli_epi32(wv[r], 16));
        wo[r] = _mm512_castsi512_ps(_mm512_and_si512(wv[r], hi_mask));
    }
    for (int t = 0; t < NT; ++t) {
        for (const std::int64_t part : {std::int64_t{0}, lo}) {  // the high, then the low part
            const __m512i xv = _mm512_loadu_si512(x[t] + part + c);
            const __m512 xe = _mm512_castsi512_ps(_mm512_slli_epi32(xv, 16));
            const __m512 xo = _mm512_castsi512_ps(_mm512_and_si512(xv, hi_mask));
            for (int r = 0; r < NR; ++r) {
                acc[r][t] = _mm512_fmadd_ps(wo[r], xo, acc[r][t]);
                acc[r][t] = _mm512_fmadd_ps(we[r], xe, acc[r][t]);
            }
        }
    }
}

struct Isa {
    template <int NR, int NT>
    static void dot(const std::uint8_t* const* w, const std::uint16_t* const* x,
                    std::int64_t lo, std::int64_t cols, float* res) {
        __m512 acc[NR][NT];
        for (int r = 0; r < NR; ++r) {
            for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
        }
        std::int64_t c = 0;
        for (; c + 32 <= cols; c += 32) {
            __m512i wv[NR];
            for (int r = 0; r < NR; ++r) {
                _mm_prefetch(reinterpret_cast<const char*>(w[r] + 2 * c + kPrefetchBytes),
                             _MM_HINT_T0);
                wv[r] = _mm512_loadu_si512(w[r] + 2 * c);
            }
            chunk<NR, NT>(wv, x, lo, c, acc);
        }
        if (c < cols) {  // the last partial chunk: weights past cols read as zero
            const auto mask = static_cast<__mmask32>((1ull << (cols - c)) - 1);
            __m512i wv[NR];
            for (int r = 0; r < NR; ++r) wv[r] = _mm512_maskz_loadu_epi16(mask, w[r] + 2 * c);
            chunk<NR, NT>(wv, x, lo, c, acc);
        }
        for (int r = 0; r < NR; ++r) {
            for (int t = 0; t < NT; ++t) res[r * NT + t] = hsum512(acc[r][t]);
        }
    }
};

#include "cpu/kernels/dense_tasks.inl"

}  // namespace

TaskFn task_avx512() { return &dense_task; }

}  // namespace neural::cpu::dense_detail
