// Helpers of the AVX-512 kernel files (expert_avx512.cpp, dense_avx512_loop.inl,
// dense_int8_avx512vnni.cpp, attention_avx512.cpp), each compiled with its own AVX-512 flags
// (CMakeLists.txt). Included after <immintrin.h> inside each file's anonymous namespace, so
// every copy has internal linkage: no copy compiled with one file's flags stands in for another.

// The 16 lanes summed in a fixed tree (8 + 8, 4 + 4, 2 + 2, 1 + 1): the order the kernels'
// scalar references write out.
inline float hsum512(__m512 v) {
    const __m256 lo = _mm512_castps512_ps256(v);
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
    const __m256 s8 = _mm256_add_ps(lo, hi);
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
    return _mm_cvtss_f32(s1);
}
