#include "cuda/abi_probe.h"

#include "cuda/abi_layout.h"
#include "cuda/driver/kernels.h"

namespace neural::cuda {

namespace {
const Kernel<void(std::uint64_t*)> k_abi_probe("abi_probe_kernel");
}  // namespace

std::vector<AbiEntry> host_abi_layout() {
    std::vector<AbiEntry> out;
#define NEURAL_ABI_HOST(text, value) out.push_back({text, static_cast<std::uint64_t>(value)});
    NEURAL_ABI_LAYOUT(NEURAL_ABI_HOST)
#undef NEURAL_ABI_HOST
    return out;
}

std::vector<AbiEntry> device_abi_layout(std::string* why) {
    std::vector<AbiEntry> out = host_abi_layout();
    std::uint64_t* dev = nullptr;
    std::vector<std::uint64_t> values(out.size(), ~0ULL);
    const std::size_t bytes = values.size() * sizeof(std::uint64_t);
    CUresult r = drv::malloc(&dev, bytes);
    if (r == CUDA_SUCCESS) r = k_abi_probe.launch(1, 1, 0, nullptr, dev);
    if (r == CUDA_SUCCESS) r = drv::memcpy(values.data(), dev, bytes, drv::kDeviceToHost);
    drv::free(dev);
    if (r != CUDA_SUCCESS) {
        if (why != nullptr) *why = result_text(r);
        drv::get_last_error();
        return {};
    }
    for (std::size_t i = 0; i < out.size(); ++i) out[i].value = values[i];
    return out;
}

}  // namespace neural::cuda
