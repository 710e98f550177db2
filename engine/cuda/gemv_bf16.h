// y = W x (+ b) for a bf16 matrix W [rows, cols] (nn.Linear layout [out, in]) and fp32 x [cols]:
// the projections of the dense core (QKV, output, router, lm_head). One warp per row, fp32
// accumulation in a fixed order, so results are deterministic. cols must be a multiple of 8 and
// W 16-byte aligned (the backend's uploads are). Host entry point only.
#pragma once

#include <cstdint>

#include <cuda.h>

namespace neural::cuda {

// accumulate: y += W x + b instead of y = W x + b. bias may be null.
void gemv_bf16(const std::uint16_t* w, const std::uint16_t* bias, const float* x, float* y,
               int rows, int cols, bool accumulate, CUstream stream);

}  // namespace neural::cuda
