#include "platform/file_patch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "neural/error.h"

namespace neural {

void write_file_range(const std::filesystem::path& path, std::uint64_t offset, const void* data,
                      std::size_t n) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail("cannot open {} for writing: {}", path.string(), std::strerror(errno));
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
        const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
        if (w < 0) {
            if (errno == EINTR) continue;
            const int err = errno;
            ::close(fd);
            fail("cannot write {}: {}", path.string(),
                 err == ENOSPC ? "disk full" : std::strerror(err));
        }
        p += w;
        n -= static_cast<std::size_t>(w);
        offset += static_cast<std::uint64_t>(w);
    }
    if (::close(fd) != 0) fail("cannot write {}: {}", path.string(), std::strerror(errno));
}

void sync_directory(const std::filesystem::path& dir) {
    const std::filesystem::path d = dir.empty() ? std::filesystem::path(".") : dir;
    const int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
}

}  // namespace neural
