// AVX512_VNNI int8 prompt kernel (compiled with -mavx512vnni on top of the AVX-512 flags; only
// called after cpu_features() reported AVX512_VNNI with AVX-512 F/BW/VL and OS support).
//
// A register tile is 16 rows: one zmm of int32 lanes, one row per lane. Decode, once per tile and
// block: the 16 rows' 16 code bytes are transposed (4 x 128-bit inserts, 8 unpacks) so that lane
// L of vector m holds code bytes 4m..4m+3 of one row; the low and the high nibbles of those
// bytes, looked up with vpshufb in the table of 2 x E2M1 values, are the row's 8 + 8 int8
// weights of two vpdpbusd groups (operand order of prompt_impl.h). Stored with the tile: the 16
// rows' scales e8m0 / 2 as fp32 and -128 x the block's weight sum per row, the start value that
// turns vpdpbusd's unsigned (q + 128) x signed w into sum q w. Per token and block: 8 vpdpbusd
// per Q8 pass (prompt_impl.h; the token's 4-byte groups broadcast) against the same 8 weight
// registers, 256 s_0 + s_1 (shift, add), one int -> float, one multiply (row scale x token step)
// and one fma, and for a third pass one more convert, multiply and fma. Lane i holds row 4 (i & 3) + (i >> 2) (the transpose's order); the result is
// permuted back once per token.
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

inline int lane_row(int i) { return 4 * (i & 3) + (i >> 2); }

inline __m512i load4(const std::uint8_t* c, std::uint64_t stride) {
    __m512i z = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c)));
    z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(c + stride)), 1);
    z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(c + 2 * stride)), 2);
    z = _mm512_inserti32x4(z, _mm_loadu_si128(reinterpret_cast<const __m128i*>(c + 3 * stride)), 3);
    return z;
}

// Rows row0..row0+15 of projection p, all G blocks, into D (G * kBlockBytes bytes).
void decode16(const RecordRef& rec, int p, std::int64_t row0, std::uint8_t* D) {
    const int G = rec.blocks[p];
    const std::uint64_t stride = static_cast<std::uint64_t>(G) * 16;
    const std::uint8_t* c0 = rec.code_base[p] + static_cast<std::uint64_t>(row0) * stride;
    alignas(64) std::uint8_t sbuf[kSubRows][kMaxBlocks + 32];
    const std::uint8_t* sc[kSubRows];
    for (int i = 0; i < kSubRows; ++i) {
        const int r = lane_row(i);
        sc[i] = kernel_detail::record_row_scales(rec, p, row0 + r, sbuf[i]);
    }
    const __m512i lut =
        _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kE2M1x2.v)));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i ones = _mm512_set1_epi8(1);
    for (int b = 0; b < G; ++b) {
        const std::uint8_t* cb = c0 + 16 * b;
        const __m512i z0 = load4(cb, stride), z1 = load4(cb + 4 * stride, stride);
        const __m512i z2 = load4(cb + 8 * stride, stride), z3 = load4(cb + 12 * stride, stride);
        const __m512i a = _mm512_unpacklo_epi32(z0, z1), bb = _mm512_unpackhi_epi32(z0, z1);
        const __m512i c = _mm512_unpacklo_epi32(z2, z3), d = _mm512_unpackhi_epi32(z2, z3);
        const __m512i v[4] = {_mm512_unpacklo_epi64(a, c), _mm512_unpackhi_epi64(a, c),
                              _mm512_unpacklo_epi64(bb, d), _mm512_unpackhi_epi64(bb, d)};
        std::uint8_t* out = D + static_cast<std::int64_t>(b) * kBlockBytes;
        __m512i wsum = _mm512_setzero_si512();
        for (int m = 0; m < 4; ++m) {
            const __m512i lo = _mm512_shuffle_epi8(lut, _mm512_and_si512(v[m], m4));
            const __m512i hi =
                _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v[m], 4), m4));
            _mm512_store_si512(reinterpret_cast<__m512i*>(out + 128 * m), lo);
            _mm512_store_si512(reinterpret_cast<__m512i*>(out + 128 * m + 64), hi);
            wsum = _mm512_dpbusd_epi32(wsum, ones, lo);
            wsum = _mm512_dpbusd_epi32(wsum, ones, hi);
        }
        alignas(64) float dw[kSubRows];
        for (int i = 0; i < kSubRows; ++i) dw[i] = kE8M0Table.v[sc[i][b]] * 0.5f;
        _mm512_store_ps(reinterpret_cast<float*>(out + 512), _mm512_load_ps(dw));
        _mm512_store_si512(reinterpret_cast<__m512i*>(out + 576),
                           _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(wsum, 7)));
    }
}

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
                const std::int64_t src = x.rows[i0 + t] / x.div;
                xq[t] = x.q + src * x.q_stride;
                xd[t] = x.d + src * x.d_stride;
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
