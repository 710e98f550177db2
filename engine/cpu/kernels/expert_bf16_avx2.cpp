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

// A code byte's two weights (low nibble: the even column, high: the odd) as the E2M1 values'
// bf16 bits, and per half whether it is nonzero (zeros keep their bits under any scale).
struct PairTable {
    std::uint16_t lo[256], hi[256];
    bool lo_nz[256], hi_nz[256];
};
constexpr PairTable make_pair_table() {
    PairTable t{};
    for (int b = 0; b < 256; ++b) {
        t.lo[b] = kE2M1Bf16[b & 0x0F];
        t.hi[b] = kE2M1Bf16[b >> 4];
        t.lo_nz[b] = (t.lo[b] & 0x7FFF) != 0;
        t.hi_nz[b] = (t.hi[b] & 0x7FFF) != 0;
    }
    return t;
}
constexpr PairTable kPairs = make_pair_table();

// One code byte as a dword of two weights' bf16 bits, as weight_bits: for 2 <= e8m0 <= 252
// every nonzero product is a normal bf16 whose bits are E2M1's with e8m0 - 127 added to the
// exponent field (integer operations, each half on its own); the other scales take
// weight_bits' exact multiply.
inline std::uint32_t pair_of(std::uint8_t byte, std::uint8_t e8m0) {
    if (e8m0 < 2 || e8m0 > 252)
        return weight_bits(byte & 0x0F, e8m0) |
               static_cast<std::uint32_t>(weight_bits(byte >> 4, e8m0)) << 16;
    const auto d = static_cast<std::uint16_t>((e8m0 - 127) * 128);
    const std::uint16_t lo =
        kPairs.lo_nz[byte] ? static_cast<std::uint16_t>(kPairs.lo[byte] + d) : kPairs.lo[byte];
    const std::uint16_t hi =
        kPairs.hi_nz[byte] ? static_cast<std::uint16_t>(kPairs.hi[byte] + d) : kPairs.hi[byte];
    return lo | static_cast<std::uint32_t>(hi) << 16;
}

