#include "cuda/residual.cuh"

namespace neural::cuda {

namespace {

__global__ void copy_kernel(const float* __restrict__ in, float* __restrict__ x, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = in[i];
}

__global__ void add_moe_kernel(float* __restrict__ x, const float* __restrict__ g,
                               const float* c, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += g[i] + c[i];
}

__global__ void set_int_kernel(int* where, int value) { *where = value; }

}  // namespace

void copy_vector(const float* in, float* x, int n, cudaStream_t stream) {
    copy_kernel<<<(n + 255) / 256, 256, 0, stream>>>(in, x, n);
}

void add_moe(float* x, const float* gpu_part, const float* cpu_part, int n, cudaStream_t stream) {
    add_moe_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, gpu_part, cpu_part, n);
}

void set_int(int* where, int value, cudaStream_t stream) {
    set_int_kernel<<<1, 1, 0, stream>>>(where, value);
}

}  // namespace neural::cuda
