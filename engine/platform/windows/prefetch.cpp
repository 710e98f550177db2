#include "platform/prefetch.h"

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

namespace neural {

void prefetch_mapped(const void* p, std::size_t n) {
    if (p == nullptr || n == 0) return;
    WIN32_MEMORY_RANGE_ENTRY range;
    range.VirtualAddress = const_cast<void*>(p);
    range.NumberOfBytes = n;
    PrefetchVirtualMemory(GetCurrentProcess(), 1, &range, 0);
}

}  // namespace neural
