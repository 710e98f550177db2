// Which implementation a prefill kernel runs: the optimized one (fast, the default) or the plain
// reference it is tested against. The GEMM tile's two paths give the same bits (gemm_tile.cuh);
// prefill attention's agree within its tolerance (attention_prefill.cuh). neural_cuda_bench
// times both. Plain C++: host code passes it.
#pragma once

namespace neural::cuda {

enum class KernelPath { fast, reference };

}  // namespace neural::cuda
