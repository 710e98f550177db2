// Read-ahead hints for memory-mapped files: a bulk reader (the store's repack) asks the OS to
// start reading a range before it touches it, so page faults find the pages in memory instead
// of reading a few hundred KiB each, several times slower than sequential reads
// (docs/BENCHMARKS.md "Measurements behind code defaults").
// POSIX: engine/platform/posix/prefetch.cpp; Windows: engine/platform/windows/prefetch.cpp.
#pragma once

#include <cstddef>

namespace neural {

// Starts reading [p, p + n) of a file mapping in the background (madvise MADV_WILLNEED /
// PrefetchVirtualMemory). A hint: errors are ignored.
void prefetch_mapped(const void* p, std::size_t n);

}  // namespace neural
