// Host entry point of gemv_bf16.cu.
#include "cuda/gemv_bf16.h"

#include "cuda/driver/kernels.h"
#include "cuda/launch_shapes.h"

namespace neural::cuda {

namespace {
const Kernel<void(const std::uint16_t*, const std::uint16_t*, const float*, float*, int, int, bool)>
    k_gemv("gemv_bf16_kernel");
}  // namespace

void gemv_bf16(const std::uint16_t* w, const std::uint16_t* bias, const float* x, float* y,
               int rows, int cols, bool accumulate, CUstream stream) {
    constexpr int kWarps = shape::kGemvWarps;
    const int blocks = (rows + kWarps - 1) / kWarps;
    k_gemv.launch(static_cast<unsigned>(blocks), kWarps * 32,
                  static_cast<std::size_t>(cols) * sizeof(float), stream, w, bias, x, y, rows, cols,
                  accumulate);
}

}  // namespace neural::cuda
