// The dense kernels' tile order (dense_kernel.h) written out one output at a time: the reference
// the AMX variant (hardware and emulated tiles) and the AVX2 and AVX-512F tile-order variants
// are tested against bit for bit, and the prompt variant of CPUs without AVX2. Read straight
// from the matrix and the bf16 operand (no repacking), with the tiles' FTZ/DAZ in software and
// fmas without the C library (exact_fma.h), so that it holds on any CPU and compiler mode.
#include <math.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "cpu/kernels/dense_impl.h"
#include "cpu/kernels/exact_fma.h"

namespace neural::cpu::dense_detail {
namespace {

// Row `w` (cols bf16) against one token's operand (high parts at x, low parts at x + padded):
// per 32-column chunk, the high parts' two lane sums (even columns, odd columns: one fma each
// per column, zero weights and operand past cols as the tiles' padding), added to the sum, then
// the low parts' likewise.
float tile_dot(const std::uint8_t* w, const std::uint16_t* x, std::int64_t cols,
               std::int64_t padded) {
    float acc = 0.0f;
    for (std::int64_t c = 0; c < padded; c += 32) {
        for (int part = 0; part < 2; ++part) {
            const std::uint16_t* xp = x + part * padded;
            float lane[2] = {0.0f, 0.0f};
            for (int k = 0; k < 32; ++k) {
                const std::int64_t col = c + k;
                std::uint16_t wb = 0;
                if (col < cols) std::memcpy(&wb, w + 2 * col, 2);
                lane[k & 1] = ftz(exact_fmaf(daz_bf16(wb), daz_bf16(xp[col]), lane[k & 1]));
            }
            acc = ftz(acc + ftz(lane[0] + lane[1]));
        }
    }
    return acc;
}

void tile_task(void* ctx, std::int64_t task, std::int32_t) {
    const Job& job = *static_cast<const Job*>(ctx);
    const auto [outp, r0, r1] = task_rows(job, task);
    const Output& out = *outp;
    for (std::int64_t r = r0; r < r1; ++r) {
        const std::uint8_t* w = out.w + 2 * r * job.cols;
        const float b = bf16_at(out.bias, r);
        for (std::int64_t t = 0; t < job.tokens; ++t) {
            const float y = tile_dot(w, job.x + t * 2 * job.padded, job.cols, job.padded) + b;
            out.y[t * out.y_stride + r] = std::isnan(y) ? canonical_nan() : y;
        }
    }
}

}  // namespace

TaskFn task_tile_scalar() { return &tile_task; }

}  // namespace neural::cpu::dense_detail
