// The bf16 expert GEMM on AVX-512F (expert_bf16.h), for a token alone (decode) and CPUs without
// AMX: the 16 rows of a group across the lanes of a zmm (the pairs layout, expert_bf16_impl.h);
// per token and 32-column block two lane sums (even and odd columns, one vfmadd231ps per column
// with the token's bf16 broadcast), then the output adds their sum: the tiles' arithmetic, with
// MXCSR's FTZ and DAZ set while it runs (and the caller's MXCSR restored) so that subnormals
// behave as on the tiles. Up to 4 tokens share each weight load.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu/kernels/expert_bf16_impl.h"

namespace neural::cpu::bf16_detail {
namespace {

#include "cpu/kernels/expert_bf16_decode.inl"

template <int M>
void tokens(const Gemm& g, int i0, std::int64_t col0, int G) {
    const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    const std::uint16_t* x[M];
    for (int q = 0; q < M; ++q) x[q] = g.x + (i0 + q) * g.ldx;
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
                std::uint32_t pair;
                std::memcpy(&pair, x[q] + 32 * b + 2 * j, 4);
                const __m512i xp = _mm512_set1_epi32(static_cast<int>(pair));
                l0[q] = _mm512_fmadd_ps(we, _mm512_castsi512_ps(_mm512_slli_epi32(xp, 16)), l0[q]);
                l1[q] = _mm512_fmadd_ps(wo, _mm512_castsi512_ps(_mm512_and_si512(xp, high)), l1[q]);
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

void gemm(const Gemm& g) {
    const int G = g.rec.blocks[g.p];
    const unsigned csr = _mm_getcsr();
    for (std::int64_t r0 = g.row0; r0 < g.row0 + g.rows; r0 += kRows) {
        _mm_setcsr(kDecodeCsr);
        decode_pairs_avx512(g.rec, g.p, r0, g.packed, g.weights);
        _mm_setcsr(kGemmCsr);
        const std::int64_t col0 = r0 - g.row0;
        int i0 = 0;
        for (; i0 + 4 <= g.n; i0 += 4) tokens<4>(g, i0, col0, G);
        switch (g.n - i0) {
            case 3:
                tokens<3>(g, i0, col0, G);
                break;
            case 2:
                tokens<2>(g, i0, col0, G);
                break;
            case 1:
                tokens<1>(g, i0, col0, G);
                break;
            default:
                break;
        }
    }
    _mm_setcsr(csr);
}

}  // namespace

GemmFn gemm_avx512() { return &gemm; }

}  // namespace neural::cpu::bf16_detail
