#include "platform/process_stats.h"

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
// PSAPI_VERSION 2: GetProcessMemoryInfo is K32GetProcessMemoryInfo in kernel32 (Windows 7+), so
// no psapi.lib is needed.
#ifndef PSAPI_VERSION
#define PSAPI_VERSION 2
#endif
#include <psapi.h>

namespace neural {

std::uint64_t process_page_faults() {
    PROCESS_MEMORY_COUNTERS pmc{};
    pmc.cb = sizeof pmc;
    if (!GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc)) return 0;
    return static_cast<std::uint64_t>(pmc.PageFaultCount);
}

PageFaultCounts process_page_fault_counts() {
    PageFaultCounts c;
    c.total = process_page_faults();  // soft + hard; the split needs ETW
    return c;
}

std::uint64_t process_resident_bytes() {
    PROCESS_MEMORY_COUNTERS pmc{};
    pmc.cb = sizeof pmc;
    if (!GetProcessMemoryInfo(GetCurrentProcess(), &pmc, sizeof pmc)) return 0;
    return static_cast<std::uint64_t>(pmc.WorkingSetSize);
}

}  // namespace neural
