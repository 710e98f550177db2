// The bf16 expert GEMM on AMX tiles (expert_bf16.h), included inside the anonymous namespace of
// expert_bf16_amx.cpp (hardware tiles, AVX-512 decoding) and expert_bf16_amx_emulated.cpp
// (amx_tiles.inl's emulation, scalar decoding) after amx_tiles.inl and a definition of
// DECODE_ROWS(rec, p, row0, out) (the rows layout, expert_bf16_impl.h). The activations are
// packed once per call; per group of 16 rows the weights are decoded once and every token tile
// runs over them: tile 0 = C (16 rows x 16 tokens, fp32), per 32-column block tile 1 = A (the
// rows' 32 weights) and tile 2 = B (the tokens' packed activations), one tdpbf16ps. The tile
// configuration is loaded and released within the call, so no tile state outlives it.

void gemm_amx_tiles(const Gemm& g) {
    const int G = g.rec.blocks[g.p];
    const int tiles = (g.n + 15) / 16;
    for (int t = 0; t < tiles; ++t)
        pack_activations(g.x, g.ldx, g.n, 16 * t, G,
                         g.packed + static_cast<std::int64_t>(t) * G * kTileBytes);
    TileConfig cfg{};
    cfg.palette = 1;
    for (int t = 0; t < 3; ++t) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    NEURAL_TILE_CONFIG(&cfg);
    for (std::int64_t r0 = g.row0; r0 < g.row0 + g.rows; r0 += kRows) {
        DECODE_ROWS(g.rec, g.p, r0, g.weights);
        for (int t = 0; t < tiles; ++t) {
            const std::uint8_t* packed = g.packed + static_cast<std::int64_t>(t) * G * kTileBytes;
            NEURAL_TILE_ZERO(0);
            for (int b = 0; b < G; ++b) {
                NEURAL_TILE_LOAD(1, g.weights + static_cast<std::int64_t>(b) * kTileBytes, 64);
                NEURAL_TILE_LOAD(2, packed + static_cast<std::int64_t>(b) * kTileBytes, 64);
                NEURAL_TILE_DPBF16PS(0, 1, 2);
            }
            NEURAL_TILE_STORE(0, g.c, 64);
            const int m = g.n - 16 * t < 16 ? g.n - 16 * t : 16;
            for (int i = 0; i < m; ++i) {
                float* o = g.out + (16 * t + i) * g.ld + (r0 - g.row0);
                for (int r = 0; r < kRows; ++r) {
                    const float v = g.c[16 * r + i];
                    o[r] = v != v ? canonical_nan() : v;  // NaN: the one all variants store
                }
            }
        }
    }
    NEURAL_TILE_RELEASE();
}
