#include "platform/memory.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace neural {

bool advise_huge_pages(void* p, std::size_t n) {
#ifdef MADV_HUGEPAGE
    const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
    const std::uintptr_t begin = (reinterpret_cast<std::uintptr_t>(p) + page - 1) / page * page;
    const std::uintptr_t end = (reinterpret_cast<std::uintptr_t>(p) + n) / page * page;
    if (end <= begin) return false;
    return madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) == 0;
#else
    (void)p;
    (void)n;
    return false;
#endif
}

bool lock_memory(const void* p, std::size_t n, std::string* error) {
    if (p == nullptr || n == 0) return true;
    if (mlock(p, n) == 0) return true;
    if (error != nullptr) {
        const int err = errno;
        *error = std::string("mlock: ") + std::strerror(err);
        if (err == ENOMEM || err == EPERM) *error += " (RLIMIT_MEMLOCK too low? see ulimit -l)";
    }
    return false;
}

void unlock_memory(const void* p, std::size_t n) {
    if (p == nullptr || n == 0) return;
    munlock(p, n);
}

bool set_working_set_minimum(std::uint64_t bytes, std::string* error) {
    rlimit lim{};
    if (getrlimit(RLIMIT_MEMLOCK, &lim) != 0) {
        if (error != nullptr)
            *error = std::string("getrlimit(RLIMIT_MEMLOCK): ") + std::strerror(errno);
        return false;
    }
    if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= bytes) return true;
    if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < bytes) {
        if (error != nullptr) {
            *error = "no working-set minimum on this OS, and the locked-memory hard limit (" +
                     std::to_string(lim.rlim_max) + " bytes) is below " + std::to_string(bytes);
        }
        return false;
    }
    lim.rlim_cur = static_cast<rlim_t>(bytes);
    if (setrlimit(RLIMIT_MEMLOCK, &lim) != 0) {
        if (error != nullptr)
            *error = std::string("setrlimit(RLIMIT_MEMLOCK): ") + std::strerror(errno);
        return false;
    }
    return true;
}

ResidentResult keep_resident(std::uint64_t bytes, std::span<const MemoryRange> hot) {
    ResidentResult r;
    set_working_set_minimum(bytes);  // best effort: raises RLIMIT_MEMLOCK's soft limit
    rlimit lim{};
    std::uint64_t budget = bytes;
    if (getrlimit(RLIMIT_MEMLOCK, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
        budget = std::min<std::uint64_t>(budget, lim.rlim_cur);
    }
    std::uint64_t wanted = 0;
    for (const MemoryRange& m : hot) wanted += m.n;
    wanted = std::min(wanted, bytes);
    std::string error;
    for (const MemoryRange& m : hot) {
        if (r.locked_bytes >= budget) break;
        const auto n =
            static_cast<std::size_t>(std::min<std::uint64_t>(m.n, budget - r.locked_bytes));
        if (!lock_memory(m.p, n, &error)) break;
        r.locked_bytes += n;
    }
    r.ok = r.locked_bytes > 0 || wanted == 0;
    r.message = "no working-set minimum on this OS: locked " + std::to_string(r.locked_bytes) +
                " of " + std::to_string(wanted) + " bytes of the hot weights with mlock";
    r.partial = r.locked_bytes < wanted;
    if (r.partial) {
        r.message += " (locked-memory limit RLIMIT_MEMLOCK: " +
                     (lim.rlim_cur == RLIM_INFINITY ? std::string("unlimited")
                                                    : std::to_string(lim.rlim_cur) + " bytes") +
                     (error.empty() ? "" : "; " + error) + "; see ulimit -l)";
    }
    return r;
}

std::filesystem::path app_data_dir() {
    if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg != nullptr && xdg[0] == '/') {
        return std::filesystem::path(xdg) / "neural";
    }
    if (const char* home = std::getenv("HOME"); home != nullptr && *home != 0) {
        return std::filesystem::path(home) / ".local" / "share" / "neural";
    }
    return {};
}

}  // namespace neural
