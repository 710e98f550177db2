#include "cpu/ops.h"

#include <algorithm>
#include <cmath>

#include "cpu/parallel.h"
#include "model/bf16.h"

namespace neural::cpu {

float dot(const float* a, const float* b, std::int64_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
    }
    for (; i < n; ++i) acc[i % 8] += a[i] * b[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void attend_with_sink(const float* q, const float* k, const float* v, std::int64_t stride,
                      std::int64_t n, int d, float sink, float scale, float* out) {
    std::vector<float> s(static_cast<size_t>(n));
    float m = sink;
    for (std::int64_t j = 0; j < n; ++j) {
        s[static_cast<size_t>(j)] = dot(q, k + j * stride, d) * scale;
        m = std::max(m, s[static_cast<size_t>(j)]);
    }
    float denom = std::exp(sink - m);
    for (std::int64_t j = 0; j < n; ++j) {
        s[static_cast<size_t>(j)] = std::exp(s[static_cast<size_t>(j)] - m);
        denom += s[static_cast<size_t>(j)];
    }
    std::fill_n(out, d, 0.0f);
    for (std::int64_t j = 0; j < n; ++j) {
        const float p = s[static_cast<size_t>(j)] / denom;
        const float* vj = v + j * stride;
        for (int i = 0; i < d; ++i) out[i] += p * vj[i];
    }
}

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
