// AVX512_VNNI int8 prompt kernel (compiled with -mavx512vnni on top of the AVX-512 flags; only
// called after cpu_features() reported AVX512_VNNI with AVX-512 F/BW/VL and OS support).
//
// A register tile is 16 rows: one zmm of int32 lanes, one row per lane, decoded once per task
// and block (prompt_decode16.inl). Per token and block: 8 vpdpbusd per Q8 pass (prompt_impl.h;
// the token's 4-byte groups broadcast) against the same 8 weight registers, 256 s_0 + s_1
// (shift, add), one int -> float, one multiply (row scale x token step) and one fma, and for a
// third pass one more convert, multiply and fma. The result is permuted back to row order once
// per token.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu/kernels/prompt_impl.h"

namespace neural::cpu::prompt_detail {
namespace {

using kernel_detail::kE8M0Table;
using kernel_detail::kMaxBlocks;
using kernel_detail::RecordRef;

constexpr int kGroup = 8;  // tokens per register tile: 8 fp32 accumulators beside 8 weight zmm

#include "cpu/kernels/prompt_decode16.inl"

template <int NT>
void tile(const std::uint8_t* D, int G, const std::uint8_t* const* xq, const float* const* xd,
          float* const* out) {
    __m512 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
    for (int b = 0; b < G; ++b) {
        const std::uint8_t* db = D + static_cast<std::int64_t>(b) * kBlockBytes;
        __m512i w[8];
        for (int k = 0; k < 8; ++k) w[k] = _mm512_load_si512(db + 64 * k);
        const __m512 dw = _mm512_load_ps(reinterpret_cast<const float*>(db + 512));
        const __m512i start = _mm512_load_si512(db + 576);
        for (int t = 0; t < NT; ++t) {
            const std::uint8_t* xb = xq[t] + kQ8Bytes * b;
            __m512i sum[kPasses];
            for (int j = 0; j < kPasses; ++j) sum[j] = start;
            for (int k = 0; k < 8; ++k) {
                for (int j = 0; j < kPasses; ++j) {
                    std::int32_t g;
                    std::memcpy(&g, xb + 32 * j + 4 * k, 4);
                    sum[j] = _mm512_dpbusd_epi32(sum[j], _mm512_set1_epi32(g), w[k]);
                }
            }
            const __m512i s01 = _mm512_add_epi32(_mm512_slli_epi32(sum[0], 8), sum[1]);
            const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(xd[t][b]));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s01), scale, acc[t]);
            if constexpr (kPasses == 3) {
                acc[t] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[2]),
                                    _mm512_mul_ps(scale, _mm512_set1_ps(1.0f / 256.0f)), acc[t]);
            }
        }
    }
    // lane_row is its own inverse: natural row r sits in lane lane_row(r).
    const __m512i back = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    for (int t = 0; t < NT; ++t) _mm512_storeu_ps(out[t], _mm512_permutexvar_ps(back, acc[t]));
}

template <int N>
void tile_n(int n, const std::uint8_t* D, int G, const std::uint8_t* const* xq,
            const float* const* xd, float* const* out) {
    if constexpr (N >= 1) {
        if (n == N) {
            tile<N>(D, G, xq, xd, out);
            return;
        }
        tile_n<N - 1>(n, D, G, xq, xd, out);
    }
}

struct Isa {
    static void gemm16(const ExpertArgs& e, int p, std::int64_t row0, const Operands& x, int n,
                       std::uint8_t* scratch, float* out, std::int64_t ld) {
        const int G = e.rec.blocks[p];
        decode16(e.rec, p, row0, scratch);
        const std::uint8_t* xq[kGroup];
        const float* xd[kGroup];
        float* o[kGroup];
        for (int i0 = 0; i0 < n; i0 += kGroup) {
            const int m = n - i0 < kGroup ? n - i0 : kGroup;
            for (int t = 0; t < m; ++t) {
                xq[t] = x.q + (i0 + t) * x.q_stride;
                xd[t] = x.d + (i0 + t) * x.d_stride;
                o[t] = out + (i0 + t) * ld;
            }
            tile_n<kGroup>(m, scratch, G, xq, xd, o);
        }
    }
};

#include "cpu/kernels/prompt_tasks.inl"

constexpr PromptOps kOps = make_prompt_ops("avx512vnni");

}  // namespace

const PromptOps* prompt_ops_vnni() { return &kOps; }

}  // namespace neural::cpu::prompt_detail
