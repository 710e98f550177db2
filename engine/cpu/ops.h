// Plain fp32 building blocks of the reference forward pass. Weights are bf16 / MXFP4 views into
// the mapped checkpoint; activations are fp32, row-major [tokens, features].
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/weights.h"

namespace neural::cpu {

// y[i] = w[i] * x[i] / sqrt(mean(x^2) + eps), for each of `tokens` rows of width w.cols.
void rms_norm(const float* x, const Bf16View& w, float eps, std::int64_t tokens, float* y);

// y[t][r] = sum_c W[r][c] * x[t][c] (+ b[r]); W [rows, cols] bf16, x [tokens, cols],
// y [tokens, rows]. Parallel over rows; each output summed in a fixed order.
void matmul_bf16(const Bf16View& w, const Bf16View* bias, const float* x, std::int64_t tokens,
                 float* y);

// One query head against n keys/values (rows `stride` floats apart, head_dim d each) with a
// sink: softmax over [scores..., sink] with the sink column dropped afterwards, so the weights
// over real keys sum to less than 1. out[d] = sum_j p_j v_j.
void attend_with_sink(const float* q, const float* k, const float* v, std::int64_t stride,
                      std::int64_t n, int d, float sink, float scale, float* out);

// fp32 dot product with a fixed 8-way partial-sum order (vectorizes without -ffast-math).
float dot(const float* a, const float* b, std::int64_t n);

}  // namespace neural::cpu
