// AVX-512 expert kernel (compiled with -mavx512f -mavx512bw -mavx512vl / /arch:AVX512; only
// called after cpu_features() reported AVX-512 F/BW/VL with OS support).
//
// Decode of one 32-value block: the 16 code bytes widen to 16 x i32; vpermps (which reads only
// index bits 0-3) looks the low nibbles up directly in the 16-entry E2M1 table already multiplied
// by the block's scale, and the high nibbles after a shift by 4: the even elements, then the odd
// ones (operands are block-deinterleaved). Per (row, token) two accumulators:
// e += w_even x_even, o += w_odd x_odd per block, then e + o summed in a fixed tree.
#include <immintrin.h>
#include <math.h>

#include <cstdint>
#include <cstring>

#include "cpu/kernels/expert_kernel_impl.h"

namespace neural::cpu::kernel_detail {
namespace {

#include "cpu/kernels/simd_avx512.inl"

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
    // 2 accumulators per token: 16 of the 32 zmm registers at 8 tokens.
    static constexpr int kGroup = 8;

    template <int NR, int NT, bool kCapture>
    static void dot(const Row* rows, int G, const float* const* x, float* res, bool stream,
                    int pf) {
        // Even and odd elements accumulate separately: two dependency chains of one FMA per
        // block per (row, token) instead of one chain of two, so the 4-cycle FMA latency does
        // not bound the loop (it did: ~4.5 cycles per block and row with one accumulator).
        __m512 acc_e[NR][NT], acc_o[NR][NT];
        for (int r = 0; r < NR; ++r) {
            for (int t = 0; t < NT; ++t) acc_e[r][t] = acc_o[r][t] = _mm512_setzero_ps();
        }
        const __m512 lut = _mm512_loadu_ps(kE2M1Table.v);
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
                const __m512i c = _mm512_cvtepu8_epi32(b);
                const __m512 ls =
                    _mm512_mul_ps(lut, _mm512_set1_ps(kE8M0Table.v[rows[r].scales[g]]));
                const __m512 we = _mm512_permutexvar_ps(c, ls);
                const __m512 wo = _mm512_permutexvar_ps(_mm512_srli_epi32(c, 4), ls);
                for (int t = 0; t < NT; ++t) {
                    const float* xt = x[t] + 32 * g;
                    acc_e[r][t] = _mm512_fmadd_ps(we, _mm512_loadu_ps(xt), acc_e[r][t]);
                    acc_o[r][t] = _mm512_fmadd_ps(wo, _mm512_loadu_ps(xt + 16), acc_o[r][t]);
                }
            }
        }
        for (int r = 0; r < NR; ++r) {
            for (int t = 0; t < NT; ++t) {
                res[r * NT + t] = hsum512(_mm512_add_ps(acc_e[r][t], acc_o[r][t]));
            }
        }
    }

    static void fence() { _mm_sfence(); }
};

#include "cpu/kernels/expert_tasks.inl"

constexpr IsaOps kOps = make_ops("avx512");

}  // namespace

const IsaOps* ops_avx512() { return &kOps; }

}  // namespace neural::cpu::kernel_detail
