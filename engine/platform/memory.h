// Resident memory: pinning ranges in RAM (so the OS never pages them out), the process
// working-set minimum that pinning needs on Windows (`--ws-min`), and the per-user data folder.
// POSIX: engine/platform/posix/memory.cpp; Windows: engine/platform/windows/memory.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

namespace neural {

// Pins [p, p + n) in physical memory (mlock / VirtualLock). On failure returns false and, when
// `error` is given, says why (e.g. RLIMIT_MEMLOCK, or a working-set minimum that is too small).
bool lock_memory(const void* p, std::size_t n, std::string* error = nullptr);

// Undoes lock_memory for the same range (munlock / VirtualUnlock). Errors are ignored.
void unlock_memory(const void* p, std::size_t n);

// Asks that at least `bytes` of this process stay resident. Windows: SetProcessWorkingSetSizeEx
// (minimum = bytes, maximum left to grow), which VirtualLock of large ranges needs. POSIX has no
// working-set minimum; the closest is the locked-memory limit, so the RLIMIT_MEMLOCK soft limit
// is raised to `bytes` when the hard limit allows it. False with a reason otherwise.
bool set_working_set_minimum(std::uint64_t bytes, std::string* error = nullptr);

// A range of this process's memory, e.g. a weight tensor inside a file mapping.
struct MemoryRange {
    const void* p = nullptr;
    std::size_t n = 0;
};

// What keep_resident() did.
struct ResidentResult {
    bool ok = false;                 // the request was applied (fully on Windows; see below)
    bool partial = false;            // POSIX: less of `hot` locked than asked for (the limit)
    std::uint64_t locked_bytes = 0;  // POSIX: bytes of `hot` locked with mlock (0 on Windows)
    std::string message;             // what was done, or why not, for the log
};

// `--ws-min BYTES`: asks the OS to keep at least `bytes` of this process resident.
// Windows: the working-set minimum (set_working_set_minimum: SetProcessWorkingSetSizeEx), below
// which the memory manager does not trim the process; `hot` is not touched.
// POSIX has no working-set minimum. The closest equivalent is done instead: the RLIMIT_MEMLOCK
// soft limit is raised towards `bytes` where the hard limit allows, then the `hot` ranges are
// locked with mlock in order (the last one possibly in part) until `bytes` or the limit is
// reached. ok is false when nothing could be locked; the message says why (e.g. the limit).
// Locked pages stay locked for the life of the process (or until unlock_memory).
ResidentResult keep_resident(std::uint64_t bytes, std::span<const MemoryRange> hot);

// Asks the OS to back [p, p + n) of this process's own allocated memory with large pages where
// it can, before the pages are first touched: fewer TLB misses for a buffer that is streamed
// through every token (the int8 dense weights). Linux: madvise(MADV_HUGEPAGE) on the whole
// pages inside the range (effective when transparent huge pages are in "madvise" or "always"
// mode). Windows: nothing (large pages need SeLockMemoryPrivilege and an allocation made for
// them). A hint: false when it was not applied.
bool advise_huge_pages(void* p, std::size_t n);

// The per-user folder for Neural's data (settings, downloaded models), not created here:
// Windows %LOCALAPPDATA%\Neural (SHGetKnownFolderPath FOLDERID_LocalAppData);
// POSIX $XDG_DATA_HOME/neural, else $HOME/.local/share/neural. Empty when neither is known.
std::filesystem::path app_data_dir();

}  // namespace neural
