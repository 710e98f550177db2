// RAM residency of the pages of read-only file mappings (the expert store): which pages are in
// RAM, faulting them in ahead of use (`--warmup-ram`), and giving them back once they are not
// needed any more (`--release-resident`: experts that live in VRAM).
// POSIX: engine/platform/posix/page_residency.cpp; Windows: windows/page_residency.cpp.
//
// What "resident" means differs:
// - Linux: a page of a file mapping is resident when it is in the page cache (mincore), whether
//   or not this process has it mapped. The page cache is charged to the cgroup that read it, so
//   under a memory limit (a container, systemd's MemoryMax) it counts like any other memory.
// - Windows: resident = in this process's working set (QueryWorkingSetEx). A page trimmed from
//   the working set stays in RAM on the standby list (a cache the memory manager hands to
//   other programs on demand) until it is repurposed; a process cannot drop standby pages of a
//   file without privileges (the system-wide standby purge needs SeProfileSingleProcessPrivilege).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "platform/mapped_file.h"

namespace neural {

// The OS page size (4096 on x86-64 Linux and Windows).
std::size_t page_size();

// Pages of [p, p + n), widened to whole pages, that are resident (see above); nullopt when the
// OS cannot say (e.g. Wine without QueryWorkingSetEx).
std::optional<std::uint64_t> resident_pages(const void* p, std::size_t n);

// Reads one byte of every page of [p, p + n) (widened to whole pages), so each is faulted in.
// Returns a value computed from the bytes, only so the reads cannot be optimised away.
std::uint64_t touch_pages(const void* p, std::size_t n);

// What map_cached_pages() did.
struct CachedMapping {
    std::uint64_t pages = 0;   // pages of the range (widened to whole pages)
    std::uint64_t cached = 0;  // of them, pages that were in RAM and are now mapped
};

// Maps into this process the pages of [p, p + n) (widened to whole pages) of a read-only file
// mapping that are in RAM already, and reads nothing from disk: later reads of those pages take
// no page fault. The expert store's default warm-up (docs/USER_GUIDE.md "RAM residency") runs it
// after loading, so the first prompt's threads do not fault the cached store in one by one.
// - Linux: mincore finds the page-cache pages; each run of them is mapped with
//   madvise(MADV_POPULATE_READ) (Linux 5.14+; older kernels: one read per page of the run).
// - Windows: nullopt. Windows only tells whether a page is in this process's working set
//   (QueryWorkingSetEx), not whether the standby list caches it, so a pass that must not read
//   from disk cannot tell which pages to map.
std::optional<CachedMapping> map_cached_pages(const void* p, std::size_t n);

// What release_mapped_pages() did.
struct PageRelease {
    bool ok = false;                // the pages were given back as far as this OS allows
    bool mapping_released = false;  // dropped from this process's mapping / working set
    bool cache_released = false;    // dropped from the page cache (Linux); false on Windows
    std::string message;            // the calls made, or why they failed
    // Pages of the range still resident afterwards (resident_pages; 0 where unknown). Linux:
    // the page cache holds a file in folios of 1 to 512 pages, and a folio is only evicted
    // whole, so one that straddles the range's edge (shared with a neighbour record) stays.
    std::uint64_t pages_left = 0;
};

// Gives back the RAM of bytes [offset, offset + n) of `file`'s read-only mapping (widened to
// whole pages, so with pages larger than the store's 4 KiB records a neighbour's page may go
// too; it is simply read again when needed). The bytes stay readable: a later read faults them
// back in from the file. Locked pages are unlocked first.
// - Linux: munlock, madvise(MADV_DONTNEED) on the mapped range (drops this process's page table
//   entries), then posix_fadvise(POSIX_FADV_DONTNEED) on the file range, which evicts the clean
//   pages from the page cache unless another process maps them. Both are needed: without the
//   fadvise the pages stay cached and keep counting against a cgroup memory limit. On tmpfs
//   (/dev/shm) the page cache *is* the file: nothing can be evicted (cache_released is false).
// - Windows: VirtualUnlock on a range that is not locked removes its pages from the working set
//   (called twice if the range was locked: unlock, then trim). The pages move to the standby
//   list: they stop counting as this process's memory and are reused for others under memory
//   pressure, but stay cached until then; nothing finer exists for a file mapping.
PageRelease release_mapped_pages(const MappedFile& file, std::uint64_t offset, std::uint64_t n);

// Makes room for locking `extra` more bytes with lock_memory() (platform/memory.h) on top of
// what this process may lock already: POSIX raises the RLIMIT_MEMLOCK soft limit by
// `extra` (up to the hard limit; a process with CAP_IPC_LOCK, e.g. root, is not limited at
// all); Windows raises the working-set minimum and maximum by `extra` (VirtualLock needs the
// locked pages to fit the minimum). `message` says what was done or why not.
struct LockAllowance {
    bool ok = false;
    std::string message;
};
LockAllowance grow_lock_allowance(std::uint64_t extra);

}  // namespace neural
