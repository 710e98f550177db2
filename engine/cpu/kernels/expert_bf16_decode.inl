// AVX-512 decoding of the bf16 expert GEMM's weights (expert_bf16_impl.h), included inside the
// anonymous namespace of expert_bf16_avx512.cpp and expert_bf16_amx.cpp. The same bits as
// decode_rows_scalar: per row and block, the 16 code bytes widen to 16 dword lanes, the low
// and high nibbles look up E2M1 as fp32 (vpermps), one exact multiply by the block's scale,
// subnormal products to +-0, and the upper halves of the even and odd weights pack into one
// dword per pair (decode_block: the same bits under any MXCSR flush setting).

#include "cpu/kernels/transpose16_avx512.inl"

constexpr unsigned kDecodeCsr = 0x1F80u;          // exceptions masked, round to nearest even
constexpr unsigned kGemmCsr = 0x1F80u | 0x8040u;  // the same with FTZ (bit 15) and DAZ (bit 6)

struct DecodeConsts {
    __m512 e2m1 = _mm512_load_ps(kE2M1Table.v);
    __m512 half_e2m1 = _mm512_mul_ps(e2m1, _mm512_set1_ps(0.5f));  // exact
    __m512i nibble = _mm512_set1_epi32(0x0F);
    __m512i exponent = _mm512_set1_epi32(0x7F800000);
    __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
    __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
};

template <bool Flush>
inline __m512i decode_block_with(const DecodeConsts& k, __m512 e2m1, const std::uint8_t* codes,
                                 float scale) {
    const __m512i bytes =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
    const __m512 s = _mm512_set1_ps(scale);
    __m512i lo = _mm512_castps_si512(
        _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_and_si512(bytes, k.nibble), e2m1), s));
    __m512i hi = _mm512_castps_si512(_mm512_mul_ps(
        _mm512_permutexvar_ps(_mm512_and_si512(_mm512_srli_epi32(bytes, 4), k.nibble), e2m1), s));
    if constexpr (Flush) {
        lo = _mm512_mask_blend_epi32(_mm512_test_epi32_mask(lo, k.exponent),
                                     _mm512_and_si512(lo, k.sign), lo);
        hi = _mm512_mask_blend_epi32(_mm512_test_epi32_mask(hi, k.exponent),
                                     _mm512_and_si512(hi, k.sign), hi);
    }
    return _mm512_or_si512(_mm512_srli_epi32(lo, 16), _mm512_and_si512(hi, k.high));
}

// A 32-column block of one row (16 code bytes, the block's e8m0 byte): dword j = columns 2j
// (low half) and 2j + 1 (high half) as bf16 bits. For e8m0 >= 2 every nonzero product is at
// least 0.5 x 2^-125, a normal, so there is nothing to flush; e8m0 = 0 multiplies half the E2M1
// values by 2^-126 (the same products), so the result does not depend on MXCSR's DAZ (2^-127 is
// a subnormal fp32) nor, after the flush, on its FTZ.
// For 2 <= e8m0 <= 252 every product is a normal bf16, whose bits are E2M1's bf16 bits with
// e8m0 - 127 added to the exponent field (zeros kept): integer operations only. The 16 code
// bytes widen to words, w | w << 4 puts the low nibble in each word's low byte and the high
// nibble in its high byte (column order), those 32 bytes widen to 32 words and index a table of
// the 16 E2M1 values' bf16 bits.
inline __m512i decode_block_int(const std::uint8_t* codes, std::uint8_t e8m0) {
    const __m256i w =
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes)));
    const __m256i nib =
        _mm256_and_si256(_mm256_or_si256(w, _mm256_slli_epi16(w, 4)), _mm256_set1_epi8(0x0F));
    const __m512i idx = _mm512_cvtepu8_epi16(nib);
    // E2M1 codes 0..15 as bf16 bits (0, .5, 1, 1.5, 2, 3, 4, 6 and their negatives), twice.
    const __m512i table = _mm512_set_epi16(
        -16192, -16256, -16320, -16384, -16448, -16512, -16640, -32768, 16576, 16512, 16448, 16384,
        16320, 16256, 16128, 0, -16192, -16256, -16320, -16384, -16448, -16512, -16640, -32768,
        16576, 16512, 16448, 16384, 16320, 16256, 16128, 0);
    const __m512i v = _mm512_permutexvar_epi16(idx, table);
    const __mmask32 nonzero = _mm512_test_epi16_mask(v, _mm512_set1_epi16(0x7FFF));
    return _mm512_mask_add_epi16(v, nonzero, v,
                                 _mm512_set1_epi16(static_cast<short>((e8m0 - 127) * 128)));
}

