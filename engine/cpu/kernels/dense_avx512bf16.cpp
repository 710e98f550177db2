// AVX512_BF16 dense kernel (compiled with -mavx512bf16 on top of the AVX-512F/BW/VL flags;
// called only after cpu_features() reported AVX512_BF16): one vdpbf16ps per 32 weights and
// operand part (high, then low) adds the odd, then the even products to the 16 lane sums, the
// arithmetic every variant reproduces (dense_kernel.h).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

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

// One 32-column chunk: the rows' weights against every token's operand.
template <int NR, int NT>
inline void chunk(const __m512i* wv, const std::uint16_t* const* x, std::int64_t lo,
                  std::int64_t c, __m512 (&acc)[NR][NT]) {
    for (int t = 0; t < NT; ++t) {
        const __m512bh xh = (__m512bh)_mm512_loadu_si512(x[t] + c);
        const __m512bh xl = (__m512bh)_mm512_loadu_si512(x[t] + lo + c);
        for (int r = 0; r < NR; ++r) {
            acc[r][t] = _mm512_dpbf16_ps(acc[r][t], (__m512bh)wv[r], xh);
            acc[r][t] = _mm512_dpbf16_ps(acc[r][t], (__m512bh)wv[r], xl);
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

TaskFn task_avx512bf16() { return &dense_task; }

}  // namespace neural::cpu::dense_detail
