// AVX-512F dense kernel (compiled with -mavx512f -mavx512bw -mavx512vl; called only after
// cpu_features() reported them): 32 bf16 weights per 64-byte load widen to the 16 odd and the
// 16 even elements as fp32 (mask / shift by 16), and two FMAs per operand part add them to the
// 16 lane sums in vdpbf16ps's order (odd, then even).
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "cpu/kernels/dense_impl.h"

namespace neural::cpu::dense_detail {
namespace {

// One 32-column chunk: the rows' widened weights against every token's operand.
template <int NR, int NT>
inline void chunk(const __m512i* wv, const std::uint16_t* const* x, std::int64_t lo, std::int64_t c,
                  __m512 (&acc)[NR][NT]) {
    const __m512i hi_mask = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
    __m512 we[NR], wo[NR];
    for (int r = 0; r < NR; ++r) {
        we[r] = _mm512_castsi512_ps(_mm512_slli_epi32(wv[r], 16));
        wo[r] = _mm512_castsi512_ps(_mm512_and_si512(wv[r], hi_mask));
    }
    for (int t = 0; t < NT; ++t) {
        for (const std::int64_t part : {std::int64_t{0}, lo}) {  // the high, then the low part
            const __m512i xv = _mm512_loadu_si512(x[t] + part + c);
            const __m512 xe = _mm512_castsi512_ps(_mm512_slli_epi32(xv, 16));
            const __m512 xo = _mm512_castsi512_ps(_mm512_and_si512(xv, hi_mask));
            for (int r = 0; r < NR; ++r) {
                acc[r][t] = _mm512_fmadd_ps(wo[r], xo, acc[r][t]);
                acc[r][t] = _mm512_fmadd_ps(we[r], xe, acc[r][t]);
            }
        }
    }
}

#include "cpu/kernels/dense_avx512_loop.inl"

#include "cpu/kernels/dense_tasks.inl"

}  // namespace

TaskFn task_avx512() { return &dense_task; }

}  // namespace neural::cpu::dense_detail
