// The platform-independent part of page_residency.h (the rest is in posix/ and windows/).
#include "platform/page_residency.h"

#include <cstdint>

namespace neural {

std::uint64_t touch_pages(const void* p, std::size_t n) {
    if (p == nullptr || n == 0) return 0;
    const std::size_t page = page_size();
    const auto* bytes = static_cast<const volatile std::uint8_t*>(p);
    // The first byte of the range, then the first byte of every following page.
    std::uint64_t sum = bytes[0];
    const std::size_t first = page - (reinterpret_cast<std::uintptr_t>(p) & (page - 1));
    for (std::size_t off = first; off < n; off += page) sum += bytes[off];
    return sum;
}

}  // namespace neural
