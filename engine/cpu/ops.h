// Plain fp32 building blocks of the reference forward pass. Weights are bf16 / MXFP4 views into
// the mapped checkpoint; activations are fp32, row-major [tokens, features]. The attention and
// its dot product stand with the kernels (cpu/kernels/attention_reference.h), whose reference
// path they are.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cpu/kernels/attention_reference.h"  // attend_with_sink, dot
#include "model/weights.h"

namespace neural::cpu {

// y[i] = w[i] * x[i] / sqrt(mean(x^2) + eps), for each of `tokens` rows of width w.cols.
void rms_norm(const float* x, const Bf16View& w, float eps, std::int64_t tokens, float* y);

// y[t][r] = sum_c W[r][c] * x[t][c] (+ b[r]); W [rows, cols] bf16, x [tokens, cols],
// y [tokens, rows]. Parallel over rows; each output summed in a fixed order.
void matmul_bf16(const Bf16View& w, const Bf16View* bias, const float* x, std::int64_t tokens,
                 float* y);

}  // namespace neural::cpu
