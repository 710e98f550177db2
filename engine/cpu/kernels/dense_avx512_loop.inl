// The AVX-512 dense kernels' shared loop (dense_avx512.cpp, dense_avx512bf16.cpp): each file
// defines, inside its anonymous namespace,
//
//   template <int NR, int NT>
//   void chunk(const __m512i* wv, const std::uint16_t* const* x, std::int64_t lo,
//              std::int64_t c, __m512 (&acc)[NR][NT]);  // one 32-column chunk into the sums
//
// and then includes this file, which walks the rows 32 columns at a time (a masked load for the
// last partial chunk), reduces the 16 lane sums and provides the `Isa` that dense_tasks.inl
// expects.

#include "cpu/kernels/simd_avx512.inl"

constexpr int kPrefetchBytes = 2048;

struct Isa {
    template <int NR, int NT>
    static void dot(const std::uint8_t* const* w, const std::uint16_t* const* x, std::int64_t lo,
                    std::int64_t cols, float* res) {
        __m512 acc[NR][NT];
        for (int r = 0; r < NR; ++r) {
            for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
        }
        std::int64_t c = 0;
        for (; c + 32 <= cols; c += 32) {
            __m512i wv[NR];
            for (int r = 0; r < NR; ++r) {
                _mm_prefetch(reinterpret_cast<const char*>(w[r] + 2 * c + kPrefetchBytes),
                             _MM_HINT_T0);
                wv[r] = _mm512_loadu_si512(w[r] + 2 * c);
            }
            chunk<NR, NT>(wv, x, lo, c, acc);
        }
        if (c < cols) {  // the last partial chunk: weights past cols read as zero
            const auto mask = static_cast<__mmask32>((1ull << (cols - c)) - 1);
            __m512i wv[NR];
            for (int r = 0; r < NR; ++r) wv[r] = _mm512_maskz_loadu_epi16(mask, w[r] + 2 * c);
            chunk<NR, NT>(wv, x, lo, c, acc);
        }
        for (int r = 0; r < NR; ++r) {
            for (int t = 0; t < NT; ++t) res[r * NT + t] = hsum512(acc[r][t]);
        }
    }
};
