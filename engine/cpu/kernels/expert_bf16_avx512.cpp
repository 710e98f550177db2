// The bf16 expert GEMM on AVX-512F (expert_bf16.h), for a token alone (decode) and CPUs without
// AMX: the 16 rows of a group across the lanes of a zmm (the pairs layout, expert_bf16_impl.h);
// per token and 32-column block two lane sums (even and odd columns, one vfmadd231ps per column
// with the token's bf16 broadcast), then the output adds their sum: the tiles' arithmetic, with
// MXCSR's FTZ and DAZ set while it runs (and the caller's MXCSR restored) so that subnormals
// behave as on the tiles. The prepared activations are fp32 planes of the even and odd columns
// (expert_bf16_impl.h); up to 8 tokens share each weight load, their values taken as embedded
// broadcasts; one or two tokens (decode) take a fused path that decodes, transposes and
// multiplies each block in registers.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu/kernels/expert_bf16_impl.h"

namespace neural::cpu::bf16_detail {
namespace {

#include "cpu/kernels/expert_bf16_decode.inl"

// The activations as fp32 planes, per token the even columns then the odd ones (cols / 2 each):
// per 16 column pairs, the pairs' dwords shifted left 16 (even) and masked to their high half
// (odd): each bf16 value's fp32 bits.
void prepare(const Prepare& p) {
    const int cols = 32 * p.G;
    const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    for (int i = 0; i < p.n; ++i) {
        const std::uint16_t* x = p.x + i * p.ldx;
        auto* even = reinterpret_cast<float*>(p.out) + static_cast<std::int64_t>(i) * cols;
        float* odd = even + cols / 2;
        for (int k = 0; k < cols / 2; k += 16) {
            const __m512i v = _mm512_loadu_si512(x + 2 * k);
            _mm512_storeu_si512(even + k, _mm512_slli_epi32(v, 16));
            _mm512_storeu_si512(odd + k, _mm512_and_si512(v, high));
        }
    }
}

template <int M>
void tokens(const Gemm& g, const float* planes, int i0, std::int64_t col0, int G) {
    const int cols = 32 * G;
    const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    const float* xe[M];
    const float* xo[M];
    for (int q = 0; q < M; ++q) {
        xe[q] = planes + static_cast<std::int64_t>(i0 + q) * cols;
        xo[q] = xe[q] + cols / 2;
    }
    __m512 acc[M];
    for (int q = 0; q < M; ++q) acc[q] = _mm512_setzero_ps();
    for (int b = 0; b < G; ++b) {
        const std::uint8_t* t = g.weights + static_cast<std::int64_t>(b) * kTileBytes;
        __m512 l0[M], l1[M];
        for (int q = 0; q < M; ++q) l0[q] = l1[q] = _mm512_setzero_ps();
        for (int j = 0; j < 16; ++j) {
            const __m512i w = _mm512_load_si512(reinterpret_cast<const void*>(t + 64 * j));
            const __m512 we = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
            const __m512 wo = _mm512_castsi512_ps(_mm512_and_si512(w, high));
            for (int q = 0; q < M; ++q) {
                l0[q] = _mm512_fmadd_ps(we, _mm512_set1_ps(xe[q][16 * b + j]), l0[q]);
                l1[q] = _mm512_fmadd_ps(wo, _mm512_set1_ps(xo[q][16 * b + j]), l1[q]);
            }
        }
        for (int q = 0; q < M; ++q) acc[q] = _mm512_add_ps(acc[q], _mm512_add_ps(l0[q], l1[q]));
    }
    const __m512 nan = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(kCanonicalNan)));
    for (int q = 0; q < M; ++q) {
        const __mmask16 is_nan = _mm512_cmp_ps_mask(acc[q], acc[q], _CMP_UNORD_Q);
        _mm512_storeu_ps(g.out + (i0 + q) * g.ld + col0, _mm512_mask_blend_ps(is_nan, acc[q], nan));
    }
}

