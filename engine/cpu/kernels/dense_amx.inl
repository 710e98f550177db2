// The AMX-BF16 variant of the dense kernels for prompt blocks (dense_kernel.h "prompt
// variant"), included inside the anonymous namespace of dense_amx.cpp (the hardware tiles) and
// dense_amx_emulated.cpp (emulated tiles, for CPUs without AMX), after amx_tiles.inl.
//
// A task is the dense_tasks.inl task (rows_per_task rows of one output, every token of the
// call). Its rows go in groups of 32: the group's weights are repacked once into AMX B tiles
// (per 32-column chunk and 16 rows, 16 column pairs x 16 rows x 2 bf16: TDPBF16PS's pair
// layout), zero past the rows and columns the matrix has; then per tile of 32 tokens, four C
// tiles (2 token halves x 2 row halves, fp32) accumulate over the chunks the tokens' high parts
// against both B tiles, then their low parts: 8 TDPBF16PS per chunk, each C tile updated every
// fourth instruction. The operand rows of the call (high parts, low parts: dense_impl.h Job) are
// A tiles as they stand; at least kAmxTokenPad zero rows follow the last token, so a token tile
// past the end reads zeros. Per (token, row) the sum runs over the columns in order, high part
// then low part per chunk, each product exact in fp32 and each add rounded: not the 16-lane
// tree of the other variants, but every token's result is computed from that token alone, in
// one order, whatever the batch or the team.

constexpr int kAmxRows = 32;    // weight rows per group (two B tiles)
constexpr int kAmxTokens = 32;  // tokens per tile (two A tiles)

// Rows r0..r0+nr-1 (nr <= 32) of w (bf16, cols columns) into bv: for chunk c and half g,
// bv[((c * 2 + g) * 16 + k) * 16 + n] = columns 32c + 2k, 32c + 2k + 1 of row r0 + 16g + n as
// one 32-bit pair; zero past nr rows and past cols.
[[maybe_unused]] inline void repack_rows(const std::uint8_t* w, std::int64_t cols, std::int64_t r0,
                                         int nr, std::int64_t chunks, std::uint32_t* bv) {
    std::memset(bv, 0, static_cast<std::size_t>(chunks) * 2 * 256 * 4);
    for (int rr = 0; rr < nr; ++rr) {
        const std::uint8_t* row = w + 2 * (r0 + rr) * cols;
        const int g = rr / 16, n = rr % 16;
        const std::int64_t full = cols / 2;  // whole pairs
        for (std::int64_t p = 0; p < full; ++p) {
            std::uint32_t v;
            std::memcpy(&v, row + 4 * p, 4);
            const std::int64_t c = p / 16, k = p % 16;
            bv[((c * 2 + g) * 16 + k) * 16 + n] = v;
        }
        if (cols % 2 != 0) {  // the last column alone, its pair's upper half zero
            std::uint16_t v;
            std::memcpy(&v, row + 2 * (cols - 1), 2);
            const std::int64_t p = full, c = p / 16, k = p % 16;
            bv[((c * 2 + g) * 16 + k) * 16 + n] = v;
        }
    }
}

inline TileConfig dense_tile_config() {
    TileConfig c{};
    c.palette = 1;
    for (int t = 0; t < 8; ++t) {  // 0, 1: A (token halves); 2, 3: B (row halves); 4-7: C
        c.rows[t] = 16;
        c.colsb[t] = 64;
    }
    return c;
}

void dense_amx_task(void* ctx, std::int64_t task, std::int32_t worker) {
    const Job& job = *static_cast<const Job*>(ctx);
    const auto [outp, r0, r1] = task_rows(job, task);
    const Output& out = *outp;
    const std::int64_t chunks = job.padded / 32;
    std::uint32_t* bv = job.scratch + worker * job.scratch_dwords;
    alignas(64) float cbuf[4][16 * 16];
    const std::int64_t xs = 4 * job.padded;  // bytes between tokens' operand rows
    const auto* x = reinterpret_cast<const std::uint8_t*>(job.x);
    const TileConfig cfg = dense_tile_config();
    NEURAL_TILE_CONFIG(&cfg);
    for (std::int64_t r = r0; r < r1; r += kAmxRows) {
        const int nr = r1 - r < kAmxRows ? static_cast<int>(r1 - r) : kAmxRows;
#ifdef NEURAL_DENSE_REPACK_AVX512
        repack_avx512(out.w, job.cols, r, nr, chunks, 2, bv);  // the same bytes, in registers
#else
        repack_rows(out.w, job.cols, r, nr, chunks, bv);
#endif
        float b[kAmxRows];
        for (int i = 0; i < nr; ++i) b[i] = bf16_at(out.bias, r + i);
        for (std::int64_t t0 = 0; t0 < job.tokens; t0 += kAmxTokens) {
            const std::uint8_t* xa = x + t0 * xs;
            const std::uint8_t* xb = xa + 16 * xs;
            NEURAL_TILE_ZERO(4);
            NEURAL_TILE_ZERO(5);
            NEURAL_TILE_ZERO(6);
            NEURAL_TILE_ZERO(7);
            for (std::int64_t c = 0; c < chunks; ++c) {
                const std::uint32_t* bc = bv + c * 2 * 256;
                NEURAL_TILE_LOAD(2, bc, 64);
                NEURAL_TILE_LOAD(3, bc + 256, 64);
                NEURAL_TILE_LOAD(0, xa + 64 * c, xs);
                NEURAL_TILE_LOAD(1, xb + 64 * c, xs);
                NEURAL_TILE_DPBF16PS(4, 0, 2);
                NEURAL_TILE_DPBF16PS(5, 0, 3);
                NEURAL_TILE_DPBF16PS(6, 1, 2);
                NEURAL_TILE_DPBF16PS(7, 1, 3);
                NEURAL_TILE_LOAD(0, xa + 2 * job.padded + 64 * c, xs);
                NEURAL_TILE_LOAD(1, xb + 2 * job.padded + 64 * c, xs);
                NEURAL_TILE_DPBF16PS(4, 0, 2);
                NEURAL_TILE_DPBF16PS(5, 0, 3);
                NEURAL_TILE_DPBF16PS(6, 1, 2);
                NEURAL_TILE_DPBF16PS(7, 1, 3);
            }
            NEURAL_TILE_STORE(4, cbuf[0], 64);
            NEURAL_TILE_STORE(5, cbuf[1], 64);
            NEURAL_TILE_STORE(6, cbuf[2], 64);
            NEURAL_TILE_STORE(7, cbuf[3], 64);
            const std::int64_t nt = job.tokens - t0 < kAmxTokens ? job.tokens - t0 : kAmxTokens;
            for (std::int64_t t = 0; t < nt; ++t) {
                float* y = out.y + (t0 + t) * out.y_stride + r;
                const float* c0 = cbuf[2 * (t / 16)] + 16 * (t % 16);  // rows 0..15
                const float* c1 = cbuf[2 * (t / 16) + 1] + 16 * (t % 16);
                for (int i = 0; i < nr; ++i) {
                    const float v = (i < 16 ? c0[i] : c1[i - 16]) + b[i];
                    y[i] = v != v ? canonical_nan() : v;
                }
            }
        }
    }
    NEURAL_TILE_RELEASE();
}
