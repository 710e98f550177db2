// The plain fp32 attention of the reference forward pass and its fixed-order dot product: the
// attention kernel's `reference` path (attention_kernel.h) and the CPU and CUDA attention tests'
// reference. cpu/ops.h, the reference pass's other building blocks, includes this.
#pragma once

#include <cstdint>

namespace neural::cpu {

// One query head against n keys/values (rows `stride` floats apart, head_dim d each) with a
// sink: softmax over [scores..., sink] with the sink column dropped afterwards, so the weights
// over real keys sum to less than 1. out[d] = sum_j p_j v_j.
void attend_with_sink(const float* q, const float* k, const float* v, std::int64_t stride,
                      std::int64_t n, int d, float sink, float scale, float* out);

// fp32 dot product with a fixed 8-way partial-sum order (vectorizes without -ffast-math).
float dot(const float* a, const float* b, std::int64_t n);

}  // namespace neural::cpu
