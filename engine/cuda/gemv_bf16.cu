#include "cuda/decode_steps.cuh"
#include "cuda/gemv_bf16.h"

namespace neural::cuda {

namespace gemv_bf16_kernels {

constexpr int kWarps = shape::kGemvWarps;

extern "C" __global__ void gemv_bf16_kernel(const std::uint16_t* __restrict__ w,
                                            const std::uint16_t* __restrict__ bias,
                                            const float* __restrict__ x, float* __restrict__ y,
                                            int rows, int cols, bool accumulate) {
    extern __shared__ float xs[];  // [cols]
    for (int i = threadIdx.x; i < cols; i += blockDim.x) xs[i] = x[i];
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row = blockIdx.x * kWarps + warp;
    if (row >= rows) return;
    const float r = bf16_gemv_row(w, bias, row, xs, cols);
    if (lane == 0) y[row] = accumulate ? y[row] + r : r;
}

}  // namespace gemv_bf16_kernels

}  // namespace neural::cuda
