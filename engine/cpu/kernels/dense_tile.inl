// The task body of the dense kernels' tile-order SIMD variants (dense_kernel.h "tile order":
// the AMX variant's bits without tiles), included inside the anonymous namespace of
// dense_tile_avx512.cpp and dense_tile_avx2.cpp after each defines
//
//   struct Isa {
//       // Rows r0 .. r0 + nr - 1 (nr <= 32) of w into bv in the AMX variant's B-tile layout
//       // (dense_amx.inl repack_rows: per chunk c and half g, 16 lines k of 16 dwords n =
//       // columns 32c + 2k, 32c + 2k + 1 of row 16g + n), zero past nr rows and past cols.
//       static void repack(const std::uint8_t* w, std::int64_t cols, std::int64_t r0, int nr,
//                          std::int64_t chunks, std::uint32_t* bv);
//       // The 16 rows of half `h` (bv + 256 g) against M tokens' operand planes p[q]:
//       // res[q * kGroupRows + i] = the tile-order sum of row i and token q.
//       template <int M>
//       static void tokens(const std::uint32_t* h, const float* const* p, std::int64_t chunks,
//                          float* res);
//       static constexpr int kTokens;  // tokens per call of tokens<M> (M <= kTokens)
//       // Whether tokens() computes both halves of a group at once (res[q * kGroupRows + i],
//       // i < 32; repack() then fills both halves): called for h = bv only.
//       static constexpr bool kBothHalves;
//   };
//
// Per (token, row) the sum is the tiles': per 32-column chunk two lane sums of the high parts
// (even columns, odd columns: one fma per column, in column order, from +0), added to the
// output's sum, then the low parts' two lane sums likewise; MXCSR's FTZ, DAZ and round to
// nearest set for the sums (the tiles' rounding and flushing) and the caller's restored for the
// bias add, which the AMX variant does in plain code too.

constexpr int kGroupRows = 32;   // rows per repacked group (the AMX variant's two B tiles)
constexpr int kTileTokens = 32;  // tokens per tile: res stays small, the planes in L2
constexpr unsigned kGemmCsr = 0x1F80u | 0x8040u;  // masked, nearest even, FTZ (15), DAZ (6)

// Tokens t0 .. t0 + n - 1 of half h in groups of Isa::kTokens, the last one smaller.
template <int M>
inline void tokens_rest(int n, const std::uint32_t* h, const float* const* p, std::int64_t chunks,
                        float* res) {
    if constexpr (M >= 1) {
        if (n == M) {
            Isa::template tokens<M>(h, p, chunks, res);
            return;
        }
        tokens_rest<M - 1>(n, h, p, chunks, res);
    }
}

void tile_task(void* ctx, std::int64_t task, std::int32_t worker) {
    const Job& job = *static_cast<const Job*>(ctx);
    const auto [outp, r0, r1] = task_rows(job, task);
    const Output& out = *outp;
    const std::int64_t chunks = job.padded / 32;
    const std::int64_t ps = plane_floats(job.padded);
    std::uint32_t* bv = job.scratch + worker * job.scratch_dwords;
    alignas(64) float res[kTileTokens * kGroupRows];
    const unsigned csr = _mm_getcsr();
    for (std::int64_t r = r0; r < r1; r += kGroupRows) {
        const int nr = r1 - r < kGroupRows ? static_cast<int>(r1 - r) : kGroupRows;
        Isa::repack(out.w, job.cols, r, nr, chunks, bv);
        float b[kGroupRows];
        for (int i = 0; i < nr; ++i) b[i] = bf16_at(out.bias, r + i);
        for (std::int64_t t0 = 0; t0 < job.tokens; t0 += kTileTokens) {
            const int nt =
                job.tokens - t0 < kTileTokens ? static_cast<int>(job.tokens - t0) : kTileTokens;
            _mm_setcsr(kGemmCsr);
            for (int g = 0; g * 16 < nr && (g == 0 || !Isa::kBothHalves); ++g) {
                for (int q0 = 0; q0 < nt; q0 += Isa::kTokens) {
                    const int m = nt - q0 < Isa::kTokens ? nt - q0 : Isa::kTokens;
                    const float* p[Isa::kTokens];
                    for (int q = 0; q < m; ++q) p[q] = job.planes + (t0 + q0 + q) * ps;
                    tokens_rest<Isa::kTokens>(m, bv + 256 * g, p, chunks,
                                              res + q0 * kGroupRows + 16 * g);
                }
            }
            _mm_setcsr(csr);
            for (int t = 0; t < nt; ++t) {
                float* y = out.y + (t0 + t) * out.y_stride + r;
                const float* s = res + t * kGroupRows;
                for (int i = 0; i < nr; ++i) {
                    const float v = s[i] + b[i];
                    y[i] = v != v ? canonical_nan() : v;
                }
            }
        }
    }
}
