// Process counters for telemetry: the resident set, and page faults so far (soft + hard), read before and after a
// token so a record carries the delta. POSIX: getrusage (minflt + majflt); Windows:
// GetProcessMemoryInfo (PageFaultCount, which also counts soft faults).
// Major (hard) faults are the ones that waited for a disk read: the cost of experts that were
// not in RAM. POSIX: ru_majflt. Windows has no per-process hard-fault counter outside ETW, so
// there major_known is false and major stays 0.
// POSIX: engine/platform/posix/process_stats.cpp; Windows: windows/process_stats.cpp.
#pragma once

#include <cstdint>

namespace neural {

// Page faults of this process since it started; 0 where the platform cannot say.
std::uint64_t process_page_faults();

struct PageFaultCounts {
    std::uint64_t total = 0;  // soft + hard, as process_page_faults()
    std::uint64_t major = 0;  // hard faults only (0 where unknown)
    bool major_known = false;
};
// Both counts from one call.
PageFaultCounts process_page_fault_counts();

// Bytes of this process now in RAM (the resident set; Windows: the working set,
// GetProcessMemoryInfo's WorkingSetSize; Linux: /proc/self/statm); 0 where it cannot be read.
std::uint64_t process_resident_bytes();

}  // namespace neural
