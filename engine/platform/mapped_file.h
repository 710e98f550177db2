// Read-only memory mapping of a whole file (checkpoint shards, stores).
// POSIX: engine/platform/posix/mapped_file.cpp; Windows: engine/platform/windows/mapped_file.cpp.
#pragma once

#include <cstdint>
#include <filesystem>

namespace neural {

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
    // The open file behind the mapping (POSIX: a file descriptor; Windows: a HANDLE), kept for
    // page-cache calls on the file (platform/page_residency.h: release_mapped_pages). -1 / null
    // for an empty file.
#ifdef _WIN32
    void* native_file() const { return file_handle_; }
#else
    int native_file() const { return fd_; }
#endif

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
};

}  // namespace neural