// Few tokens (decode): decoding, transposing and the fmas fused per block, in registers, at
// kGemmCsr throughout (decode_block's bits do not depend on FTZ/DAZ).
template <int M>
void fused(const Gemm& g, const float* planes, std::int64_t r0, int G) {
    const int cols = 32 * G;
    const DecodeConsts k;
    const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    const std::uint64_t stride = static_cast<std::uint64_t>(G) * 16;
    const std::uint8_t* codes[kRows];
    const std::uint8_t* scales[kRows];
    alignas(64) std::uint8_t sbuf[kRows][kMaxBlocks + 32];
    for (int n = 0; n < kRows; ++n) {
        codes[n] = g.rec.code_base[g.p] + static_cast<std::uint64_t>(r0 + n) * stride;
        scales[n] = kernel_detail::record_row_scales(g.rec, g.p, r0 + n, sbuf[n]);
    }
    __m512 acc[M];
    for (int q = 0; q < M; ++q) acc[q] = _mm512_setzero_ps();
    for (int b = 0; b < G; ++b) {
        __m512i r[16];
        for (int n = 0; n < kRows; ++n) {
            if ((b & 3) == 0)
                _mm_prefetch(reinterpret_cast<const char*>(codes[n] + 16 * b + 256), _MM_HINT_T0);
            r[n] = decode_block(k, codes[n] + 16 * b, scales[n][b]);
        }
        __m512i w[16];  // line j: the 16 rows' columns 2j, 2j + 1
        transpose16(r, w);
        for (int q = 0; q < M; ++q) {
            const float* xe = planes + static_cast<std::int64_t>(q) * cols + 16 * b;
            const float* xo = xe + cols / 2;
            __m512 l0 = _mm512_setzero_ps(), l1 = _mm512_setzero_ps();
            for (int j = 0; j < 16; ++j) {
                l0 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(w[j], 16)),
                                     _mm512_set1_ps(xe[j]), l0);
                l1 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(w[j], high)),
                                     _mm512_set1_ps(xo[j]), l1);
            }
            acc[q] = _mm512_add_ps(acc[q], _mm512_add_ps(l0, l1));
        }
    }
    const __m512 nan = _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(kCanonicalNan)));
    for (int q = 0; q < M; ++q) {
        const __mmask16 is_nan = _mm512_cmp_ps_mask(acc[q], acc[q], _CMP_UNORD_Q);
        _mm512_storeu_ps(g.out + q * g.ld + (r0 - g.row0),
                         _mm512_mask_blend_ps(is_nan, acc[q], nan));
    }
}

void gemm(const Gemm& g) {
    const int G = g.rec.blocks[g.p];
    const auto* planes = reinterpret_cast<const float*>(g.x);
    if (g.n <= 2) {  // decode: one pass over the weights, nothing stored between
        const unsigned csr = _mm_getcsr();
        _mm_setcsr(kGemmCsr);
        for (std::int64_t r0 = g.row0; r0 < g.row0 + g.rows; r0 += kRows) {
            if (g.n == 1)
                fused<1>(g, planes, r0, G);
            else
                fused<2>(g, planes, r0, G);
        }
        _mm_setcsr(csr);
        return;
    }
    // Scratch: the decoded group in the first quarter of `weights`, its rows-layout copy in the
    // second.
    std::uint8_t* tmp = g.weights + static_cast<std::int64_t>(G) * kTileBytes;
    const unsigned csr = _mm_getcsr();
    for (std::int64_t r0 = g.row0; r0 < g.row0 + g.rows; r0 += kRows) {
        _mm_setcsr(kDecodeCsr);
        decode_pairs_avx512(g.rec, g.p, r0, tmp, g.weights);
        _mm_setcsr(kGemmCsr);
        const std::int64_t col0 = r0 - g.row0;
        int i0 = 0;
        for (; i0 + 8 <= g.n; i0 += 8) tokens<8>(g, planes, i0, col0, G);
        switch (g.n - i0) {
            case 7:
                tokens<7>(g, planes, i0, col0, G);
                break;
            case 6:
                tokens<6>(g, planes, i0, col0, G);
                break;
            case 5:
                tokens<5>(g, planes, i0, col0, G);
                break;
            case 4:
                tokens<4>(g, planes, i0, col0, G);
                break;
            case 3:
                tokens<3>(g, planes, i0, col0, G);
                break;
            case 2:
                tokens<2>(g, planes, i0, col0, G);
                break;
            case 1:
                tokens<1>(g, planes, i0, col0, G);
                break;
            default:
                break;
        }
    }
    _mm_setcsr(csr);
}

}  // namespace

Variant variant_avx512() { return {&gemm, &prepare}; }

}  // namespace neural::cpu::bf16_detail
