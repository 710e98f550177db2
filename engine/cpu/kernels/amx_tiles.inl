// AMX tiles for the kernels' AMX variants (prompt_amx.inl, dense_amx.inl), included inside the
// anonymous namespace of each AMX file: the 64-byte tile configuration and the tile
// operations with literal tile numbers,
//   NEURAL_TILE_CONFIG(const TileConfig*)   NEURAL_TILE_RELEASE()
//   NEURAL_TILE_LOAD(t, base, stride)       NEURAL_TILE_STORE(t, base, stride)
//   NEURAL_TILE_ZERO(t)
//   NEURAL_TILE_DPBUSD(c, a, b)    c (int32) += a (u8) . b (s8), groups of 4 bytes
//   NEURAL_TILE_DPBF16PS(c, a, b)  c (fp32) += a (bf16) . b (bf16), pairs
// on the hardware (the file is compiled with -mamx-tile and -mamx-int8 / -mamx-bf16), or, where
// the file defines NEURAL_AMX_EMULATED first, on eight 1 KB tiles per thread emulated in plain
// C++ from the instructions' definitions (Intel SDM: LDTILECFG, TILELOADD, TILESTORED,
// TILEZERO, TDPBUSD; TDPBF16PS as the hardware computes it, below), so that CPUs without AMX
// test the AMX code's layouts, strides, padding and bits. The emulation aborts on a shape the
// hardware would fault on.

// The tile configuration of palette 1 (LDTILECFG's 64-byte operand).
struct alignas(64) TileConfig {
    std::uint8_t palette;
    std::uint8_t start_row;
    std::uint8_t reserved[14];
    std::uint16_t colsb[16];
    std::uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64);

#ifndef NEURAL_AMX_EMULATED

#define NEURAL_TILE_CONFIG(cfg) _tile_loadconfig(cfg)
#define NEURAL_TILE_RELEASE() _tile_release()
#define NEURAL_TILE_LOAD(t, base, stride) _tile_loadd(t, base, stride)
#define NEURAL_TILE_STORE(t, base, stride) _tile_stored(t, base, stride)
#define NEURAL_TILE_ZERO(t) _tile_zero(t)
#define NEURAL_TILE_DPBUSD(c, a, b) _tile_dpbusd(c, a, b)
#define NEURAL_TILE_DPBF16PS(c, a, b) _tile_dpbf16ps(c, a, b)

#else

struct EmulatedTiles {
    std::uint8_t data[8][16 * 64];
    int rows[8] = {};
    int colsb[8] = {};
    bool configured = false;
};
thread_local EmulatedTiles emulated_tiles;  // trivially destructible (plain arrays)

[[noreturn]] inline void tile_fault(const char* what, int t) {
    std::fprintf(stderr, "emulated AMX: %s (tile %d)\n", what, t);
    std::abort();
}

inline void tile_check(int t) {
    const EmulatedTiles& s = emulated_tiles;
    if (!s.configured) tile_fault("tile used before LDTILECFG", t);
    if (t < 0 || t >= 8 || s.rows[t] == 0) tile_fault("tile not configured", t);
}

