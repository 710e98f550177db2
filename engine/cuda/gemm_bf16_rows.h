// Prefill's dense projections: Y[m, n] (+)= sum_k X[m, k] W[n, k] + bias[n] for M token rows at
// once, on tensor cores (gemm_tile.cuh): X fp32 [M, K] (row stride K), W bf16 [N, K] (the
// checkpoint's layout), bias bf16 [N] or null, Y fp32 (row stride ldy). K must be a multiple of
// 32 and X's rows 16-byte aligned. Host entry point only.
#pragma once

#include <cstdint>

#include <cuda.h>

#include "cuda/kernel_path.h"

namespace neural::cuda {

void gemm_bf16_rows(const float* x, int m, int k, const std::uint16_t* w, const std::uint16_t* bias,
                    int n, float* y, int ldy, bool accumulate, CUstream stream,
                    KernelPath path = KernelPath::fast, TileWidth width = TileWidth::automatic);

}  // namespace neural::cuda
