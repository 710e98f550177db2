#include "cuda/common.cuh"
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
    const uint4* wr = reinterpret_cast<const uint4*>(w + static_cast<std::size_t>(row) * cols);
    float acc = 0.0f;
    for (int c8 = lane; c8 < cols / 8; c8 += 32) {
        const uint4 v = __ldg(wr + c8);
        const float* xv = xs + 8 * c8;
        acc += bf16_lo(v.x) * xv[0] + bf16_hi(v.x) * xv[1] + bf16_lo(v.y) * xv[2] +
               bf16_hi(v.y) * xv[3] + bf16_lo(v.z) * xv[4] + bf16_hi(v.z) * xv[5] +
               bf16_lo(v.w) * xv[6] + bf16_hi(v.w) * xv[7];
    }
    acc = warp_sum(acc);
    if (lane == 0) {
        const float r = acc + (bias != nullptr ? bf16_bits_to_float(bias[row]) : 0.0f);
        y[row] = accumulate ? y[row] + r : r;
    }
}

}  // namespace

void gemv_bf16(const std::uint16_t* w, const std::uint16_t* bias, const float* x, float* y,
               int rows, int cols, bool accumulate, cudaStream_t stream) {
    const int blocks = (rows + kWarps - 1) / kWarps;
    gemv_bf16_kernel<<<blocks, kWarps * 32, static_cast<std::size_t>(cols) * sizeof(float),
                       stream>>>(w, bias, x, y, rows, cols, accumulate);
}

}  // namespace neural::cuda