inline __m512i decode_block(const DecodeConsts& k, const std::uint8_t* codes, std::uint8_t e8m0) {
    if (e8m0 >= 2 && e8m0 <= 252) return decode_block_int(codes, e8m0);
    if (e8m0 >= 2) return decode_block_with<false>(k, k.e2m1, codes, kE8M0Table.v[e8m0]);
    return decode_block_with<true>(k, e8m0 == 0 ? k.half_e2m1 : k.e2m1, codes, kE8M0Table.v[1]);
}

// Rows row0..row0+15 in the rows layout (the AMX A operand), row by row: each row's code
// bytes and scales are read in order (16 interleaved streams of both would defeat the
// hardware prefetchers).
inline void decode_rows_avx512(const RecordRef& rec, int p, std::int64_t row0, std::uint8_t* out) {
    const DecodeConsts k;
    const int G = rec.blocks[p];
    const std::uint64_t stride = static_cast<std::uint64_t>(G) * 16;
    alignas(64) std::uint8_t sbuf[kMaxBlocks + 32];
    for (int n = 0; n < kRows; ++n) {
        const std::uint8_t* codes =
            rec.code_base[p] + static_cast<std::uint64_t>(row0 + n) * stride;
        const std::uint8_t* scales = kernel_detail::record_row_scales(rec, p, row0 + n, sbuf);
        std::uint8_t* o = out + 64 * n;
        for (int b = 0; b < G; ++b) {
            if ((b & 3) == 0)
                _mm_prefetch(reinterpret_cast<const char*>(codes + 4 * stride + 16 * b),
                             _MM_HINT_T0);
            _mm512_store_si512(
                reinterpret_cast<__m512i*>(o + static_cast<std::int64_t>(b) * kTileBytes),
                decode_block(k, codes + 16 * b, scales[b]));
        }
    }
}

// Line j of `out` (64 bytes, 64-byte aligned) = dword j of r[0], r[1], .., r[15]. Overwrites r.
inline void store_transposed16(__m512i (&r)[16], std::uint8_t* out) {
    __m512i w[16];
    transpose16(r, w);
    for (int j = 0; j < 16; ++j) _mm512_store_si512(reinterpret_cast<__m512i*>(out + 64 * j), w[j]);
}

// Rows row0..row0+15 in the pairs layout (lanes = rows): decoded in the rows layout into `tmp`
// (G * kTileBytes), then each block's 16 x 16 dwords transposed in registers.
inline void decode_pairs_avx512(const RecordRef& rec, int p, std::int64_t row0, std::uint8_t* tmp,
                                std::uint8_t* out) {
    decode_rows_avx512(rec, p, row0, tmp);
    for (int b = 0; b < rec.blocks[p]; ++b) {
        const std::uint8_t* in = tmp + static_cast<std::int64_t>(b) * kTileBytes;
        __m512i r[16];
        for (int n = 0; n < kRows; ++n)
            r[n] = _mm512_load_si512(reinterpret_cast<const __m512i*>(in + 64 * n));
        store_transposed16(r, out + static_cast<std::int64_t>(b) * kTileBytes);
    }
}

// Tokens i0 .. i0 + 15 (those below n; zeros after) into the AMX B layout, all G blocks: per
// block the tokens' 64 bytes (16 column pairs each) load as one register each and transpose.
// The same bytes as pack_activations.
inline void pack_activations_avx512(const std::uint16_t* x, std::int64_t ldx, int n, int i0, int G,
                                    std::uint8_t* out) {
    const int m = n - i0 < 16 ? n - i0 : 16;
    const std::uint16_t* rows[16];
    for (int i = 0; i < m; ++i) rows[i] = x + (i0 + i) * ldx;
    for (int b = 0; b < G; ++b) {
        __m512i r[16];
        for (int i = 0; i < 16; ++i)
            r[i] = i < m ? _mm512_loadu_si512(rows[i] + 32 * b) : _mm512_setzero_si512();
        store_transposed16(r, out + static_cast<std::int64_t>(b) * kTileBytes);
    }
}
