// neural_cuda_driver_probe: what the engine decides about the GPU at start-up, in one line
// ("cuda: available" or "cuda: unavailable: <reason>"), and that asking for the CUDA backend
// anyway is a clear error naming the reason. The loader tests run it against missing, foreign
// and stub drivers (NEURAL_CUDA_DRIVER, tests/cuda/CMakeLists.txt).
#include <cstdio>
#include <string>

#include "backend/backend.h"
#include "neural/error.h"

int main() {
    std::string why;
    if (neural::cuda_backend_available(&why)) {
        std::printf("cuda: available\n");
        return 0;
    }
    std::printf("cuda: unavailable: %s\n", why.c_str());
    try {
        neural::GpuBackendInputs in;
        neural::GpuOptions gpu;
        (void)neural::make_cuda_backend(in, gpu);
        std::printf("make_cuda_backend did not fail\n");
        return 1;
    } catch (const neural::Error& e) {
        std::printf("--backend cuda: %s\n", e.what());
    }
    return 0;
}
