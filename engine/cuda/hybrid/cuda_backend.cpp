// The CUDA backend's entry points (backend/backend.h): the usable devices, whether the backend can
// run, and the hybrid backend itself (hybrid/hybrid_backend.h). backend_none.cpp defines the same
// in a build without CUDA.
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cuda/device.h"
#include "cuda/hybrid/hybrid_backend.h"
#include "cuda/transfer.h"
#include "neural/error.h"

namespace neural {

std::vector<GpuDevice> gpu_devices(std::string* why) {
    std::vector<GpuDevice> out;
    for (const auto& d : cuda::list_devices(why)) {
        out.push_back(
            {d.index, d.name, d.compute_major, d.compute_minor, d.total_bytes, d.free_bytes});
    }
    return out;
}

CopyBandwidth copy_bandwidth(int device, std::size_t bytes, int passes) {
    CopyBandwidth b;
    b.pinned_gb_s = cuda::pinned_h2d_gbps(device, bytes, passes, &b.why);
    if (b.pinned_gb_s > 0) b.pageable_gb_s = cuda::pageable_h2d_gbps(device, bytes, passes, &b.why);
    return b;
}

bool cuda_backend_available(std::string* why) {
    std::string reason;
    const auto devices = cuda::list_devices(&reason);
    if (devices.empty()) {
        if (why != nullptr) *why = reason.empty() ? "no NVIDIA GPU found" : reason;
        return false;
    }
    return true;
}

std::unique_ptr<Backend> make_cuda_backend(const GpuBackendInputs& inputs, const GpuOptions& gpu) {
    std::string why;
    if (!cuda_backend_available(&why)) fail("backend \"cuda\" is not available: {}", why);
    if (inputs.config == nullptr || inputs.weights == nullptr) fail("make_cuda_backend: no model");
    return std::make_unique<hybrid::HybridBackend>(inputs, gpu);
}

}  // namespace neural
