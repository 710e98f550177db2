// A 16 x 16 transpose of dwords in AVX-512 registers (two unpack stages within 128-bit lanes,
// then a 4 x 4 transpose of the lanes), included inside the anonymous namespace of each AVX-512
// kernel file that lays rows out as column pairs or tiles (dense_repack_avx512.inl,
// expert_bf16_decode.inl). Overwrites r.
#pragma once

// 16 rows of 16 dwords (r[n]: row n's column pairs) into 16 lines (w[k]: pair k of the rows).
inline void transpose16(__m512i (&r)[16], __m512i (&w)[16]) {
    __m512i t[16];
    for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; ++i) {
        r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int q = 0; q < 4; ++q) {
        const __m512i a = _mm512_shuffle_i32x4(r[q], r[4 + q], 0x44);
        const __m512i b = _mm512_shuffle_i32x4(r[8 + q], r[12 + q], 0x44);
        const __m512i c = _mm512_shuffle_i32x4(r[q], r[4 + q], 0xEE);
        const __m512i d = _mm512_shuffle_i32x4(r[8 + q], r[12 + q], 0xEE);
        w[q] = _mm512_shuffle_i32x4(a, b, 0x88);
        w[4 + q] = _mm512_shuffle_i32x4(a, b, 0xDD);
        w[8 + q] = _mm512_shuffle_i32x4(c, d, 0x88);
        w[12 + q] = _mm512_shuffle_i32x4(c, d, 0xDD);
    }
}
