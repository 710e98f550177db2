// AVX2 + FMA expert kernel (compiled with -mavx2 -mfma / /arch:AVX2; only called after
// cpu_features() reported AVX2 and FMA).
//
// Decode of one 32-value block: the 16 code bytes widen to two 8 x i32 vectors (bytes 0-7,
// 8-15); vpermps looks up the magnitude (code bits 0-2) in the 8-entry table already multiplied
// by the block's scale, and the code's bit 3 is XORed in as the sign. Low nibbles give the even
// elements, high nibbles the odd ones, so operands are stored block-deinterleaved (even 16, then
// odd 16). Per (row, token): four accumulators, a_q += w[8q:8q+8] x[8q:8q+8] per block: a_0, a_1
// are lanes 0-7 and 8-15 of the AVX-512 variant's even accumulator, a_2, a_3 of its odd one, and
// each lane sees the same fused multiply-adds in the same order. The sum (a_0 + a_2) + (a_1 + a_3),
// then 4 + 4, 2 + 2, 1 + 1, is hsum512(e + o): the AVX-512 variant's bits (docs/KERNELS.md).
#include <immintrin.h>
#include <math.h>

#include <cstdint>
#include <cstring>

#include "cpu/kernels/expert_kernel_impl.h"

namespace neural::cpu::kernel_detail {
namespace {

inline float hsum256(__m256 v) {
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
    return _mm_cvtss_f32(s1);
}

inline void store_codes(std::uint8_t* dst, __m128i b, bool stream) {
    if (stream) {
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst), b);
    } else {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), b);
    }
}

struct Isa {
    static constexpr bool kReference = false;
    static constexpr bool kDeinterleaved = true;
    static constexpr int kGroup = 2;  // 4 accumulators per token: 8 of the 16 ymm registers

    template <int NR, int NT, bool kCapture>
    static void dot(const Row* rows, int G, const float* const* x, float* res, bool stream,
                    int pf) {
        // One accumulator per 8-float segment of the block: four independent FMA chains per
        // (row, token), one FMA per block each, so FMA latency does not bound the loop.
        __m256 acc[NR][NT][4];
        for (int r = 0; r < NR; ++r) {
            for (int t = 0; t < NT; ++t) {
                for (int q = 0; q < 4; ++q) acc[r][t][q] = _mm256_setzero_ps();
            }
        }
        const __m256 lut = _mm256_loadu_ps(kE2M1Table.v);  // magnitudes of codes 0..7
        const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
        for (int g = 0; g < G; ++g) {
            for (int r = 0; r < NR; ++r) {
                // One prefetch per 64-byte line of codes, pf bytes ahead (past the row's end
                // into the next rows: rows are contiguous, a task walks them in order).
                if (pf > 0 && (g & 3) == 0) {
                    _mm_prefetch(reinterpret_cast<const char*>(rows[r].codes + 16 * g + pf),
                                 _MM_HINT_T0);
                }
                const __m128i b =
                    _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[r].codes + 16 * g));
                if (kCapture && rows[r].cap != nullptr) {
                    store_codes(rows[r].cap + 16 * g, b, stream);
                }
                const __m256i c0 = _mm256_cvtepu8_epi32(b);                         // bytes 0-7
                const __m256i c1 = _mm256_cvtepu8_epi32(_mm_unpackhi_epi64(b, b));  // bytes 8-15
                const __m256 ls =
                    _mm256_mul_ps(lut, _mm256_set1_ps(kE8M0Table.v[rows[r].scales[g]]));
                // Low nibble: magnitude from bits 0-2, sign = bit 3 (moved to bit 31 by << 28).
                const __m256 w0 = _mm256_xor_ps(
                    _mm256_permutevar8x32_ps(ls, c0),
                    _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(c0, 28), sign)));
                const __m256 w1 = _mm256_xor_ps(
                    _mm256_permutevar8x32_ps(ls, c1),
                    _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(c1, 28), sign)));
                // High nibble: bits 4-6, sign = bit 7 (<< 24).
                const __m256 w2 = _mm256_xor_ps(
                    _mm256_permutevar8x32_ps(ls, _mm256_srli_epi32(c0, 4)),
                    _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(c0, 24), sign)));
                const __m256 w3 = _mm256_xor_ps(
                    _mm256_permutevar8x32_ps(ls, _mm256_srli_epi32(c1, 4)),
                    _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(c1, 24), sign)));
                for (int t = 0; t < NT; ++t) {
                    const float* xt = x[t] + 32 * g;
                    acc[r][t][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(xt), acc[r][t][0]);
                    acc[r][t][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(xt + 8), acc[r][t][1]);
                    acc[r][t][2] = _mm256_fmadd_ps(w2, _mm256_loadu_ps(xt + 16), acc[r][t][2]);
                    acc[r][t][3] = _mm256_fmadd_ps(w3, _mm256_loadu_ps(xt + 24), acc[r][t][3]);
                }
            }
        }
        for (int r = 0; r < NR; ++r) {
            for (int t = 0; t < NT; ++t) {
                // a[0], a[1] are the AVX-512 variant's even lanes 0-7 and 8-15, a[2], a[3] its
                // odd ones: (e + o), then its lanes 0-7 + 8-15, then hsum512's 4 + 4, 2 + 2, 1 + 1.
                const __m256* a = acc[r][t];
                res[r * NT + t] =
                    hsum256(_mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3])));
            }
        }
    }

    static void fence() { _mm_sfence(); }
};

#include "cpu/kernels/expert_tasks.inl"

constexpr IsaOps kOps = make_ops("avx2");

}  // namespace

const IsaOps* ops_avx2() { return &kOps; }

}  // namespace neural::cpu::kernel_detail
