#include "platform/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "neural/error.h"
#include "platform/atomic_file.h"

namespace neural {

namespace {

// errno -> the words a user needs; the common "out of space" cases get plain names.
std::string reason(int err) {
    switch (err) {
        case ENOSPC:
            return "disk full";
#ifdef EDQUOT
        case EDQUOT:
            return "disk quota exceeded";
#endif
        case EFBIG:
            return "file too large for the file system";
        default:
            return std::strerror(err);
    }
}

}  // namespace

OutputFile OutputFile::create(const std::filesystem::path& path, bool unbuffered) {
    OutputFile f;
    f.path_ = checked_output_path(path);
    // O_NONBLOCK: should a FIFO appear at the path after the check, opening it fails (no reader)
    // or returns at once instead of waiting for a reader; the type is checked again below.
    const int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
#ifdef O_DIRECT
    if (unbuffered) {
        f.fd_ = ::open(f.path_.c_str(), flags | O_DIRECT, 0644);
        f.direct_ = f.fd_ >= 0;  // file systems without O_DIRECT (tmpfs) say EINVAL: buffered
    }
#endif
    if (f.fd_ < 0) f.fd_ = ::open(f.path_.c_str(), flags, 0644);
    if (f.fd_ < 0) fail("cannot create {}: {}", path.string(), reason(errno));
    struct stat st {};
    if (::fstat(f.fd_, &st) != 0 || !S_ISREG(st.st_mode))
        fail("cannot write {}: it is not a regular file", path.string());
    ::fcntl(f.fd_, F_SETFL, ::fcntl(f.fd_, F_GETFL) & ~O_NONBLOCK);
#if !defined(O_DIRECT) && defined(F_NOCACHE)
    if (unbuffered) ::fcntl(f.fd_, F_NOCACHE, 1);  // macOS: no alignment rules, best effort
#endif
    return f;
}

void OutputFile::set_buffered() {
#ifdef O_DIRECT
    if (!direct_) return;
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_DIRECT) != 0) {
        fail("cannot write {}: {}", path_.string(), reason(errno));
    }
    direct_ = false;
#endif
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      direct_(std::exchange(other.direct_, false)) {}

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        path_ = std::move(other.path_);
        fd_ = std::exchange(other.fd_, -1);
        direct_ = std::exchange(other.direct_, false);
    }
    return *this;
}

OutputFile::~OutputFile() {
    if (fd_ >= 0) ::close(fd_);
}

bool OutputFile::is_open() const { return fd_ >= 0; }

void OutputFile::write(const void* data, std::size_t n) {
    if (fd_ < 0) fail("cannot write {}: the file is not open", path_.string());
    const auto* p = static_cast<const char*>(data);
    if (direct_ && (reinterpret_cast<std::uintptr_t>(p) % kDirectAlignment != 0 ||
                    n % kDirectAlignment != 0)) {
        set_buffered();
    }
    while (n > 0) {
        // Linux writes at most ~2 GiB per call; 1 GiB pieces keep the direct alignment.
        const std::size_t piece = n < (std::size_t{1} << 30) ? n : (std::size_t{1} << 30);
        const ssize_t w = ::write(fd_, p, piece);
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EINVAL && direct_) {  // the device wants a larger alignment
                set_buffered();
                continue;
            }
            fail("cannot write {}: {}", path_.string(), reason(errno));
        }
        if (w == 0) fail("cannot write {}: {}", path_.string(), reason(ENOSPC));
        p += w;
        n -= static_cast<std::size_t>(w);
    }
}

void OutputFile::sync() {
    if (fd_ < 0) return;
    if (::fsync(fd_) != 0) fail("cannot flush {} to disk: {}", path_.string(), reason(errno));
}

void OutputFile::close() {
    if (fd_ < 0) return;
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) fail("cannot close {}: {}", path_.string(), reason(errno));
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

}  // namespace neural
