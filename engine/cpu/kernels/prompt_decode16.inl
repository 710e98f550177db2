// The decoded 16-row weight tile of the AVX-512 int8 prompt kernels (prompt_vnni.cpp,
// prompt_amx.inl): included inside each ISA file's anonymous namespace (one private copy per
// file, prompt_impl.h). Per block of 32 columns, kBlockBytes bytes:
//   +0    8 x 64 int8 weights: vector k holds, in lane L, the 4 weights of dot group k of row
//         lane_row(L) (the layout vpdpbusd multiplies, and an AMX B tile of 8 rows x 64 bytes),
//   +512  the 16 rows' scales e8m0 / 2 as fp32, by lane,
//   +576  -128 x the block's weight sum per row (int32, by lane): the start value that turns
//         an unsigned (q + 128) x signed w dot product into sum q w.
// The 16 rows' 16 code bytes are transposed (4 x 128-bit inserts, 8 unpacks) so that lane L of
// vector m holds code bytes 4m..4m+3 of one row; the low and the high nibbles of those bytes,
// looked up with vpshufb in the table of 2 x E2M1 values, are the row's 8 + 8 int8 weights of
// two dot groups (operand order of prompt_impl.h). Lane i holds row 4 (i & 3) + (i >> 2).

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
