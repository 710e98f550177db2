// The dense kernels' tile order on AVX2 + FMA (compiled with -mavx2 -mfma; called only after
// cpu_features() reported them): the AMX variant's bits on CPUs without AVX-512
// (dense_kernel.h "tile order", dense_tile.inl). The avx512 tile variant's arithmetic on 8
// lanes: a group's rows repacked into the AMX variant's B-tile layout by 8 x 8 dword transposes,
// each 16-row half taken as two ymm halves of 8 rows; per token, chunk and line four fmas (high
// even, high odd, low even, low odd) with the token's operand values broadcast from its planes.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu/kernels/dense_impl.h"

namespace neural::cpu::dense_detail {
namespace {

// 8 rows of 8 dwords (r[n]) into 8 lines (w[k]: dword k of the 8 rows).
inline void transpose8(const __m256i (&r)[8], __m256i (&w)[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 2; ++i) {
        u[4 * i] = _mm256_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm256_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm256_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm256_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int k = 0; k < 4; ++k) {
        w[k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x20);
        w[4 + k] = _mm256_permute2x128_si256(u[k], u[4 + k], 0x31);
    }
}

struct Isa {
    static constexpr int kTokens = 2;  // per 8-row half: 2 tokens x 5 accumulators + weights
    static constexpr bool kBothHalves = false;

    static void repack(const std::uint8_t* w, std::int64_t cols, std::int64_t r0, int nr,
                       std::int64_t chunks, std::uint32_t* bv) {
        alignas(32) std::uint8_t tail[16][64];  // a partial last chunk's rows, zero past cols
        for (int g = 0; g * 16 < nr; ++g) {     // the halves tokens() reads
            for (std::int64_t c = 0; c < chunks; ++c) {
                const std::int64_t have = cols - 32 * c < 32 ? cols - 32 * c : 32;
                const std::uint8_t* row[16];
                for (int n = 0; n < 16; ++n) {
                    const int rr = 16 * g + n;
                    if (rr >= nr) {
                        row[n] = nullptr;
                    } else if (have == 32) {
                        row[n] = w + 2 * ((r0 + rr) * cols + 32 * c);
                    } else {
                        std::memset(tail[n], 0, 64);
                        std::memcpy(tail[n], w + 2 * ((r0 + rr) * cols + 32 * c),
                                    static_cast<std::size_t>(2 * have));
                        row[n] = tail[n];
                    }
                }
                std::uint32_t* out = bv + (c * 2 + g) * 256;
                for (int n0 = 0; n0 < 16; n0 += 8) {
                    for (int k0 = 0; k0 < 16; k0 += 8) {
                        __m256i r[8], l[8];
                        for (int n = 0; n < 8; ++n) {
                            r[n] = row[n0 + n] == nullptr
                                       ? _mm256_setzero_si256()
                                       : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                             row[n0 + n] + 4 * k0));
                        }
                        transpose8(r, l);
                        for (int k = 0; k < 8; ++k) {
                            _mm256_storeu_si256(
                                reinterpret_cast<__m256i*>(out + 16 * (k0 + k) + n0), l[k]);
                        }
                    }
                }
            }
        }
    }

    // One 8-row half (lines 16 dwords apart, rows at h) against M tokens.
    template <int M>
    static void half(const std::uint32_t* h, const float* const* p, std::int64_t chunks,
                     float* res) {
        const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
        __m256 acc[M];
        for (int q = 0; q < M; ++q) acc[q] = _mm256_setzero_ps();
        for (std::int64_t c = 0; c < chunks; ++c) {
            const std::uint32_t* lines = h + c * 512;
            __m256 he[M], ho[M], le[M], lo[M];
            const float* x[M];
            for (int q = 0; q < M; ++q) {
                he[q] = ho[q] = le[q] = lo[q] = _mm256_setzero_ps();
                x[q] = p[q] + 64 * c;
            }
#pragma GCC unroll 16
            for (int k = 0; k < 16; ++k) {
                const __m256i wv =
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lines + 16 * k));
                const __m256 we = _mm256_castsi256_ps(_mm256_slli_epi32(wv, 16));
                const __m256 wo = _mm256_castsi256_ps(_mm256_and_si256(wv, high));
                for (int q = 0; q < M; ++q) {
                    he[q] = _mm256_fmadd_ps(we, _mm256_broadcast_ss(x[q] + k), he[q]);
                    ho[q] = _mm256_fmadd_ps(wo, _mm256_broadcast_ss(x[q] + 16 + k), ho[q]);
                    le[q] = _mm256_fmadd_ps(we, _mm256_broadcast_ss(x[q] + 32 + k), le[q]);
                    lo[q] = _mm256_fmadd_ps(wo, _mm256_broadcast_ss(x[q] + 48 + k), lo[q]);
                }
            }
            for (int q = 0; q < M; ++q) {
                acc[q] = _mm256_add_ps(_mm256_add_ps(acc[q], _mm256_add_ps(he[q], ho[q])),
                                       _mm256_add_ps(le[q], lo[q]));
            }
        }
        for (int q = 0; q < M; ++q) _mm256_storeu_ps(res + q * 32, acc[q]);
    }

    template <int M>
    static void tokens(const std::uint32_t* h, const float* const* p, std::int64_t chunks,
                       float* res) {
        half<M>(h, p, chunks, res);
        half<M>(h + 8, p, chunks, res + 8);
    }
};

#include "cpu/kernels/dense_tile.inl"

}  // namespace

TaskFn task_tile_avx2() { return &tile_task; }

}  // namespace neural::cpu::dense_detail
