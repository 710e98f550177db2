// The task body of the int8 dense kernels, compiled once per ISA: dense_int8_scalar.cpp,
// dense_int8_avx2.cpp and dense_int8_avx512vnni.cpp each define, inside an anonymous namespace,
//
//   struct Isa {
//       // res[r * NT + t] = the dense_int8.h lane-tree dot of row r of group `g` (4 rows:
//       // chunk-major quants, then the scales at g + 4 * padded) and token t's operand
//       // (xq[t]: padded bytes; xd[t]: 16 floats per chunk).
//       template <int NT>
//       static void group(const std::uint8_t* g, std::int64_t padded, std::int64_t chunks,
//                         const std::int8_t* const* xq, const float* const* xd, float* res);
//   };
//
// and then include this file in the same anonymous namespace (internal linkage throughout).

template <int NT>
inline void group_nt(int nt, const std::uint8_t* g, std::int64_t padded, std::int64_t chunks,
                     const std::int8_t* const* xq, const float* const* xd, float* res) {
    if constexpr (NT >= 1) {
        if (nt == NT) {
            Isa::template group<NT>(g, padded, chunks, xq, xd, res);
            return;
        }
        group_nt<NT - 1>(nt, g, padded, chunks, xq, xd, res);
    }
}

// Tokens per tile of a prompt call (a multiple of 4, the micro-kernel's token group: the same
// bits with or without tiles): a tile's quantized operands stay in L2 while the task's groups
// pass over them, instead of every group streaming a whole prompt block's operands from L3.
constexpr std::int64_t kTokenTile = 32;

// Task = a run of groups of one output: per tile of tokens, each group of 4 rows against every
// token of the tile, 4 tokens at a time (the group's bytes stay in L1 while the tokens pass).
void int8_task(void* ctx, std::int64_t task, std::int32_t) {
    const Job& job = *static_cast<const Job*>(ctx);
    int o = 0;
    while (o + 1 < job.n_outputs && job.out[o + 1].first_task <= task) ++o;
    const Output& out = job.out[o];
    const std::int64_t g0 = (task - out.first_task) * out.groups_per_task;
    const std::int64_t g1 =
        g0 + out.groups_per_task < out.groups ? g0 + out.groups_per_task : out.groups;
    for (std::int64_t tile = 0; tile < job.tokens; tile += kTokenTile) {
        const std::int64_t tile_end =
            job.tokens - tile < kTokenTile ? job.tokens : tile + kTokenTile;
        for (std::int64_t g = g0; g < g1; ++g) {
            const std::uint8_t* gw = out.w + g * out.group_bytes;
            const std::int64_t r0 = 4 * g;
            const int nr = out.rows - r0 < 4 ? static_cast<int>(out.rows - r0) : 4;
            float b[4];
            for (int i = 0; i < nr; ++i) b[i] = bf16_at(out.bias, r0 + i);
            for (std::int64_t t0 = tile; t0 < tile_end; t0 += 4) {
                const int nt = tile_end - t0 < 4 ? static_cast<int>(tile_end - t0) : 4;
                const std::int8_t* xq[4];
                const float* xd[4];
                for (int t = 0; t < nt; ++t) {
                    xq[t] = job.xq + (t0 + t) * job.xq_stride;
                    xd[t] = job.xd + (t0 + t) * job.xd_stride;
                }
                float res[16] = {};
                group_nt<4>(nt, gw, job.padded, job.chunks, xq, xd, res);
                for (int i = 0; i < nr; ++i) {
                    for (int t = 0; t < nt; ++t) {
                        out.y[(t0 + t) * out.y_stride + r0 + i] = res[i * nt + t] + b[i];
                    }
                }
            }
        }
    }
}
