// AVX2 int8 dense kernel (compiled with -mavx2 -mfma; called only after cpu_features() reported
// AVX2 + FMA). vpmaddubsw multiplies unsigned by signed bytes and saturates pairs at int16, so
// it takes |q| (at most 127) and the activation with q's sign (vpsignb): a pair is at most
// 2 * 127 * 127, exact; vpmaddwd by ones then gives each lane the exact sum of its 4 products,
// the integer of dense_int8.h. One ymm = one 32-column block (lanes 0-7 or 8-15 of a chunk).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu/kernels/dense_int8_impl.h"

namespace neural::cpu::int8_detail {
namespace {

// Lanes 0-7 in lo, 8-15 in hi, summed in the same tree as the 16-lane variants.
inline float hsum16(__m256 lo, __m256 hi) {
    const __m256 s8 = _mm256_add_ps(lo, hi);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
    return _mm_cvtss_f32(s1);
}

inline float scale_at(const std::uint8_t* p) {
    std::uint16_t v;
    std::memcpy(&v, p, 2);
    const std::uint32_t bits = static_cast<std::uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// Bytes ahead of the group stream that each chunk asks the cache for.
constexpr int kPrefetchBytes = 2048;

struct Isa {
    template <int NT>
    static void group(const std::uint8_t* g, std::int64_t padded, std::int64_t chunks,
                      const std::int8_t* const* xq, const float* const* xd, float* res) {
        const std::uint8_t* scales = g + 4 * padded;
        const std::int64_t blocks = 2 * chunks;
        const __m256i k80 = _mm256_set1_epi8(static_cast<char>(0x80));
        const __m256i ones = _mm256_set1_epi16(1);
        __m256 acc[4][NT][2];
        for (int r = 0; r < 4; ++r) {
            for (int t = 0; t < NT; ++t) acc[r][t][0] = acc[r][t][1] = _mm256_setzero_ps();
        }
        for (std::int64_t k = 0; k < chunks; ++k) {
            const std::uint8_t* wk = g + 256 * k;
            for (int line = 0; line < 256; line += 64) {
                _mm_prefetch(reinterpret_cast<const char*>(wk + kPrefetchBytes + line),
                             _MM_HINT_T0);
            }
            for (int h = 0; h < 2; ++h) {
                __m256i aw[4], qw[4];
                __m256 dw[4];
                for (int r = 0; r < 4; ++r) {
                    const __m256i wv =
                        _mm256_load_si256(reinterpret_cast<const __m256i*>(wk + 64 * r + 32 * h));
                    qw[r] = _mm256_xor_si256(wv, k80);  // the signed q
                    aw[r] = _mm256_abs_epi8(qw[r]);
                    dw[r] = _mm256_set1_ps(scale_at(scales + 2 * (r * blocks + 2 * k + h)));
                }
                for (int t = 0; t < NT; ++t) {
                    const __m256i xv = _mm256_loadu_si256(
                        reinterpret_cast<const __m256i*>(xq[t] + 64 * k + 32 * h));
                    const __m256 dx = _mm256_set1_ps(xd[t][16 * k + 8 * h]);
                    for (int r = 0; r < 4; ++r) {
                        const __m256i sx = _mm256_sign_epi8(xv, qw[r]);
                        const __m256i l = _mm256_madd_epi16(_mm256_maddubs_epi16(aw[r], sx), ones);
                        const __m256 s = _mm256_mul_ps(dw[r], dx);
                        acc[r][t][h] =
                            _mm256_add_ps(acc[r][t][h], _mm256_mul_ps(_mm256_cvtepi32_ps(l), s));
                    }
                }
            }
        }
        for (int r = 0; r < 4; ++r) {
            for (int t = 0; t < NT; ++t) res[r * NT + t] = hsum16(acc[r][t][0], acc[r][t][1]);
        }
    }
};

#include "cpu/kernels/dense_int8_tasks.inl"

}  // namespace

TaskFn task_avx2() { return &int8_task; }

}  // namespace neural::cpu::int8_detail
