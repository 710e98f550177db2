// AVX512_VNNI int8 dense kernel (compiled with -mavx512vnni on top of the AVX-512F/BW/VL flags;
// called only after cpu_features() reported AVX512_VNNI). vpdpbusd multiplies unsigned by
// signed bytes: the weights are stored offset (q + 128, unsigned), the activations signed, and
// each lane starts from -128 * (the sum of its 4 activation bytes), so it ends at the exact
// sum of q * x (dense_int8.h). One zmm = one 64-column chunk = two blocks.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu/kernels/dense_int8_impl.h"

namespace neural::cpu::int8_detail {
namespace {

#include "cpu/kernels/simd_avx512.inl"

// Bytes ahead of the group stream that each chunk asks the cache for.
constexpr int kPrefetchBytes = 2048;

struct Isa {
    template <int NT>
    static void group(const std::uint8_t* g, std::int64_t padded, std::int64_t chunks,
                      const std::int8_t* const* xq, const float* const* xd, float* res) {
        const std::uint8_t* scales = g + 4 * padded;
        const std::int64_t blocks = 2 * chunks;
        const __m512i zero = _mm512_setzero_si512();
        const __m512i k80 = _mm512_set1_epi8(static_cast<char>(0x80));
        // Lanes 0-7 take the pair's low bf16 (the chunk's first block), 8-15 its high one.
        const __m512i shift =
            _mm512_setr_epi32(16, 16, 16, 16, 16, 16, 16, 16, 0, 0, 0, 0, 0, 0, 0, 0);
        const __m512i hi_mask = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
        __m512 acc[4][NT];
        for (int r = 0; r < 4; ++r) {
            for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
        }
        for (std::int64_t k = 0; k < chunks; ++k) {
            const std::uint8_t* wk = g + 256 * k;
            for (int line = 0; line < 256; line += 64) {
                _mm_prefetch(reinterpret_cast<const char*>(wk + kPrefetchBytes + line),
                             _MM_HINT_T0);
            }
            __m512i w[4];
            __m512 dw[4];
            for (int r = 0; r < 4; ++r) {
                w[r] = _mm512_load_si512(wk + 64 * r);
                std::uint32_t pair;
                std::memcpy(&pair, scales + 2 * (r * blocks + 2 * k), 4);
                dw[r] = _mm512_castsi512_ps(_mm512_and_si512(
                    _mm512_sllv_epi32(_mm512_set1_epi32(static_cast<int>(pair)), shift), hi_mask));
            }
            for (int t = 0; t < NT; ++t) {
                const __m512i xv = _mm512_loadu_si512(xq[t] + 64 * k);
                const __m512i negc = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, k80, xv));
                const __m512 dx = _mm512_loadu_ps(xd[t] + 16 * k);
                for (int r = 0; r < 4; ++r) {
                    const __m512i l = _mm512_dpbusd_epi32(negc, w[r], xv);
                    const __m512 s = _mm512_mul_ps(dw[r], dx);
                    acc[r][t] = _mm512_add_ps(acc[r][t], _mm512_mul_ps(_mm512_cvtepi32_ps(l), s));
                }
            }
        }
        for (int r = 0; r < 4; ++r) {
            for (int t = 0; t < NT; ++t) res[r * NT + t] = hsum512(acc[r][t]);
        }
    }
};

#include "cpu/kernels/dense_int8_tasks.inl"

}  // namespace

TaskFn task_avx512vnni() { return &int8_task; }

}  // namespace neural::cpu::int8_detail
