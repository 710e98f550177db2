#include "platform/process_stats.h"

#include <sys/resource.h>

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

}  // namespace neural
