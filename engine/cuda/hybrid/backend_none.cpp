// The CUDA backend's entry points in a build without CUDA (-DNEURAL_CUDA=OFF or no nvcc): the
// CPU backend is the only one, and asking for the GPU is a clear error.
#include "backend/backend.h"
#include "neural/error.h"

namespace neural {

std::vector<GpuDevice> gpu_devices(std::string* why) {
    if (why != nullptr) *why = "this build has no CUDA backend";
    return {};
}

CopyBandwidth copy_bandwidth(int, std::size_t, int) {
    CopyBandwidth b;
    b.why = "this build has no CUDA backend";
    return b;
}

bool cuda_backend_available(std::string* why) {
    if (why != nullptr)
        *why = "this build has no CUDA backend (built with NEURAL_CUDA=OFF or without nvcc)";
    return false;
}

std::unique_ptr<Backend> make_cuda_backend(const GpuBackendInputs&, const GpuOptions&) {
    fail(
        "backend \"cuda\" is not available: this build has no CUDA backend (rebuild with "
        "-DNEURAL_CUDA=ON on a machine with the CUDA toolkit)");
}

}  // namespace neural
