// The dense kernels' tile order on AVX-512F (compiled with -mavx512f -mavx512bw -mavx512vl;
// called only after cpu_features() reported them): the AMX variant's bits on CPUs without AMX
// (dense_kernel.h "tile order", dense_tile.inl). A group's rows are repacked into the AMX
// variant's B-tile layout by 16 x 16 dword transposes in registers (dense_repack_avx512.inl),
// so that a zmm holds one column pair of 16 rows; per token, chunk and line the even and odd
// weights (shift / mask of the pairs) of both 16-row halves take four fmas each with the
// token's operand values broadcast from its planes (high even, high odd, low even, low odd):
// four lane sums per (token, 16 rows), the high parts' pair and the low parts' pair, each from
// +0 per chunk and added to the sum in the tiles' order. (One half at a time with the values
// as embedded broadcasts, 4 tokens per pass, ran at 0.7x the rate: one load per fma.)
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu/kernels/dense_impl.h"

namespace neural::cpu::dense_detail {
namespace {

#include "cpu/kernels/dense_repack_avx512.inl"

struct Isa {
    // Both 16-row halves of a group per call: each broadcast operand value (in a register)
    // serves two fmas; 2 tokens x 2 halves x 5 accumulators + 4 weight + 4 operand registers.
    static constexpr int kTokens = 2;
    static constexpr bool kBothHalves = true;

    static void repack(const std::uint8_t* w, std::int64_t cols, std::int64_t r0, int nr,
                       std::int64_t chunks, std::uint32_t* bv) {
        repack_avx512(w, cols, r0, nr, chunks, 2, bv);
    }

    // Both halves (h, h + 256 per chunk) against M tokens: res[q * 32 + i], i < 32.
    template <int M>
    static void tokens(const std::uint32_t* h, const float* const* p, std::int64_t chunks,
                       float* res) {
        const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
        __m512 acc[M][2];
        for (int q = 0; q < M; ++q) acc[q][0] = acc[q][1] = _mm512_setzero_ps();
        for (std::int64_t c = 0; c < chunks; ++c) {
            const std::uint32_t* lines = h + c * 512;
            __m512 he[M][2], ho[M][2], le[M][2], lo[M][2];
            const float* x[M];
            for (int q = 0; q < M; ++q) {
                for (int g = 0; g < 2; ++g)
                    he[q][g] = ho[q][g] = le[q][g] = lo[q][g] = _mm512_setzero_ps();
                x[q] = p[q] + 64 * c;
            }
#pragma GCC unroll 16
            for (int k = 0; k < 16; ++k) {
                __m512 we[2], wo[2];
                for (int g = 0; g < 2; ++g) {
                    const __m512i wv = _mm512_loadu_si512(lines + 256 * g + 16 * k);
                    we[g] = _mm512_castsi512_ps(_mm512_slli_epi32(wv, 16));
                    wo[g] = _mm512_castsi512_ps(_mm512_and_si512(wv, high));
                }
                for (int q = 0; q < M; ++q) {
                    const __m512 xhe = _mm512_set1_ps(x[q][k]);
                    const __m512 xho = _mm512_set1_ps(x[q][16 + k]);
                    const __m512 xle = _mm512_set1_ps(x[q][32 + k]);
                    const __m512 xlo = _mm512_set1_ps(x[q][48 + k]);
                    for (int g = 0; g < 2; ++g) {
                        he[q][g] = _mm512_fmadd_ps(we[g], xhe, he[q][g]);
                        ho[q][g] = _mm512_fmadd_ps(wo[g], xho, ho[q][g]);
                        le[q][g] = _mm512_fmadd_ps(we[g], xle, le[q][g]);
                        lo[q][g] = _mm512_fmadd_ps(wo[g], xlo, lo[q][g]);
                    }
                }
            }
            for (int q = 0; q < M; ++q) {
                for (int g = 0; g < 2; ++g) {
                    acc[q][g] =
                        _mm512_add_ps(_mm512_add_ps(acc[q][g], _mm512_add_ps(he[q][g], ho[q][g])),
                                      _mm512_add_ps(le[q][g], lo[q][g]));
                }
            }
        }
        for (int q = 0; q < M; ++q) {
            _mm512_storeu_ps(res + q * 32, acc[q][0]);
            _mm512_storeu_ps(res + q * 32 + 16, acc[q][1]);
        }
    }
};

#include "cpu/kernels/dense_tile.inl"

}  // namespace

TaskFn task_tile_avx512() { return &tile_task; }

}  // namespace neural::cpu::dense_detail
