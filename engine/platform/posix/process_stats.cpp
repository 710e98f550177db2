#include "platform/process_stats.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>

namespace neural {

std::uint64_t process_page_faults() {
    struct rusage u {};
    if (::getrusage(RUSAGE_SELF, &u) != 0) return 0;
    return static_cast<std::uint64_t>(u.ru_minflt) + static_cast<std::uint64_t>(u.ru_majflt);
}

PageFaultCounts process_page_fault_counts() {
    struct rusage u {};
    if (::getrusage(RUSAGE_SELF, &u) != 0) return {};
    PageFaultCounts c;
    c.major = static_cast<std::uint64_t>(u.ru_majflt);
    c.total = static_cast<std::uint64_t>(u.ru_minflt) + c.major;
    c.major_known = true;
    return c;
}

std::uint64_t process_resident_bytes() {
#ifdef __linux__
    // statm: size resident shared text lib data dt, in pages.
    std::FILE* f = std::fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long long size = 0, resident = 0;
    const int n = std::fscanf(f, "%llu %llu", &size, &resident);
    std::fclose(f);
    if (n != 2) return 0;
    const long page = ::sysconf(_SC_PAGESIZE);
    return page > 0 ? resident * static_cast<std::uint64_t>(page) : 0;
#else
    // macOS and the BSDs report the peak (ru_maxrss), not the current set: say nothing.
    return 0;
#endif
}

}  // namespace neural
