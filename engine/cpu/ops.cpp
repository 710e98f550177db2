#include "cpu/ops.h"

#include <algorithm>
#include <cmath>

#include "cpu/parallel.h"
#include "model/bf16.h"

namespace neural::cpu {

void rms_norm(const float* x, const Bf16View& w, float eps, std::int64_t tokens, float* y) {
    const std::int64_t n = w.cols;
    for (std::int64_t t = 0; t < tokens; ++t) {
        const float* xr = x + t * n;
        double ss = 0.0;
        for (std::int64_t i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
        const float inv = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(n)) + eps);
        for (std::int64_t i = 0; i < n; ++i) y[t * n + i] = w.at(i) * (xr[i] * inv);
    }
}

void matmul_bf16(const Bf16View& w, const Bf16View* bias, const float* x, std::int64_t tokens,
                 float* y) {
    const std::int64_t rows = w.rows, cols = w.cols;
    // Rows per task: enough work to amortize scheduling, small enough to balance.
    const std::int64_t grain = rows >= 4096 ? 64 : 8;
    parallel_for(rows, grain, [&](std::int64_t r0, std::int64_t r1) {
        std::vector<float> wrow(static_cast<size_t>(cols));
        for (std::int64_t r = r0; r < r1; ++r) {
            const std::uint8_t* src = w.row(r);
            for (std::int64_t c = 0; c < cols; ++c)
                wrow[static_cast<size_t>(c)] = load_bf16(src, c);
            const float b = bias != nullptr && bias->data != nullptr ? bias->at(r) : 0.0f;
            for (std::int64_t t = 0; t < tokens; ++t) {
                y[t * rows + r] = dot(wrow.data(), x + t * cols, cols) + b;
            }
        }
    });
}

}  // namespace neural::cpu
