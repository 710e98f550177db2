// What the machine has, for `neural fit` and the desktop app's fit step: physical memory (total
// and available now) and logical CPUs. POSIX: sysinfo / /proc/meminfo (MemAvailable);
// Windows: GlobalMemoryStatusEx. engine/platform/{posix,windows}/system_info.cpp.
#pragma once

#include <cstdint>

namespace neural {

struct SystemMemory {
    std::uint64_t total_bytes = 0;
    // What can be allocated without swapping (Linux MemAvailable, Windows ullAvailPhys): free
    // memory plus reclaimable page cache. 0 where the platform cannot say.
    std::uint64_t available_bytes = 0;
};

SystemMemory system_memory();

// Logical CPUs this process may run on (>= 1).
int logical_cpus();

}  // namespace neural
