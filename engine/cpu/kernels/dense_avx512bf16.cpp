// AVX512_BF16 dense kernel (compiled with -mavx512bf16 on top of the AVX-512F/BW/VL flags;
// called only after cpu_features() reported AVX512_BF16): one vdpbf16ps per 32 weights and
// operand part (high, then low) adds the odd, then the even products to the 16 lane sums, the
// arithmetic every variant reproduces (dense_kernel.h).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu/kernels/dense_impl.h"

namespace neural::cpu::dense_detail {
namespace {

// One 32-column chunk: the rows' weights against every token's operand.
template <int NR, int NT>
inline void chunk(const __m512i* wv, const std::uint16_t* const* x, std::int64_t lo, std::int64_t c,
                  __m512 (&acc)[NR][NT]) {
    for (int t = 0; t < NT; ++t) {
        const __m512bh xh = (__m512bh)_mm512_loadu_si512(x[t] + c);
        const __m512bh xl = (__m512bh)_mm512_loadu_si512(x[t] + lo + c);
        for (int r = 0; r < NR; ++r) {
            acc[r][t] = _mm512_dpbf16_ps(acc[r][t], (__m512bh)wv[r], xh);
            acc[r][t] = _mm512_dpbf16_ps(acc[r][t], (__m512bh)wv[r], xl);
        }
    }
}

#include "cpu/kernels/dense_avx512_loop.inl"

#include "cpu/kernels/dense_tasks.inl"

}  // namespace

TaskFn task_avx512bf16() { return &dense_task; }

}  // namespace neural::cpu::dense_detail
