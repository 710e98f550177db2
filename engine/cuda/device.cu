// The self-test kernel (device.h self_test): y = a x + y.
#include <cstdint>

namespace neural::cuda {

extern "C" __global__ void axpy_kernel(int n, float a, const float* x, float* y) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

}  // namespace neural::cuda
