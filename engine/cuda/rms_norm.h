// y = w * x / sqrt(mean(x^2) + eps) for one token (x, y fp32 [n], w bf16 [n]). One block, a
// fixed reduction order. Host entry point only.
#pragma once

#include <cstdint>

#include <cuda.h>

namespace neural::cuda {

// mirror (may be null): a second output for y, e.g. host-mapped memory the CPU reads.
void rms_norm(const float* x, const std::uint16_t* w, float eps, int n, float* y, float* mirror,
              CUstream stream);

// Prefill: `rows` rows of n values (row stride n) at once, y fp32 [rows, n]; each row bit for
// bit what rms_norm gives.
void rms_norm_rows(const float* x, const std::uint16_t* w, float eps, int n, int rows, float* y,
                   CUstream stream);

}  // namespace neural::cuda
