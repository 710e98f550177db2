// Host entry points of rms_norm.cu.
#include "cuda/rms_norm.h"

#include "cuda/driver/kernels.h"
#include "cuda/launch_shapes.h"

namespace neural::cuda {

namespace {
const Kernel<void(const float*, const std::uint16_t*, float, int, float*, float*)> k_rms_norm(
    "rms_norm_kernel");
}  // namespace

void rms_norm_rows(const float* x, const std::uint16_t* w, float eps, int n, int rows, float* y,
                   CUstream stream) {
    if (rows <= 0) return;
    k_rms_norm.launch(Dim3(static_cast<unsigned>(rows)), shape::kRmsNormThreads, 0, stream, x, w,
                      eps, n, y, nullptr);
}

void rms_norm(const float* x, const std::uint16_t* w, float eps, int n, float* y, float* mirror,
              CUstream stream) {
    k_rms_norm.launch(1, shape::kRmsNormThreads, 0, stream, x, w, eps, n, y, mirror);
}

}  // namespace neural::cuda
