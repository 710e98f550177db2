// Writing large files with exact error reporting: a full disk is reported as "disk full", not as
// a generic stream failure, and sync() makes the bytes durable before a file is published (the
// synth writer renames a finished folder into place only after every file was synced).
// POSIX: engine/platform/posix/output_file.cpp; Windows: engine/platform/windows/output_file.cpp.
#pragma once

#include <cstddef>
#include <filesystem>

namespace neural {

class OutputFile {
public:
    // Memory alignment and size granularity of writes that can bypass the page cache.
    static constexpr std::size_t kDirectAlignment = 4096;

    // Creates `path` (truncating an existing file) for writing. Throws neural::Error naming it.
    // `unbuffered` asks to bypass the OS page cache where the platform allows it (Linux
    // O_DIRECT, macOS F_NOCACHE; ignored on Windows): multi-GB sequential writes through the
    // cache can be several times slower than the disk (docs/BENCHMARKS.md "Measurements behind
    // code defaults"). Direct writes need kDirectAlignment-aligned memory and sizes; the
    // first write that is not switches the file to buffered mode for good (e.g. a file's tail).
    static OutputFile create(const std::filesystem::path& path, bool unbuffered = false);

    OutputFile() = default;
    OutputFile(OutputFile&& other) noexcept;
    OutputFile& operator=(OutputFile&& other) noexcept;
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;
    ~OutputFile();  // closes without reporting errors; call close() to see them

    // Appends all `n` bytes (retrying short writes). Throws neural::Error naming the file and the
    // reason, e.g. "cannot write F: disk full".
    void write(const void* data, std::size_t n);
    // Flushes the file's data to the storage device (fsync / FlushFileBuffers).
    void sync();
    // Closes the file; throws on error (some file systems report failed writes only here).
    void close();

    bool is_open() const;
    const std::filesystem::path& path() const { return path_; }

private:
    void set_buffered();  // drops the direct mode (POSIX O_DIRECT)

    std::filesystem::path path_;
#ifdef _WIN32
    void* handle_ = nullptr;
#else
    int fd_ = -1;
    bool direct_ = false;  // O_DIRECT is set on fd_
#endif
};

// True when the process's standard error is an interactive terminal (progress lines then
// rewrite themselves with '\r' instead of scrolling).
bool stderr_is_terminal();

}  // namespace neural