inline void emu_config(const TileConfig* c) {
    EmulatedTiles& s = emulated_tiles;
    if (c->palette != 1) tile_fault("palette is not 1", -1);
    std::memset(s.data, 0, sizeof s.data);
    for (int t = 0; t < 8; ++t) {
        s.colsb[t] = c->colsb[t];
        s.rows[t] = c->rows[t];
        if (s.rows[t] > 16 || s.colsb[t] > 64 || s.colsb[t] % 4 != 0)
            tile_fault("shape beyond 16 rows x 64 bytes", t);
    }
    s.configured = true;
}
inline void emu_release() { emulated_tiles.configured = false; }
inline void emu_load(int t, const void* base, std::int64_t stride) {
    tile_check(t);
    EmulatedTiles& s = emulated_tiles;
    for (int r = 0; r < s.rows[t]; ++r) {
        std::memcpy(s.data[t] + 64 * r, static_cast<const std::uint8_t*>(base) + r * stride,
                    static_cast<std::size_t>(s.colsb[t]));
    }
}
inline void emu_store(int t, void* base, std::int64_t stride) {
    tile_check(t);
    EmulatedTiles& s = emulated_tiles;
    for (int r = 0; r < s.rows[t]; ++r) {
        std::memcpy(static_cast<std::uint8_t*>(base) + r * stride, s.data[t] + 64 * r,
                    static_cast<std::size_t>(s.colsb[t]));
    }
}
inline void emu_zero(int t) {
    tile_check(t);
    std::memset(emulated_tiles.data[t], 0, sizeof emulated_tiles.data[t]);
}
// The shapes a dot-product instruction needs: rows(c) = rows(a), rows(b) = colsb(a) / 4,
// colsb(b) = colsb(c).
inline void emu_dp_shapes(int c, int a, int b) {
    tile_check(c);
    tile_check(a);
    tile_check(b);
    const EmulatedTiles& s = emulated_tiles;
    if (s.rows[c] != s.rows[a] || s.rows[b] != s.colsb[a] / 4 || s.colsb[b] != s.colsb[c])
        tile_fault("dot-product shapes do not match", c);
}
// c[m][n] += sum over k < colsb(a) / 4, i < 4 of a[m][4k + i] (u8) x b[k][4n + i] (s8).
inline void emu_dpbusd(int c, int a, int b) {
    emu_dp_shapes(c, a, b);
    EmulatedTiles& s = emulated_tiles;
    const int M = s.rows[a], K = s.colsb[a] / 4, N = s.colsb[c] / 4;
    for (int m = 0; m < M; ++m) {
        for (int n = 0; n < N; ++n) {
            std::int32_t acc;
            std::memcpy(&acc, s.data[c] + 64 * m + 4 * n, 4);
            for (int k = 0; k < K; ++k) {
                for (int i = 0; i < 4; ++i) {
                    acc += static_cast<std::int32_t>(s.data[a][64 * m + 4 * k + i]) *
                           static_cast<std::int32_t>(
                               static_cast<std::int8_t>(s.data[b][64 * k + 4 * n + i]));
                }
            }
            std::memcpy(s.data[c] + 64 * m + 4 * n, &acc, 4);
        }
    }
}
// bf16 bits to fp32 with subnormal inputs as zero (TDPBF16PS's DAZ).
inline float emu_bf16(const std::uint8_t* p) {
    std::uint16_t v;
    std::memcpy(&v, p, 2);
    if ((v & 0x7F80u) == 0) v &= 0x8000u;
    const std::uint32_t bits = static_cast<std::uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
// a * b + c rounded once to fp32 (the C library's fmaf is not correctly rounded everywhere):
// the product is exact in double, the sum rounded to odd in double (its two-sum error decides
// the last bit), and round-to-odd with 53 >= 2 x 24 + 2 bits rounds to fp32 like one rounding.
inline float emu_fmaf(float a, float b, float c) {
    const double p = static_cast<double>(a) * static_cast<double>(b);
    const double cd = c;
    double s = p + cd;
    if (!std::isfinite(s)) return static_cast<float>(s);
    const double bb = s - p;
    const double err = (p - (s - bb)) + (cd - bb);
    std::uint64_t bits;
    std::memcpy(&bits, &s, sizeof bits);
    if (err != 0.0 && (bits & 1u) == 0) {
        bits = (err > 0) == (s > 0) ? bits + 1 : bits - 1;
        std::memcpy(&s, &bits, sizeof s);
    }
    return static_cast<float>(s);
}
inline float emu_ftz(float v) {
    return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v;
}
// What the hardware computes (measured bit for bit on Sapphire Rapids class AMX-BF16 against
// every ordering; the SDM's pseudocode, one product at a time in k order, is not it): per
// c[m][n], two lane sums start at zero, lane i adds a[m][2k + i] b[k][2n + i] for
// k < colsb(a) / 4 in k order, each add one fp32 rounding of the exact product (an fma); then
// c += lane 0 + lane 1. Round to nearest even; subnormal inputs read as zero and subnormal
// results become zero (docs/KERNELS.md "bf16 expert GEMM").
inline void emu_dpbf16ps(int c, int a, int b) {
    emu_dp_shapes(c, a, b);
    EmulatedTiles& s = emulated_tiles;
    const int M = s.rows[a], K = s.colsb[a] / 4, N = s.colsb[c] / 4;
    for (int m = 0; m < M; ++m) {
        for (int n = 0; n < N; ++n) {
            float acc;
            std::memcpy(&acc, s.data[c] + 64 * m + 4 * n, 4);
            float lane[2] = {0.0f, 0.0f};
            for (int k = 0; k < K; ++k) {
                for (int i = 0; i < 2; ++i) {
                    lane[i] =
                        emu_ftz(emu_fmaf(emu_bf16(s.data[a] + 64 * m + 4 * k + 2 * i),
                                         emu_bf16(s.data[b] + 64 * k + 4 * n + 2 * i), lane[i]));
                }
            }
            acc = emu_ftz(acc + emu_ftz(lane[0] + lane[1]));
            std::memcpy(s.data[c] + 64 * m + 4 * n, &acc, 4);
        }
    }
}

#define NEURAL_TILE_CONFIG(cfg) emu_config(cfg)
#define NEURAL_TILE_RELEASE() emu_release()
#define NEURAL_TILE_LOAD(t, base, stride) emu_load(t, base, stride)
#define NEURAL_TILE_STORE(t, base, stride) emu_store(t, base, stride)
#define NEURAL_TILE_ZERO(t) emu_zero(t)
#define NEURAL_TILE_DPBUSD(c, a, b) emu_dpbusd(c, a, b)
#define NEURAL_TILE_DPBF16PS(c, a, b) emu_dpbf16ps(c, a, b)

#endif
