// The dense kernels' tile order on AVX-512F (compiled with -mavx512f -mavx512bw -mavx512vl;
// called only after cpu_features() reported them): the AMX variant's bits on CPUs without AMX
// (dense_kernel.h "tile order", dense_tile.inl). A group's rows are repacked into the AMX
// variant's B-tile layout by 16 x 16 dword transposes in registers (dense_repack_avx512.inl),
// so that a zmm holds one column pair of 16 rows; per token, chunk and line the even and odd
// weights (shift / mask of the pairs) take four fmas with the token's operand values as
// broadcasts from its planes (high even, high odd, low even, low odd): four lane sums per
// (token, 16 rows), the high parts' pair and the low parts' pair, each from +0 per chunk and
// added to the sum in the tiles' order.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu/kernels/dense_impl.h"

namespace neural::cpu::dense_detail {
namespace {

#include "cpu/kernels/dense_repack_avx512.inl"

struct Isa {
    static constexpr int kTokens = 4;  // 4 tokens x 5 accumulators + 2 weight registers

    static void repack(const std::uint8_t* w, std::int64_t cols, std::int64_t r0, int nr,
                       std::int64_t chunks, std::uint32_t* bv) {
        repack_avx512(w, cols, r0, nr, chunks, (nr + 15) / 16, bv);  // the halves tokens() reads
    }

    template <int M>
    static void tokens(const std::uint32_t* h, const float* const* p, std::int64_t chunks,
                       float* res) {
        const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
        __m512 acc[M];
        for (int q = 0; q < M; ++q) acc[q] = _mm512_setzero_ps();
        for (std::int64_t c = 0; c < chunks; ++c) {
            const std::uint32_t* lines = h + c * 512;
            __m512 he[M], ho[M], le[M], lo[M];
            const float* x[M];
            for (int q = 0; q < M; ++q) {
                he[q] = ho[q] = le[q] = lo[q] = _mm512_setzero_ps();
                x[q] = p[q] + 64 * c;
            }
#pragma GCC unroll 16
            for (int k = 0; k < 16; ++k) {
                const __m512i wv = _mm512_loadu_si512(lines + 16 * k);
                const __m512 we = _mm512_castsi512_ps(_mm512_slli_epi32(wv, 16));
                const __m512 wo = _mm512_castsi512_ps(_mm512_and_si512(wv, high));
                for (int q = 0; q < M; ++q) {
                    he[q] = _mm512_fmadd_ps(we, _mm512_set1_ps(x[q][k]), he[q]);
                    ho[q] = _mm512_fmadd_ps(wo, _mm512_set1_ps(x[q][16 + k]), ho[q]);
                    le[q] = _mm512_fmadd_ps(we, _mm512_set1_ps(x[q][32 + k]), le[q]);
                    lo[q] = _mm512_fmadd_ps(wo, _mm512_set1_ps(x[q][48 + k]), lo[q]);
                }
            }
            for (int q = 0; q < M; ++q) {
                acc[q] = _mm512_add_ps(_mm512_add_ps(acc[q], _mm512_add_ps(he[q], ho[q])),
                                       _mm512_add_ps(le[q], lo[q]));
            }
        }
        for (int q = 0; q < M; ++q) _mm512_storeu_ps(res + q * 32, acc[q]);
    }
};

#include "cpu/kernels/dense_tile.inl"

}  // namespace

TaskFn task_tile_avx512() { return &tile_task; }

}  // namespace neural::cpu::dense_detail
