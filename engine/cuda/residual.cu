#include <cstddef>

#include "cuda/residual.h"

namespace neural::cuda {

namespace residual_kernels {

extern "C" __global__ void copy_kernel(const float* __restrict__ in, float* __restrict__ x, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = in[i];
}

extern "C" __global__ void add_moe_kernel(float* __restrict__ x, const float* __restrict__ g,
                                          const float* c, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += g[i] + c[i];
}

// One block per row: x[t] += gpu[t] + the CPU's rows of token t (cpu_start[t] .. cpu_start[t+1]
// of cpu_rows, in order), then gpu[t] = 0 for the next layer.
extern "C" __global__ void add_moe_rows_kernel(float* __restrict__ x, float* __restrict__ gpu,
                                               int n, const int* cpu_start, const float* cpu_rows) {
    const std::size_t row = blockIdx.x;
    float* xr = x + row * n;
    float* gr = gpu + row * n;
    const int c0 = cpu_start != nullptr ? cpu_start[row] : 0;
    const int c1 = cpu_start != nullptr ? cpu_start[row + 1] : 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float v = gr[i];
        for (int c = c0; c < c1; ++c) v += cpu_rows[static_cast<std::size_t>(c) * n + i];
        xr[i] += v;
        gr[i] = 0.0f;
    }
}

extern "C" __global__ void set_int_kernel(int* where, int value) { *where = value; }

}  // namespace residual_kernels

}  // namespace neural::cuda
