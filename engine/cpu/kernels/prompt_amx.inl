// The AMX variant of the int8 GEMM of the prompt kernels (prompt_kernel.h, prompt_tasks.inl),
// included inside the anonymous namespace of prompt_amx.cpp (the hardware tiles) and of
// prompt_amx_emulated.cpp (the same code on emulated tiles, so that CPUs without AMX test it),
// after amx_tiles.inl and prompt_decode16.inl.
//
// The weights are the decoded 16-row tile of the VNNI variant (prompt_decode16.inl): its 8 x 64
// bytes per block are exactly an AMX B tile of 8 rows (dot groups) x 16 columns (rows of the
// weight matrix, in lane order) x 4 bytes. The A tiles are 16 operand rows (tokens) x 32 bytes,
// one per Q8 pass, loaded straight from the job's contiguous operand rows (Operands). Per block
// of 32 columns and 16 tokens: one B and kPasses A loads, kPasses tdpbusd into zeroed C tiles
// (16 tokens x 16 lanes of int32), stored to scratch; then per token, with AVX-512, the VNNI
// variant's own arithmetic from the same integers: (start + S_0) x 256 + (start + S_1), one
// int -> float, one multiply (row scale x token step), one fma. Integer sums are exact in any
// order, so the result is bit-identical to the VNNI variant and the scalar reference.
// The C tiles of block b are post-processed after block b + 1's tile instructions are issued,
// so the AVX-512 work of one block overlaps the tile work of the next.

constexpr int kAmxTokens = 16;  // operand rows per A tile (its maximum)

// tmm0: B, 8 rows x 64 bytes; tmm1 .. kPasses: A of pass j, 16 x 32 bytes; then the C tiles of
// the passes, 16 x 64 bytes.
inline TileConfig tile_config() {
    TileConfig c{};
    c.palette = 1;
    c.rows[0] = 8;
    c.colsb[0] = 64;
    for (int j = 0; j < kPasses; ++j) {
        c.rows[1 + j] = kAmxTokens;
        c.colsb[1 + j] = 32;
        c.rows[1 + kPasses + j] = kAmxTokens;
        c.colsb[1 + kPasses + j] = 64;
    }
    return c;
}

// One block's tile work: C_j = A_j . B for the 16 operand rows at q (stride qs), stored to c
// (kPasses x 16 x 16 int32).
inline void amx_block(const std::uint8_t* Db, const std::uint8_t* q, std::int64_t qs,
                      std::int32_t* c) {
    NEURAL_TILE_LOAD(0, Db, 64);
    NEURAL_TILE_LOAD(1, q, qs);
    NEURAL_TILE_LOAD(2, q + 32, qs);
    if constexpr (kPasses == 2) {
        NEURAL_TILE_ZERO(3);
        NEURAL_TILE_ZERO(4);
        NEURAL_TILE_DPBUSD(3, 1, 0);
        NEURAL_TILE_DPBUSD(4, 2, 0);
        NEURAL_TILE_STORE(3, c, 64);
        NEURAL_TILE_STORE(4, c + 256, 64);
    } else {
        NEURAL_TILE_LOAD(3, q + 64, qs);
        NEURAL_TILE_ZERO(4);
        NEURAL_TILE_ZERO(5);
        NEURAL_TILE_ZERO(6);
        NEURAL_TILE_DPBUSD(4, 1, 0);
        NEURAL_TILE_DPBUSD(5, 2, 0);
        NEURAL_TILE_DPBUSD(6, 3, 0);
        NEURAL_TILE_STORE(4, c, 64);
        NEURAL_TILE_STORE(5, c + 256, 64);
        NEURAL_TILE_STORE(6, c + 512, 64);
    }
}

// acc[t] += block b's contribution for the 16 tokens (the VNNI variant's expression).
inline void amx_post(const std::uint8_t* Db, const std::int32_t* c, const float* d, std::int64_t ds,
                     __m512* acc) {
    const __m512 dw = _mm512_load_ps(reinterpret_cast<const float*>(Db + 512));
    const __m512i start = _mm512_load_si512(Db + 576);
    for (int t = 0; t < kAmxTokens; ++t) {
        const __m512i s0 = _mm512_add_epi32(start, _mm512_load_si512(c + 16 * t));
        const __m512i s1 = _mm512_add_epi32(start, _mm512_load_si512(c + 256 + 16 * t));
        const __m512i s01 = _mm512_add_epi32(_mm512_slli_epi32(s0, 8), s1);
        const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(d[t * ds]));
        acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s01), scale, acc[t]);
        if constexpr (kPasses == 3) {
            const __m512i s2 = _mm512_add_epi32(start, _mm512_load_si512(c + 512 + 16 * t));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s2),
                                     _mm512_mul_ps(scale, _mm512_set1_ps(1.0f / 256.0f)), acc[t]);
        }
    }
}

struct Isa {
    static void gemm16(const ExpertArgs& e, int p, std::int64_t row0, const Operands& x, int n,
                       std::uint8_t* scratch, float* out, std::int64_t ld) {
        const int G = e.rec.blocks[p];
        decode16(e.rec, p, row0, scratch);
        const TileConfig cfg = tile_config();
        NEURAL_TILE_CONFIG(&cfg);
        alignas(64) std::int32_t cbuf[2][kPasses * 256];
        const __m512i back = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
        for (int i0 = 0; i0 < n; i0 += kAmxTokens) {
            const std::uint8_t* q = x.q + i0 * x.q_stride;
            const float* d = x.d + i0 * x.d_stride;
            __m512 acc[kAmxTokens];
            for (int t = 0; t < kAmxTokens; ++t) acc[t] = _mm512_setzero_ps();
            amx_block(scratch, q, x.q_stride, cbuf[0]);
            for (int b = 1; b < G; ++b) {
                const std::uint8_t* Db = scratch + static_cast<std::int64_t>(b) * kBlockBytes;
                amx_block(Db, q + kQ8Bytes * b, x.q_stride, cbuf[b & 1]);
                amx_post(Db - kBlockBytes, cbuf[(b - 1) & 1], d + (b - 1), x.d_stride, acc);
            }
            amx_post(scratch + static_cast<std::int64_t>(G - 1) * kBlockBytes, cbuf[(G - 1) & 1],
                     d + (G - 1), x.d_stride, acc);
            const int m = n - i0 < kAmxTokens ? n - i0 : kAmxTokens;
            for (int t = 0; t < m; ++t)
                _mm512_storeu_ps(out + (i0 + t) * ld, _mm512_permutexvar_ps(back, acc[t]));
        }
        NEURAL_TILE_RELEASE();
    }
};
