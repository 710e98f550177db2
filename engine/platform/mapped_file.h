// Read-only memory mapping of a whole file (checkpoint shards, stores).
// POSIX: engine/platform/posix/mapped_file.cpp; Windows: engine/platform/windows/mapped_file.cpp.
//
// Files changed under the mapping (docs/RELIABILITY.md "A store changed on disk"): open()
// records the file's identity (device, inode / file index, size, modification time), and
// changed_on_disk() compares it with the file now, cheaply (two stat calls), so callers refuse to
// compute from a file that was rewritten in place, truncated or replaced. A read of a page that
// no longer exists (the file was truncated: SIGBUS on POSIX) does not kill the process: a
// process-wide SIGBUS handler maps a zero page over the faulting page of a registered mapping,
// the read continues, and the mapping reports faulted(); callers check it after the reads and
// throw instead of using the bytes. Windows: the file is opened without write or delete sharing,
// so no other process can change, truncate or replace it while it is mapped; what remains
// (EXCEPTION_IN_PAGE_ERROR: a failing disk or network share) is named on stderr by a vectored
// exception handler before the process ends, since a view's pages cannot be replaced.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace neural {

// The path of a mapped file a read faulted on (MappedFile::faulted) since the process started,
// or an empty path. One atomic load while none did (checked after every forward pass).
std::filesystem::path faulted_mapping();

class MappedFile {
public:
    // Maps `path` read-only. Throws neural::Error naming the file when it cannot be opened or
    // mapped. An empty file maps to data() == nullptr, size() == 0.
    static MappedFile open(const std::filesystem::path& path);

    MappedFile() = default;
    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;
    ~MappedFile();

    const std::uint8_t* data() const { return data_; }
    std::uint64_t size() const { return size_; }
    const std::filesystem::path& path() const { return path_; }
    // Empty while the file at path() is the one mapped, with the size and modification time it
    // had at open(); else what changed ("its size changed from A to B bytes", ...).
    std::string changed_on_disk() const;
    // A read of this mapping touched a page the file no longer has (it was truncated): the read
    // saw zeros. Stays set.
    bool faulted() const;
    // The open file behind the mapping (POSIX: a file descriptor; Windows: a HANDLE), kept for
    // page-cache calls on the file (platform/page_residency.h: release_mapped_pages). -1 / null
    // for an empty file.
#ifdef _WIN32
    void* native_file() const { return file_handle_; }
#else
    int native_file() const { return fd_; }
#endif

    // The identity open() recorded.
    struct Identity {
        std::uint64_t device = 0;  // st_dev / volume serial number
        std::uint64_t file = 0;    // inode / file index
        std::uint64_t size = 0;
        std::int64_t mtime_ns = 0;  // POSIX: ns since the epoch; Windows: FILETIME units
        bool operator==(const Identity&) const = default;
    };
    const Identity& identity() const { return identity_; }

private:
    void release();

    const std::uint8_t* data_ = nullptr;
    std::uint64_t size_ = 0;
    std::filesystem::path path_;
#ifdef _WIN32
    void* file_handle_ = nullptr;
    void* mapping_handle_ = nullptr;
#else
    int fd_ = -1;  // kept open for posix_fadvise (the mapping alone would keep the file alive)
#endif
    Identity identity_;
    int guard_slot_ = -1;  // the mapping's entry in the fault guard's table (-1: none)
};

}  // namespace neural
