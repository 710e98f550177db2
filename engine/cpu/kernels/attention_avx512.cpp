// The AVX-512 variant of attention_kernel.h, compiled with the AVX-512 flags and
// -ffp-contract=off (every fused multiply-add below is written out).
#include <immintrin.h>

#include <cstdint>
#include <vector>

#include "cpu/kernels/attention_kernel.h"
#include "platform/thread_scratch.h"

namespace neural::cpu::detail {
namespace {

#include "cpu/kernels/simd_avx512.inl"

// e^x, Cephes expf: x = n ln 2 + r with |r| <= ln 2 / 2 (ln 2 in two parts), e^r = 1 + r +
// r^2 P(r), times 2^n (vscalefps). Below -104 the result is 0, above 88.72 it is clamped; a NaN
// stays NaN (vmaxps / vminps return their second operand when one is a NaN).
inline __m512 exp16(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
    x = _mm512_min_ps(_mm512_set1_ps(88.72f), x);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

// The 16 lane sums of v[0..15] at once, each in hsum512's tree (8 + 8, 4 + 4, 2 + 2, 1 + 1), so
// lane i is bit for bit hsum512(v[i]): the vectors are paired and halved level by level
// (128-bit lanes, then pairs within them), and the keys' final order is permuted back.
inline __m512 hsum16(const float (*v)[16]) {
    __m512 b[8];  // 256-bit halves: s8 of v[2m], s8 of v[2m + 1]
    for (int m = 0; m < 8; ++m) {
        const __m512 x = _mm512_load_ps(v[2 * m]), y = _mm512_load_ps(v[2 * m + 1]);
        b[m] = _mm512_add_ps(_mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(x, y, _MM_SHUFFLE(3, 2, 3, 2)));
    }
    __m512 c[4];  // 128-bit lane L: s4 of v[4k + L]
    for (int q = 0; q < 4; ++q) {
        c[q] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * q], b[2 * q + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(b[2 * q], b[2 * q + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    }
    __m512 d[2];  // lane L: s2 of v[L] (or v[8 + L]), then s2 of v[4 + L] (or v[12 + L])
    for (int r = 0; r < 2; ++r) {
        d[r] = _mm512_add_ps(_mm512_shuffle_ps(c[2 * r], c[2 * r + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(c[2 * r], c[2 * r + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    // Position 4L + i holds the sum of v[L + 4i]; the permutation is its own inverse.
    const __m512 e = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i back = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    return _mm512_permutexvar_ps(back, e);
}

// H heads (1..4) of head_dim 16 * C against every key: scores, softmax with sinks, values.
// `s` holds H rows of np >= n floats (np a multiple of 16).
template <int C, int H>
void heads_block(const float* q, const float* k, const float* v, std::int64_t stride,
                 std::int64_t n, const float* sinks, float scale, float* out, float* s,
                 std::int64_t np) {
    constexpr int d = 16 * C;
    __m512 qv[H][C];
    for (int h = 0; h < H; ++h)
        for (int c = 0; c < C; ++c) qv[h][c] = _mm512_loadu_ps(q + h * d + 16 * c);
    // Scores 16 keys at a time: each key's 16 lane products per head go to `lanes`, then the
    // 16 keys of a head are summed together in hsum512's tree (hsum16) and scaled as a vector.
    alignas(64) float lanes[H][16][16];
    float m[H];
    for (int h = 0; h < H; ++h) m[h] = sinks[h];
    for (std::int64_t j0 = 0; j0 < n; j0 += 16) {
        const int nk = n - j0 < 16 ? static_cast<int>(n - j0) : 16;
        for (int i = 0; i < nk; ++i) {
            const float* kj = k + (j0 + i) * stride;
            __m512 kv[C];
            for (int c = 0; c < C; ++c) kv[c] = _mm512_loadu_ps(kj + 16 * c);
            for (int h = 0; h < H; ++h) {
                __m512 acc = _mm512_mul_ps(qv[h][0], kv[0]);
                for (int c = 1; c < C; ++c) acc = _mm512_fmadd_ps(qv[h][c], kv[c], acc);
                _mm512_store_ps(lanes[h][i], acc);
            }
        }
        for (int h = 0; h < H; ++h) {
            for (int i = nk; i < 16; ++i) _mm512_store_ps(lanes[h][i], _mm512_setzero_ps());
            const __m512 sv = _mm512_mul_ps(hsum16(lanes[h]), _mm512_set1_ps(scale));
            alignas(64) float sj[16];
            _mm512_store_ps(sj, sv);
            for (int i = 0; i < nk; ++i) {
                s[h * np + j0 + i] = sj[i];
                m[h] = m[h] < sj[i] ? sj[i] : m[h];  // std::max(m, sj): a NaN is not the maximum
            }
        }
    }
    float denom[H];
    for (int h = 0; h < H; ++h) {
        float* sh = s + h * np;
        const __m512 mv = _mm512_set1_ps(m[h]);
        __m512 sum = _mm512_setzero_ps();
        for (std::int64_t j = 0; j < n; j += 16) {
            const __mmask16 live =
                n - j >= 16 ? static_cast<__mmask16>(0xFFFF)
                            : static_cast<__mmask16>((1u << static_cast<unsigned>(n - j)) - 1u);
            const __m512 e = _mm512_maskz_mov_ps(
                live, exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(live, sh + j), mv)));
            _mm512_storeu_ps(sh + j, e);
            sum = _mm512_add_ps(sum, e);
        }
        // The sink's term by the same polynomial (lane 0), not the C library's exp: the bits
        // must not depend on the OS's runtime.
        denom[h] = _mm512_cvtss_f32(exp16(_mm512_set1_ps(sinks[h] - m[h]))) + hsum512(sum);
        // The probabilities e_j / denom, 16 at a time (the same correctly rounded division).
        const __m512 dv = _mm512_set1_ps(denom[h]);
        for (std::int64_t j = 0; j < n; j += 16) {
            const __mmask16 live =
                n - j >= 16 ? static_cast<__mmask16>(0xFFFF)
                            : static_cast<__mmask16>((1u << static_cast<unsigned>(n - j)) - 1u);
            _mm512_mask_storeu_ps(sh + j, live,
                                  _mm512_div_ps(_mm512_maskz_loadu_ps(live, sh + j), dv));
        }
    }
    __m512 acc[H][C];
    for (int h = 0; h < H; ++h)
        for (int c = 0; c < C; ++c) acc[h][c] = _mm512_setzero_ps();
    for (std::int64_t j = 0; j < n; ++j) {
        const float* vj = v + j * stride;
        __m512 vv[C];
        for (int c = 0; c < C; ++c) vv[c] = _mm512_loadu_ps(vj + 16 * c);
        for (int h = 0; h < H; ++h) {
            const __m512 p = _mm512_set1_ps(s[h * np + j]);
            for (int c = 0; c < C; ++c) acc[h][c] = _mm512_fmadd_ps(p, vv[c], acc[h][c]);
        }
    }
    for (int h = 0; h < H; ++h)
        for (int c = 0; c < C; ++c) _mm512_storeu_ps(out + h * d + 16 * c, acc[h][c]);
}

// heads_block for the last h (1..H) heads of a group: H = 4 while 4 or more are left.
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
    auto& scores = thread_scratch<std::vector<float>, struct Avx512Scores>();
    const std::int64_t np = (n + 15) / 16 * 16;
    if (scores.size() < static_cast<std::size_t>(4 * np))
        scores.resize(static_cast<std::size_t>(4 * np));
    constexpr int d = 16 * C;
    for (int h0 = 0; h0 < heads; h0 += 4) {
        heads_n<C, 4>(heads - h0 < 4 ? heads - h0 : 4, q + h0 * d, k, v, stride, n, sinks + h0,
                      scale, out + h0 * d, scores.data(), np);
    }
}

}  // namespace

bool attend_group_avx512(const float* q, int heads, const float* k, const float* v,
                         std::int64_t stride, std::int64_t n, int d, const float* sinks,
                         float scale, float* out) {
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
