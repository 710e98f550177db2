// Prefill's experts: one expert over many tokens on tensor cores (gemm_tile.cuh), from a raw
// expert record in VRAM (a resident slot or a scratch slot the record was staged into):
//   act[m] = swiglu(W1 h[token_m] + b1)           (fp32 [count, I])
//   acc[token_m] += gate[entry_m] * (W2 act[m] + b2)  (fp32 [tokens, H])
// entries[m] = token * k + choice (the router's flat index). A token appears at most once per
// expert, and launches on one stream run in order, so acc is accumulated in the order the host
// issues experts (expert index order): deterministic, and the same whether the record came from
// a slot or was staged. shape as expert_mxfp4.cuh; h fp32 [tokens, H]; act holds >= count rows.
// Host entry point only.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "cuda/expert_mxfp4.cuh"
#include "cuda/kernel_path.h"

namespace neural::cuda {

void expert_gemm(const std::uint8_t* record, int expert, const ExpertShape& shape,
                 const int* entries, int count, const float* h, const float* gate,
                 const std::uint16_t* gate_up_bias, const std::uint16_t* down_bias,
                 float* act, float* acc, cudaStream_t stream, KernelPath path = KernelPath::fast);

}  // namespace neural::cuda
