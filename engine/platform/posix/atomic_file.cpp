#include "platform/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "neural/error.h"

namespace neural {

namespace {
void write_all(int fd, std::string_view bytes, const std::string& name) {
    size_t done = 0;
    while (done < bytes.size()) {
        ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("cannot write {}: {}", name, std::strerror(errno));
        }
        done += static_cast<size_t>(n);
    }
}
}  // namespace

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
    std::random_device rd;
    const std::filesystem::path tmp =
        path.parent_path() / (path.filename().string() + ".tmp-" + std::to_string(rd()));
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) fail("cannot create {}: {}", tmp.string(), std::strerror(errno));
    try {
        write_all(fd, bytes, path.string());
        if (::fsync(fd) != 0) fail("cannot flush {}: {}", path.string(), std::strerror(errno));
    } catch (...) {
        ::close(fd);
        ::unlink(tmp.c_str());
        throw;
    }
    if (::close(fd) != 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        fail("cannot write {}: {}", path.string(), std::strerror(err));
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        int err = errno;
        ::unlink(tmp.c_str());
        fail("cannot replace {}: {}", path.string(), std::strerror(err));
    }
    // Make the rename itself durable.
    std::filesystem::path dir = path.parent_path().empty() ? "." : path.parent_path();
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
}

void sync_file(const std::filesystem::path& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("cannot open {}: {}", path.string(), std::strerror(errno));
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0) fail("cannot flush {}: {}", path.string(), std::strerror(err));
}

}  // namespace neural
