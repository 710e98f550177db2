#include "cuda/decode_steps.cuh"
#include "cuda/rms_norm.h"

namespace neural::cuda {

namespace rms_norm_kernels {

constexpr int kThreads = shape::kRmsNormThreads;

// One block per row (decode: one row, optionally mirrored; prefill: many rows, one kernel, so a
// row's result is the same bits either way).
extern "C" __global__ void rms_norm_kernel(const float* __restrict__ x,
                                           const std::uint16_t* __restrict__ w, float eps, int n,
                                           float* __restrict__ y, float* mirror) {
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

}  // namespace rms_norm_kernels

}  // namespace neural::cuda
