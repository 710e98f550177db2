// GPU discovery for the CUDA backend (host entry points only). Without a GPU, or in a build
// without CUDA, the engine runs on the CPU backend.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace neural::cuda {

struct DeviceInfo {
    int index = 0;
    std::string name;
    int compute_major = 0;
    int compute_minor = 0;
    std::uint64_t total_bytes = 0;
    std::uint64_t free_bytes = 0;
    int multiprocessors = 0;
};

// Every visible CUDA device; empty (never an exception) when there is no driver or no GPU.
// `why` receives the reason when the list is empty.
std::vector<DeviceInfo> list_devices(std::string* why = nullptr);

// Runs a tiny kernel on device `index` and checks its result: proves the toolchain, driver and
// device agree (the build targets the right architectures). Returns an error text or "".
std::string self_test(int index);

// The multiprocessor count of the current device, for launch-shape choices (read once per
// device and cached; 1 where it cannot be read).
int current_multiprocessors();

}  // namespace neural::cuda
