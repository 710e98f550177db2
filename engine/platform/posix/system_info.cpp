#include "platform/system_info.h"

#include <sched.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace neural {

SystemMemory system_memory() {
    SystemMemory m;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0)
        m.total_bytes = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
    // MemAvailable (Linux 3.14+) counts reclaimable cache; _SC_AVPHYS_PAGES would not.
    std::ifstream in("/proc/meminfo");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("MemAvailable:", 0) == 0) {
            std::istringstream ss(line.substr(13));
            std::uint64_t kb = 0;
            if (ss >> kb) m.available_bytes = kb * 1024;
            break;
        }
    }
    if (m.available_bytes == 0) {
        const long avail = sysconf(_SC_AVPHYS_PAGES);
        if (avail > 0 && page > 0)
            m.available_bytes =
                static_cast<std::uint64_t>(avail) * static_cast<std::uint64_t>(page);
    }
    return m;
}

int logical_cpus() {
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        const int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
#endif
    const unsigned n = std::thread::hardware_concurrency();
    return n > 0 ? static_cast<int>(n) : 1;
}

}  // namespace neural
