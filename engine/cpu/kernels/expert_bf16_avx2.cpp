// The bf16 expert GEMM on AVX2 + FMA (expert_bf16.h), for CPUs without AVX-512: the avx512
// variant's arithmetic on 8 lanes. The 16 rows of a group are decoded into the pairs layout
// (expert_bf16_impl.h) and taken as two halves of 8 rows (one ymm each); per token, half and
// 32-column block two lane sums (even and odd columns, one vfmadd231ps per column with the
// token's bf16 value broadcast), then the output adds their sum: the tiles' order, with MXCSR's
// FTZ and DAZ set while it runs (the caller's MXCSR restored), so subnormals behave as on the
// tiles and the bits equal every other variant's.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu/kernels/expert_bf16_impl.h"

namespace neural::cpu::bf16_detail {
namespace {

constexpr unsigned kDecodeCsr = 0x1F80u;          // exceptions masked, round to nearest even
constexpr unsigned kGemmCsr = 0x1F80u | 0x8040u;  // the same with FTZ (bit 15) and DAZ (bit 6)

// E2M1 codes 0..15 as bf16 bits (0, .5, 1, 1.5, 2, 3, 4, 6 and their negatives).
constexpr std::uint16_t kE2M1Bf16[16] = {0x0000, 0x3F00, 0x3F80, 0x3FC0, 0x4000, 0x4040,
                                         0x4080, 0x40C0, 0x8000, 0xBF00, 0xBF80, 0xBFC0,
                                         0xC000, 0xC040, 0xC080, 0xC0C0};

// A weight as bf16 bits, as weight_bits: for 2 <= e8m0 <= 252 every nonzero product is a normal
// bf16 whose bits are E2M1's with e8m0 - 127 added to the exponent field (integer operations);
// the other scales take weight_bits' exact multiply.
inline std::uint32_t weight_of(int code, std::uint8_t e8m0) {
    if (e8m0 < 2 || e8m0 > 252) return weight_bits(code, e8m0);
    const std::uint32_t v = kE2M1Bf16[code];
    return (v & 0x7FFFu) != 0 ? ((v + static_cast<std::uint32_t>((e8m0 - 127) * 128)) & 0xFFFFu)
                              : v;
}

// Rows row0..row0+15 of projection p, all G blocks, in the pairs layout: dword n of line j of
// block b = row n's columns 2j (low half) and 2j + 1 (high half).
void decode_pairs(const RecordRef& rec, int p, std::int64_t row0, std::uint8_t* out) {
    const int G = rec.blocks[p];
    const std::uint64_t stride = static_cast<std::uint64_t>(G) * 16;
    alignas(64) std::uint8_t sbuf[kMaxBlocks + 32];
    for (int n = 0; n < kRows; ++n) {
        const std::uint8_t* codes =
            rec.code_base[p] + static_cast<std::uint64_t>(row0 + n) * stride;
        const std::uint8_t* scales = kernel_detail::record_row_scales(rec, p, row0 + n, sbuf);
        for (int b = 0; b < G; ++b) {
            std::uint8_t* o = out + static_cast<std::int64_t>(b) * kTileBytes + 4 * n;
            const std::uint8_t s = scales[b];
            for (int j = 0; j < 16; ++j) {
                const std::uint8_t byte = codes[16 * b + j];
                const std::uint32_t pair = weight_of(byte & 0x0F, s) | weight_of(byte >> 4, s)
                                                                           << 16;
                std::memcpy(o + 64 * j, &pair, 4);
            }
        }
    }
}

// The activations as fp32 planes, per token the even columns then the odd ones (cols / 2 each).
void split_planes(const Gemm& g, int cols, float* planes) {
    for (int i = 0; i < g.n; ++i) {
        const std::uint16_t* x = g.x + i * g.ldx;
        float* even = planes + static_cast<std::int64_t>(i) * cols;
        float* odd = even + cols / 2;
        for (int k = 0; k < cols / 2; ++k) {
            const std::uint32_t e = static_cast<std::uint32_t>(x[2 * k]) << 16;
            const std::uint32_t o = static_cast<std::uint32_t>(x[2 * k + 1]) << 16;
            std::memcpy(even + k, &e, 4);
            std::memcpy(odd + k, &o, 4);
        }
    }
}

// Tokens i0 .. i0 + M - 1 against the decoded group (rows col0 .. col0 + 15 of the output).
template <int M>
void tokens(const Gemm& g, const float* planes, int i0, std::int64_t col0, int G) {
    const int cols = 32 * G;
    const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
    const __m256 nan = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(kCanonicalNan)));
    const float* xe[M];
    const float* xo[M];
    for (int q = 0; q < M; ++q) {
        xe[q] = planes + static_cast<std::int64_t>(i0 + q) * cols;
        xo[q] = xe[q] + cols / 2;
    }
    for (int half = 0; half < 2; ++half) {  // rows 0..7, then 8..15
        __m256 acc[M];
        for (int q = 0; q < M; ++q) acc[q] = _mm256_setzero_ps();
        for (int b = 0; b < G; ++b) {
            const std::uint8_t* t =
                g.weights + static_cast<std::int64_t>(b) * kTileBytes + 32 * half;
            __m256 l0[M], l1[M];
            for (int q = 0; q < M; ++q) l0[q] = l1[q] = _mm256_setzero_ps();
            for (int j = 0; j < 16; ++j) {
                const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(t + 64 * j));
                const __m256 we = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
                const __m256 wo = _mm256_castsi256_ps(_mm256_and_si256(w, high));
                for (int q = 0; q < M; ++q) {
                    l0[q] = _mm256_fmadd_ps(we, _mm256_broadcast_ss(xe[q] + 16 * b + j), l0[q]);
                    l1[q] = _mm256_fmadd_ps(wo, _mm256_broadcast_ss(xo[q] + 16 * b + j), l1[q]);
                }
            }
            for (int q = 0; q < M; ++q) acc[q] = _mm256_add_ps(acc[q], _mm256_add_ps(l0[q], l1[q]));
        }
        for (int q = 0; q < M; ++q) {
            const __m256 is_nan = _mm256_cmp_ps(acc[q], acc[q], _CMP_UNORD_Q);
            _mm256_storeu_ps(g.out + (i0 + q) * g.ld + col0 + 8 * half,
                             _mm256_blendv_ps(acc[q], nan, is_nan));
        }
    }
}

void gemm(const Gemm& g) {
    const int G = g.rec.blocks[g.p];
    // Scratch: the decoded group in `weights`, the activation planes in `packed` (n x 32G
    // floats: within its ceil(n / 16) x 2 x G x kTileBytes bytes).
    auto* planes = reinterpret_cast<float*>(g.packed);
    split_planes(g, 32 * G, planes);
    const unsigned csr = _mm_getcsr();
    for (std::int64_t r0 = g.row0; r0 < g.row0 + g.rows; r0 += kRows) {
        // Without DAZ: weight_bits' products read the scale 2^-127 (e8m0 = 0), a subnormal.
        _mm_setcsr(kDecodeCsr);
        decode_pairs(g.rec, g.p, r0, g.weights);
        _mm_setcsr(kGemmCsr);
        const std::int64_t col0 = r0 - g.row0;
        int i0 = 0;
        for (; i0 + 4 <= g.n; i0 += 4) tokens<4>(g, planes, i0, col0, G);
        switch (g.n - i0) {
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

GemmFn gemm_avx2() { return &gemm; }

}  // namespace neural::cpu::bf16_detail
