#include "cuda/decode_steps.cuh"
#include "cuda/gemv_bf16.cuh"

namespace neural::cuda {

namespace {

constexpr int kWarps = 8;

__global__ void gemv_bf16_kernel(const std::uint16_t* __restrict__ w,
                                 const std::uint16_t* __restrict__ bias,
                                 const float* __restrict__ x, float* __restrict__ y, int rows,
                                 int cols, bool accumulate) {
    extern __shared__ float xs[];  // [cols]
    for (int i = threadIdx.x; i < cols; i += blockDim.x) xs[i] = x[i];
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int row = blockIdx.x * kWarps + warp;
    if (row >= rows) return;
    const float r = bf16_gemv_row(w, bias, row, xs, cols);
    if (lane == 0) y[row] = accumulate ? y[row] + r : r;
}

}  // namespace

void gemv_bf16(const std::uint16_t* w, const std::uint16_t* bias, const float* x, float* y,
               int rows, int cols, bool accumulate, cudaStream_t stream) {
    const int blocks = (rows + kWarps - 1) / kWarps;
    gemv_bf16_kernel<<<blocks, kWarps * 32, static_cast<std::size_t>(cols) * sizeof(float),
                       stream>>>(w, bias, x, y, rows, cols, accumulate);
}

}  // namespace neural::cuda