// Rows row0..row0+15 of projection p, all G blocks, in the pairs layout: dword n of line j of
// block b = row n's columns 2j (low half) and 2j + 1 (high half). Per block the 16 rows' 16 code
// bytes are transposed (four rounds of interleaving rows i and i + 8: each rotates the bits of
// (row, byte) by one), so that line j's 16 dwords come from one vector of the rows' byte j: its
// nibbles index the E2M1 bf16 bytes (pshufb) and each row's e8m0 - 127 is added to the nonzero
// weights' exponent fields (16-bit adds). A block with a scale outside [2, 252] takes pair_of.
void decode_pairs(const RecordRef& rec, int p, std::int64_t row0, std::uint8_t* out) {
    const int G = rec.blocks[p];
    const std::uint64_t stride = static_cast<std::uint64_t>(G) * 16;
    const std::uint8_t* codes[kRows];
    const std::uint8_t* scales[kRows];
    alignas(64) std::uint8_t sbuf[kRows][kMaxBlocks + 32];
    for (int n = 0; n < kRows; ++n) {
        codes[n] = rec.code_base[p] + static_cast<std::uint64_t>(row0 + n) * stride;
        scales[n] = kernel_detail::record_row_scales(rec, p, row0 + n, sbuf[n]);
    }
    alignas(16) std::uint8_t lo_bytes[16], hi_bytes[16];
    for (int c = 0; c < 16; ++c) {
        lo_bytes[c] = static_cast<std::uint8_t>(kE2M1Bf16[c] & 0xFF);
        hi_bytes[c] = static_cast<std::uint8_t>(kE2M1Bf16[c] >> 8);
    }
    const __m128i lo_table = _mm_load_si128(reinterpret_cast<const __m128i*>(lo_bytes));
    const __m128i hi_table = _mm_load_si128(reinterpret_cast<const __m128i*>(hi_bytes));
    const __m128i nibble = _mm_set1_epi8(0x0F);
    const __m128i magnitude = _mm_set1_epi16(0x7FFF);
    const __m128i zero = _mm_setzero_si128();
    for (int b = 0; b < G; ++b) {
        std::uint8_t* o = out + static_cast<std::int64_t>(b) * kTileBytes;
        alignas(16) std::int16_t delta[kRows];
        bool plain = true;
        for (int n = 0; n < kRows; ++n) {
            const std::uint8_t e = scales[n][b];
            plain = plain && e >= 2 && e <= 252;
            delta[n] = static_cast<std::int16_t>((e - 127) * 128);
        }
        if (!plain) {
            for (int n = 0; n < kRows; ++n) {
                for (int j = 0; j < 16; ++j) {
                    const std::uint32_t pair = pair_of(codes[n][16 * b + j], scales[n][b]);
                    std::memcpy(o + 64 * j + 4 * n, &pair, 4);
                }
            }
            continue;
        }
        __m128i x[16], y[16];
        for (int n = 0; n < kRows; ++n)
            x[n] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes[n] + 16 * b));
        for (int round = 0; round < 4; ++round) {
            for (int i = 0; i < 8; ++i) {
                y[2 * i] = _mm_unpacklo_epi8(x[i], x[i + 8]);
                y[2 * i + 1] = _mm_unpackhi_epi8(x[i], x[i + 8]);
            }
            for (int i = 0; i < 16; ++i) x[i] = y[i];
        }
        const __m128i d_a = _mm_load_si128(reinterpret_cast<const __m128i*>(delta));  // rows 0-7
        const __m128i d_b = _mm_load_si128(reinterpret_cast<const __m128i*>(delta + 8));  // 8-15
        auto scaled = [&](__m128i w, __m128i d) {  // + d where the weight is nonzero
            const __m128i is_zero = _mm_cmpeq_epi16(_mm_and_si128(w, magnitude), zero);
            return _mm_add_epi16(w, _mm_andnot_si128(is_zero, d));
        };
        for (int j = 0; j < 16; ++j) {  // x[j]: byte j of rows 0..15
            const __m128i lo_idx = _mm_and_si128(x[j], nibble);
            const __m128i hi_idx = _mm_and_si128(_mm_srli_epi16(x[j], 4), nibble);
            const __m128i l0 = _mm_shuffle_epi8(lo_table, lo_idx);
            const __m128i l1 = _mm_shuffle_epi8(hi_table, lo_idx);
            const __m128i h0 = _mm_shuffle_epi8(lo_table, hi_idx);
            const __m128i h1 = _mm_shuffle_epi8(hi_table, hi_idx);
            const __m128i even_a = scaled(_mm_unpacklo_epi8(l0, l1), d_a);  // rows 0-7, col 2j
            const __m128i even_b = scaled(_mm_unpackhi_epi8(l0, l1), d_b);  // rows 8-15
            const __m128i odd_a = scaled(_mm_unpacklo_epi8(h0, h1), d_a);   // col 2j + 1
            const __m128i odd_b = scaled(_mm_unpackhi_epi8(h0, h1), d_b);
            auto* line = reinterpret_cast<__m128i*>(o + 64 * j);
            _mm_store_si128(line, _mm_unpacklo_epi16(even_a, odd_a));
            _mm_store_si128(line + 1, _mm_unpackhi_epi16(even_a, odd_a));
            _mm_store_si128(line + 2, _mm_unpacklo_epi16(even_b, odd_b));
            _mm_store_si128(line + 3, _mm_unpackhi_epi16(even_b, odd_b));
        }
    }
}

// The activations as fp32 planes, per token the even columns then the odd ones (cols / 2 each):
// per 8 column pairs, the pairs' dwords shifted left 16 (even) and masked to their high half
// (odd): each bf16 value's fp32 bits.
void prepare(const Prepare& p) {
    const int cols = 32 * p.G;
    const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
    for (int i = 0; i < p.n; ++i) {
        const std::uint16_t* x = p.x + i * p.ldx;
        auto* even = reinterpret_cast<float*>(p.out) + static_cast<std::int64_t>(i) * cols;
        float* odd = even + cols / 2;
        for (int k = 0; k < cols / 2; k += 8) {
            const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + 2 * k));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(even + k), _mm256_slli_epi32(v, 16));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(odd + k), _mm256_and_si256(v, high));
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
    const auto* planes = reinterpret_cast<const float*>(g.x);  // the prepared planes
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

Variant variant_avx2() { return {&gemm, &prepare}; }

}  // namespace neural::cpu::bf16_detail
