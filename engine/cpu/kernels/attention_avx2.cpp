// The AVX2 + FMA variant of attention_kernel.h (compiled with -mavx2 -mfma and -ffp-contract=off;
// only called after cpu_features() reported AVX2 and FMA). It gives the AVX-512 variant's bits:
// each of that variant's 16-lane vectors is held as two 8-lane halves (lanes 0-7, 8-15) and every
// lane sees the same operations in the same order — the products and fused multiply-adds of a
// score, hsum512's tree (8 + 8, 4 + 4, 2 + 2, 1 + 1), the same exp polynomial with vscalefps
// written as two exact powers of two, the same sums, divisions and value FMAs.
#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "cpu/kernels/attention_kernel.h"
#include "platform/thread_scratch.h"

namespace neural::cpu::detail {
namespace {

// attention_avx512.cpp's exp16, lane by lane: clamp to [-104, 88.72] (a NaN stays NaN: vmaxps /
// vminps return the second operand when one is a NaN), n = round(x log2 e), r = x - n ln 2 (two
// parts, fused), e^r = 1 + r + r^2 P(r), times 2^n. vscalefps rounds p 2^n once; here n (in
// [-150, 128]) is split into n1 = floor(n / 2) and n - n1, both in [-75, 64], so p 2^n1 is exact
// and normal and the second product is that one rounding.
inline __m256 exp8(__m256 x) {
    x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x);
    x = _mm256_min_ps(_mm256_set1_ps(88.72f), x);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i ni = _mm256_cvtps_epi32(n);  // exact: n is an integer (a NaN lane: p is NaN)
    const __m256i n1 = _mm256_srai_epi32(ni, 1);
    const __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
}

// The 8 lane sums of v[0..7] at once, each in the tail of hsum512's tree (4 + 4, 2 + 2, 1 + 1
// of the 8 lanes), so lane i is the bits of that tree on v[i]: the vectors are paired and halved
// level by level, and the final order permuted back.
inline __m256 hsum8(const __m256* v) {
    __m256 b[4];  // 128-bit halves: s4 of v[2m], s4 of v[2m + 1]
    for (int m = 0; m < 4; ++m) {
        b[m] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * m], v[2 * m + 1], 0x20),
                             _mm256_permute2f128_ps(v[2 * m], v[2 * m + 1], 0x31));
    }
    __m256 c[2];  // 128-bit half L: s2 of v[4q + L] (2 lanes), s2 of v[4q + 2 + L]
    for (int q = 0; q < 2; ++q) {
        c[q] = _mm256_add_ps(_mm256_shuffle_ps(b[2 * q], b[2 * q + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(b[2 * q], b[2 * q + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    // Half L, position i: the sum of v[L + 2i].
    const __m256 e = _mm256_add_ps(_mm256_shuffle_ps(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm256_permutevar8x32_ps(e, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// hsum512 of the 16-lane vector (lo, hi).
inline float hsum16(__m256 lo, __m256 hi) {
    const __m256 s8 = _mm256_add_ps(lo, hi);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
    return _mm_cvtss_f32(s1);
}

// Lanes i < live all ones, the others zero.
inline __m256 live_mask(std::int64_t live) {
    const int l = live > 8 ? 8 : static_cast<int>(live);
    return _mm256_castsi256_ps(
        _mm256_cmpgt_epi32(_mm256_set1_epi32(l), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

// H heads of head_dim 16 * C against every key: scores, softmax with sinks, values (the
// AVX-512 variant's heads_block). `s` holds H rows of np >= n floats (np a multiple of 16).
template <int C, int H>
void heads_block(const float* q, const float* k, const float* v, std::int64_t stride,
                 std::int64_t n, const float* sinks, float scale, float* out, float* s,
                 std::int64_t np) {
    constexpr int d = 16 * C;
    // Scores 8 keys at a time: a key's 16 lane products (lo, hi) per head, their 8 sums lo + hi
    // (hsum512's first level), then the 8 keys' remaining trees at once (hsum8).
    float m[H];
    for (int h = 0; h < H; ++h) m[h] = sinks[h];
    const __m256 sc = _mm256_set1_ps(scale);
    for (std::int64_t j0 = 0; j0 < n; j0 += 8) {
        const int nk = n - j0 < 8 ? static_cast<int>(n - j0) : 8;
        __m256 s8[H][8];
        for (int i = 0; i < 8; ++i) {
            if (i >= nk) {
                for (int h = 0; h < H; ++h) s8[h][i] = _mm256_setzero_ps();
                continue;
            }
            const float* kj = k + (j0 + i) * stride;
            for (int h = 0; h < H; ++h) {
                const float* qh = q + h * d;
                __m256 lo = _mm256_mul_ps(_mm256_loadu_ps(qh), _mm256_loadu_ps(kj));
                __m256 hi = _mm256_mul_ps(_mm256_loadu_ps(qh + 8), _mm256_loadu_ps(kj + 8));
                for (int c = 1; c < C; ++c) {
                    lo = _mm256_fmadd_ps(_mm256_loadu_ps(qh + 16 * c), _mm256_loadu_ps(kj + 16 * c),
                                         lo);
                    hi = _mm256_fmadd_ps(_mm256_loadu_ps(qh + 16 * c + 8),
                                         _mm256_loadu_ps(kj + 16 * c + 8), hi);
                }
                s8[h][i] = _mm256_add_ps(lo, hi);
            }
        }
        for (int h = 0; h < H; ++h) {
            alignas(32) float sj[8];
            _mm256_store_ps(sj, _mm256_mul_ps(hsum8(s8[h]), sc));
            for (int i = 0; i < nk; ++i) {
                s[h * np + j0 + i] = sj[i];
                m[h] = m[h] < sj[i] ? sj[i] : m[h];  // std::max(m, sj): a NaN is not the maximum
            }
        }
    }
    for (int h = 0; h < H; ++h) {
        float* sh = s + h * np;
        const __m256 mv = _mm256_set1_ps(m[h]);
        __m256 sum_lo = _mm256_setzero_ps(), sum_hi = _mm256_setzero_ps();
        for (std::int64_t j = 0; j < n; j += 16) {
            // Lanes past n are zero, as the AVX-512 variant's masked ones (the buffer has room).
            const __m256 e_lo =
                _mm256_and_ps(live_mask(n - j), exp8(_mm256_sub_ps(_mm256_loadu_ps(sh + j), mv)));
            const __m256 e_hi = _mm256_and_ps(live_mask(n - j - 8),
                                              exp8(_mm256_sub_ps(_mm256_loadu_ps(sh + j + 8), mv)));
            _mm256_storeu_ps(sh + j, e_lo);
            _mm256_storeu_ps(sh + j + 8, e_hi);
            sum_lo = _mm256_add_ps(sum_lo, e_lo);
            sum_hi = _mm256_add_ps(sum_hi, e_hi);
        }
        const float e_sink = _mm256_cvtss_f32(exp8(_mm256_set1_ps(sinks[h] - m[h])));
        const __m256 dv = _mm256_set1_ps(e_sink + hsum16(sum_lo, sum_hi));
        // The probabilities e_j / denom (the same correctly rounded division).
        for (std::int64_t j = 0; j < n; j += 8)
            _mm256_storeu_ps(sh + j, _mm256_div_ps(_mm256_loadu_ps(sh + j), dv));
    }
    __m256 acc[H][2 * C];
    for (int h = 0; h < H; ++h)
        for (int c = 0; c < 2 * C; ++c) acc[h][c] = _mm256_setzero_ps();
    for (std::int64_t j = 0; j < n; ++j) {
        const float* vj = v + j * stride;
        for (int h = 0; h < H; ++h) {
            const __m256 p = _mm256_set1_ps(s[h * np + j]);
            for (int c = 0; c < 2 * C; ++c)
                acc[h][c] = _mm256_fmadd_ps(p, _mm256_loadu_ps(vj + 8 * c), acc[h][c]);
        }
    }
    for (int h = 0; h < H; ++h)
        for (int c = 0; c < 2 * C; ++c) _mm256_storeu_ps(out + h * d + 8 * c, acc[h][c]);
}

// heads_block for the last h (1..H) heads of a group.
template <int C, int H>
void heads_n(int h, const float* q, const float* k, const float* v, std::int64_t stride,
             std::int64_t n, const float* sinks, float scale, float* out, float* s,
             std::int64_t np) {
    if constexpr (H >= 1) {
        if (h == H) {
            heads_block<C, H>(q, k, v, stride, n, sinks, scale, out, s, np);
            return;
        }
        heads_n<C, H - 1>(h, q, k, v, stride, n, sinks, scale, out, s, np);
    }
}

template <int C>
void group_of(const float* q, int heads, const float* k, const float* v, std::int64_t stride,
              std::int64_t n, const float* sinks, float scale, float* out) {
    // 4 heads per pass, as the AVX-512 variant: each key and value row is read once for them.
    // (Their accumulators spill from the 16 ymm registers at d >= 64, but fewer passes over the
    // keys and values still win: at d = 64 and 4,096 keys 1, 2 and 4 heads per pass took
    // ~1.1, ~0.8 and ~0.6 ms on the dev VM.)
    constexpr int kHeads = 4;
    auto& scores = thread_scratch<std::vector<float>, struct Avx2Scores>();
    const std::int64_t np = (n + 15) / 16 * 16;
    if (scores.size() < static_cast<std::size_t>(kHeads * np))
        scores.resize(static_cast<std::size_t>(kHeads * np));
    constexpr int d = 16 * C;
    for (int h0 = 0; h0 < heads; h0 += kHeads) {
        heads_n<C, kHeads>(heads - h0 < kHeads ? heads - h0 : kHeads, q + h0 * d, k, v, stride, n,
                           sinks + h0, scale, out + h0 * d, scores.data(), np);
    }
}

}  // namespace

bool attend_group_avx2(const float* q, int heads, const float* k, const float* v,
                       std::int64_t stride, std::int64_t n, int d, const float* sinks, float scale,
                       float* out) {
    switch (d) {
        case 16:
            group_of<1>(q, heads, k, v, stride, n, sinks, scale, out);
            return true;
        case 32:
            group_of<2>(q, heads, k, v, stride, n, sinks, scale, out);
            return true;
        case 64:
            group_of<4>(q, heads, k, v, stride, n, sinks, scale, out);
            return true;
        case 128:
            group_of<8>(q, heads, k, v, stride, n, sinks, scale, out);
            return true;
        default:
            return false;
    }
}

}  // namespace neural::cpu::detail
