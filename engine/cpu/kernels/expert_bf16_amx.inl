// The bf16 expert GEMM on AMX tiles (expert_bf16.h), included inside the anonymous namespace of
// expert_bf16_amx.cpp (hardware tiles, AVX-512 decoding) and expert_bf16_amx_emulated.cpp
// (amx_tiles.inl's emulation, scalar decoding) after amx_tiles.inl and a definition of
// DECODE_ROWS(rec, p, row0, out) (the rows layout, expert_bf16_impl.h) and
// PACK_TOKENS(x, ldx, n, i0, G, out) (16 tokens into the B layout). prepare_amx packs the
// activations (once per expert operand, bf16_expert_prepare); gemm_amx_tiles runs a range of
// rows against them: up to kGroups groups of 16 rows are decoded at a time and every token tile
// runs over them: tiles 0..3 = C (16 rows x 16 tokens, fp32, one per group), per 32-column
// block tile 4 = B (the tokens' packed activations, loaded once for all groups) and tiles 5 / 6
// = A (a group's 32 weights per row, alternating so a load need not wait for the previous
// tdpbf16ps), one tdpbf16ps per group. Independent C tiles keep several tdpbf16ps in flight (one
// C tile's chain is latency-bound); each output's sequence of operations is the same. The tile
// configuration is loaded and released within the call, so no tile state outlives it.

constexpr int kGroups = 4;  // 16-row groups decoded and multiplied together

template <int NG>
void amx_groups(const Gemm& g, std::int64_t r0, int G, int tiles) {
    for (int t = 0; t < tiles; ++t) {
        const std::uint8_t* packed = g.x + static_cast<std::int64_t>(t) * G * kTileBytes;
        NEURAL_TILE_ZERO(0);
        if constexpr (NG > 1) NEURAL_TILE_ZERO(1);
        if constexpr (NG > 2) NEURAL_TILE_ZERO(2);
        if constexpr (NG > 3) NEURAL_TILE_ZERO(3);
        for (int b = 0; b < G; ++b) {
            const std::uint8_t* w = g.weights + static_cast<std::int64_t>(b) * kTileBytes;
            const std::int64_t group_bytes = static_cast<std::int64_t>(G) * kTileBytes;
            NEURAL_TILE_LOAD(4, packed + static_cast<std::int64_t>(b) * kTileBytes, 64);
            NEURAL_TILE_LOAD(5, w, 64);
            NEURAL_TILE_DPBF16PS(0, 5, 4);
            if constexpr (NG > 1) {
                NEURAL_TILE_LOAD(6, w + group_bytes, 64);
                NEURAL_TILE_DPBF16PS(1, 6, 4);
            }
            if constexpr (NG > 2) {
                NEURAL_TILE_LOAD(5, w + 2 * group_bytes, 64);
                NEURAL_TILE_DPBF16PS(2, 5, 4);
            }
            if constexpr (NG > 3) {
                NEURAL_TILE_LOAD(6, w + 3 * group_bytes, 64);
                NEURAL_TILE_DPBF16PS(3, 6, 4);
            }
        }
        const int m = g.n - 16 * t < 16 ? g.n - 16 * t : 16;
        for (int q = 0; q < NG; ++q) {
            switch (q) {
                case 0:
                    NEURAL_TILE_STORE(0, g.c, 64);
                    break;
                case 1:
                    NEURAL_TILE_STORE(1, g.c, 64);
                    break;
                case 2:
                    NEURAL_TILE_STORE(2, g.c, 64);
                    break;
                default:
                    NEURAL_TILE_STORE(3, g.c, 64);
                    break;
            }
            for (int i = 0; i < m; ++i) {
                float* o = g.out + (16 * t + i) * g.ld + (r0 - g.row0) + 16 * q;
                for (int r = 0; r < kRows; ++r) {
                    const float v = g.c[16 * r + i];
                    o[r] = v != v ? canonical_nan() : v;  // NaN: the one all variants store
                }
            }
        }
    }
}

void prepare_amx(const Prepare& p) {
    for (int t = 0; t < (p.n + 15) / 16; ++t)
        PACK_TOKENS(p.x, p.ldx, p.n, 16 * t, p.G,
                    p.out + static_cast<std::int64_t>(t) * p.G * kTileBytes);
}

void gemm_amx_tiles(const Gemm& g) {
    const int G = g.rec.blocks[g.p];
    const int tiles = (g.n + 15) / 16;
    TileConfig cfg{};
    cfg.palette = 1;
    for (int t = 0; t < 7; ++t) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    NEURAL_TILE_CONFIG(&cfg);
    for (std::int64_t r0 = g.row0; r0 < g.row0 + g.rows; r0 += kGroups * kRows) {
        const std::int64_t left = (g.row0 + g.rows - r0) / kRows;
        const int ng = left < kGroups ? static_cast<int>(left) : kGroups;
        for (int q = 0; q < ng; ++q)
            DECODE_ROWS(g.rec, g.p, r0 + kRows * q,
                        g.weights + static_cast<std::int64_t>(q) * G * kTileBytes);
        switch (ng) {
            case 1:
                amx_groups<1>(g, r0, G, tiles);
                break;
            case 2:
                amx_groups<2>(g, r0, G, tiles);
                break;
            case 3:
                amx_groups<3>(g, r0, G, tiles);
                break;
            default:
                amx_groups<4>(g, r0, G, tiles);
                break;
        }
    }
    NEURAL_TILE_RELEASE();
}
