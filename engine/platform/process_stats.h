// Process counters for telemetry: page faults so far (soft + hard), read before and after a
// token so a record carries the delta. POSIX: getrusage (minflt + majflt); Windows:
// GetProcessMemoryInfo (PageFaultCount, which also counts soft faults).
// POSIX: engine/platform/posix/process_stats.cpp; Windows: windows/process_stats.cpp.
#pragma once

#include <cstdint>

namespace neural {

// Page faults of this process since it started; 0 where the platform cannot say.
std::uint64_t process_page_faults();

}  // namespace neural
