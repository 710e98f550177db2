#include "platform/process_stats.h"

#include <sys/resource.h>

namespace neural {

std::uint64_t process_page_faults() {
    struct rusage u {};
    if (::getrusage(RUSAGE_SELF, &u) != 0) return 0;
    return static_cast<std::uint64_t>(u.ru_minflt) + static_cast<std::uint64_t>(u.ru_majflt);
}

}  // namespace neural
