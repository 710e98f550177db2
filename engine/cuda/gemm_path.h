// Which implementation of the prefill GEMM tile (gemm_tile.cuh) a launch runs: the pipelined
// one (fast, the default) or the plain reference one. Both give the same bits; the reference
// path is there for tests and neural_cuda_bench. Plain C++: host code passes it.
#pragma once

namespace neural::cuda {

enum class GemmPath { fast, reference };

}  // namespace neural::cuda
