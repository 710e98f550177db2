// The task body of the dense kernels, compiled once per ISA: dense_scalar.cpp, dense_avx2.cpp,
// dense_avx512.cpp and dense_avx512bf16.cpp each define, inside an anonymous namespace,
//
//   struct Isa {
//       // res[r * NT + t] = the dense_kernel.h lane-tree dot of weight row w[r] (cols bf16,
//       // unaligned, no padding) and operand x[t]: its bf16 high part at x[t], its low part at
//       // x[t] + lo (each zero-padded to a multiple of 32).
//       template <int NR, int NT>
//       static void dot(const std::uint8_t* const* w, const std::uint16_t* const* x,
//                       std::int64_t lo, std::int64_t cols, float* res);
//   };
//
// and then include this file in the same anonymous namespace (internal linkage throughout).

template <int NR, int NT>
inline void dot_nt(int nt, const std::uint8_t* const* w, const std::uint16_t* const* x,
                   std::int64_t lo, std::int64_t cols, float* res) {
    if constexpr (NT >= 1) {
        if (nt == NT) {
            Isa::template dot<NR, NT>(w, x, lo, cols, res);
            return;
        }
        dot_nt<NR, NT - 1>(nt, w, x, lo, cols, res);
    }
}

template <int NR>
inline void dot_nr(int nr, int nt, const std::uint8_t* const* w, const std::uint16_t* const* x,
                   std::int64_t lo, std::int64_t cols, float* res) {
    if constexpr (NR >= 1) {
        if (nr == NR) {
            dot_nt<NR, 4>(nt, w, x, lo, cols, res);
            return;
        }
        dot_nr<NR - 1>(nr, nt, w, x, lo, cols, res);
    }
}

// Tokens per tile of a prompt call: a tile's operands (32 x 4 bytes per column: ~370 KB for a
// gpt-oss row of 2,880) stay in L2 while the task's rows pass over them, and the task's rows
// (a few hundred KB) stay in L2 across its tiles. Without tiles every group of 4 rows streamed
// all of a 512-token block's operands (~6 MB) again from L3. A multiple of 4 (the micro-kernel's
// token group), so the arithmetic per output is the same bits with or without tiles.
constexpr std::int64_t kTokenTile = 32;

// Task = rows_per_task rows of one output: per tile of tokens, 4 rows at a time against every
// token of the tile.
void dense_task(void* ctx, std::int64_t task, std::int32_t) {
    const Job& job = *static_cast<const Job*>(ctx);
    const auto [outp, r0, r1] = task_rows(job, task);
    const Output& out = *outp;
    for (std::int64_t tile = 0; tile < job.tokens; tile += kTokenTile) {
        const std::int64_t tile_end =
            job.tokens - tile < kTokenTile ? job.tokens : tile + kTokenTile;
        for (std::int64_t r = r0; r < r1; r += 4) {
            const int nr = r1 - r < 4 ? static_cast<int>(r1 - r) : 4;
            const std::uint8_t* w[4];
            float b[4];
            for (int i = 0; i < nr; ++i) {
                w[i] = out.w + 2 * (r + i) * job.cols;
                b[i] = bf16_at(out.bias, r + i);
            }
            for (std::int64_t t0 = tile; t0 < tile_end; t0 += 4) {
                const int nt = tile_end - t0 < 4 ? static_cast<int>(tile_end - t0) : 4;
                const std::uint16_t* x[4];
                for (int t = 0; t < nt; ++t) x[t] = job.x + (t0 + t) * 2 * job.padded;
                float res[16] = {};
                dot_nr<4>(nr, nt, w, x, job.padded, job.cols, res);
                for (int i = 0; i < nr; ++i) {
                    for (int t = 0; t < nt; ++t) {
                        out.y[(t0 + t) * out.y_stride + r + i] = res[i * nt + t] + b[i];
                    }
                }
            }
        }
    }
}
