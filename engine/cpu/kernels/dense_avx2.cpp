// AVX2 dense kernel (compiled with -mavx2 -mfma; called only after cpu_features() reported
// AVX2 + FMA): the 16 lane sums of dense_kernel.h as two 8-lane halves (columns 0-15 and
// 16-31 of each chunk), each widened by mask / shift and added with two FMAs per operand part
// (odd, then even).
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "cpu/kernels/dense_impl.h"

namespace neural::cpu::dense_detail {
namespace {

// Lanes 0-7 in lo, 8-15 in hi, summed in the same tree as the 16-lane variants.
inline float hsum16(__m256 lo, __m256 hi) {
    const __m256 s8 = _mm256_add_ps(lo, hi);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
    return _mm_cvtss_f32(s1);
}

constexpr int kPrefetchBytes = 2048;

// One 32-column chunk (w: NR pointers to its 64 bytes).
template <int NR, int NT>
inline void chunk(const std::uint8_t* const* w, const std::uint16_t* const* x, std::int64_t lo,
                  std::int64_t c, __m256 (&acc)[NR][NT][2]) {
    const __m256i hi_mask = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
    for (int h = 0; h < 2; ++h) {
        __m256 we[NR], wo[NR];
        for (int r = 0; r < NR; ++r) {
            const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r] + 32 * h));
            we[r] = _mm256_castsi256_ps(_mm256_slli_epi32(wv, 16));
            wo[r] = _mm256_castsi256_ps(_mm256_and_si256(wv, hi_mask));
        }
        for (int t = 0; t < NT; ++t) {
            for (const std::int64_t part : {std::int64_t{0}, lo}) {  // the high, then the low part
                const __m256i xv =
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[t] + part + c + 16 * h));
                const __m256 xe = _mm256_castsi256_ps(_mm256_slli_epi32(xv, 16));
                const __m256 xo = _mm256_castsi256_ps(_mm256_and_si256(xv, hi_mask));
                for (int r = 0; r < NR; ++r) {
                    acc[r][t][h] = _mm256_fmadd_ps(wo[r], xo, acc[r][t][h]);
                    acc[r][t][h] = _mm256_fmadd_ps(we[r], xe, acc[r][t][h]);
                }
            }
        }
    }
}

struct Isa {
    template <int NR, int NT>
    static void dot(const std::uint8_t* const* w, const std::uint16_t* const* x, std::int64_t lo,
                    std::int64_t cols, float* res) {
        __m256 acc[NR][NT][2];
        for (int r = 0; r < NR; ++r) {
            for (int t = 0; t < NT; ++t) acc[r][t][0] = acc[r][t][1] = _mm256_setzero_ps();
        }
        std::int64_t c = 0;
        const std::uint8_t* wc[NR];
        for (; c + 32 <= cols; c += 32) {
            for (int r = 0; r < NR; ++r) {
                wc[r] = w[r] + 2 * c;
                _mm_prefetch(reinterpret_cast<const char*>(wc[r] + kPrefetchBytes), _MM_HINT_T0);
            }
            chunk<NR, NT>(wc, x, lo, c, acc);
        }
        if (c < cols) {  // the last partial chunk, zero-padded (weights past cols read as zero)
            alignas(32) std::uint8_t tail[NR][64] = {};
            for (int r = 0; r < NR; ++r) {
                std::memcpy(tail[r], w[r] + 2 * c, static_cast<size_t>(2 * (cols - c)));
                wc[r] = tail[r];
            }
            chunk<NR, NT>(wc, x, lo, c, acc);
        }
        for (int r = 0; r < NR; ++r) {
            for (int t = 0; t < NT; ++t) res[r * NT + t] = hsum16(acc[r][t][0], acc[r][t][1]);
        }
    }
};

#include "cpu/kernels/dense_tasks.inl"

}  // namespace

TaskFn task_avx2() { return &dense_task; }

}  // namespace neural::cpu::dense_detail
