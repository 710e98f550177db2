#include "cuda/decode_steps.cuh"
#include "cuda/rms_norm.cuh"

namespace neural::cuda {

namespace {

constexpr int kThreads = 256;

// One block per row (decode: one row, optionally mirrored; prefill: many rows, one kernel, so a
// row's result is the same bits either way).
__global__ void rms_norm_kernel(const float* __restrict__ x, const std::uint16_t* __restrict__ w,
                                float eps, int n, float* __restrict__ y, float* mirror) {
    __shared__ float partial[kThreads / 32];
    const float* xr = x + static_cast<std::size_t>(blockIdx.x) * n;
    float* yr = y + static_cast<std::size_t>(blockIdx.x) * n;
    const float inv = rms_inv_block<kThreads>(xr, n, eps, partial);
    for (int i = threadIdx.x; i < n; i += kThreads) {
        const float v = bf16_bits_to_float(w[i]) * (xr[i] * inv);
        yr[i] = v;
        if (mirror != nullptr) mirror[i] = v;
    }
    if (mirror != nullptr) __threadfence_system();
}

}  // namespace

void rms_norm_rows(const float* x, const std::uint16_t* w, float eps, int n, int rows, float* y,
                   cudaStream_t stream) {
    if (rows <= 0) return;
    rms_norm_kernel<<<rows, kThreads, 0, stream>>>(x, w, eps, n, y, nullptr);
}

void rms_norm(const float* x, const std::uint16_t* w, float eps, int n, float* y, float* mirror,
              cudaStream_t stream) {
    rms_norm_kernel<<<1, kThreads, 0, stream>>>(x, w, eps, n, y, mirror);
}

}  // namespace neural::cuda
