// The shared structs' layout as the host compiler and as nvcc see it (abi_layout.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace neural::cuda {

struct AbiEntry {
    const char* what;
    std::uint64_t value;
};

// The host's numbers (every build).
std::vector<AbiEntry> host_abi_layout();

// The device's numbers, written by abi_probe_kernel on the current device; empty with *why
// where the GPU is not usable.
std::vector<AbiEntry> device_abi_layout(std::string* why);

}  // namespace neural::cuda
