// Which implementation a prefill kernel runs: the optimized one (fast, the default) or the plain
// reference it is tested against. The GEMM tile's two paths give the same bits (gemm_tile.cuh);
// prefill attention's agree within its tolerance (attention_prefill.h). neural_cuda_bench
// times both. Plain C++: host code passes it.
#pragma once

namespace neural::cuda {

enum class KernelPath { fast, reference };

// The GEMM tile's width (gemm_tile.cuh): output columns per block. automatic picks 128 where
// the launch still fills the GPU, else 64; the width never changes a result (tests compare
// them), so tests and neural_cuda_bench may force either.
enum class TileWidth { automatic, n64, n128 };

}  // namespace neural::cuda
