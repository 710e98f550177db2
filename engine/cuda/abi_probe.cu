// The device's view of the shared structs (abi_layout.h): one thread writes every number of
// NEURAL_ABI_LAYOUT, in list order, for the host to compare with its own.
#include "cuda/abi_layout.h"

namespace neural::cuda {

extern "C" __global__ void abi_probe_kernel(std::uint64_t* out) {
    int i = 0;
#define NEURAL_ABI_WRITE(text, value) out[i++] = static_cast<std::uint64_t>(value);
    NEURAL_ABI_LAYOUT(NEURAL_ABI_WRITE)
#undef NEURAL_ABI_WRITE
}

}  // namespace neural::cuda
