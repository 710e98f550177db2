#include "platform/prefetch.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

namespace neural {

void prefetch_mapped(const void* p, std::size_t n) {
    if (p == nullptr || n == 0) return;
    static const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
    const auto begin = reinterpret_cast<std::uintptr_t>(p) & ~(page - 1);
    const auto end = reinterpret_cast<std::uintptr_t>(p) + n;
    ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);
}

}  // namespace neural
