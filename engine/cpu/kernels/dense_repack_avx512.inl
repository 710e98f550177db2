// AVX-512 repacking of dense weight rows into the AMX variant's B-tile layout (dense_amx.inl
// repack_rows, the same bytes), included inside the anonymous namespace of dense_amx.cpp (the
// hardware tiles) and dense_tile_avx512.cpp: per 32-column chunk and 16-row half, the rows'
// 64-byte chunks (a masked load for the last, partial one) transposed as 16 x 16 dwords.

#include "cpu/kernels/transpose16_avx512.inl"

// Rows r0 .. r0 + nr - 1 (nr <= 32) of w, halves 0 .. halves - 1, into bv: for chunk c and half
// g, bv[((c * 2 + g) * 16 + k) * 16 + n] = columns 32c + 2k, 32c + 2k + 1 of row r0 + 16g + n,
// zero past nr rows and past cols.
inline void repack_avx512(const std::uint8_t* w, std::int64_t cols, std::int64_t r0, int nr,
                          std::int64_t chunks, int halves, std::uint32_t* bv) {
    for (int g = 0; g < halves; ++g) {
        for (std::int64_t c = 0; c < chunks; ++c) {
            // Columns of chunk c this matrix has: whole chunks load 64 bytes, the last one a
            // masked load of its bf16 columns (zero past cols).
            const std::int64_t have = cols - 32 * c < 32 ? cols - 32 * c : 32;
            const __mmask32 m = have == 32 ? ~__mmask32{0} : (__mmask32{1} << have) - 1;
            __m512i r[16], l[16];
            for (int n = 0; n < 16; ++n) {
                const int row = 16 * g + n;
                r[n] = row < nr ? _mm512_maskz_loadu_epi16(m, w + 2 * ((r0 + row) * cols + 32 * c))
                                : _mm512_setzero_si512();
            }
            transpose16(r, l);
            std::uint32_t* out = bv + (c * 2 + g) * 256;
            for (int k = 0; k < 16; ++k) _mm512_storeu_si512(out + 16 * k, l[k]);
        }
    }
}
