#include "platform/atomic_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <system_error>
#include <vector>

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

std::vector<std::filesystem::path> remove_stale_temp_files(const std::filesystem::path& path,
                                                           std::chrono::seconds min_age) {
    std::vector<std::filesystem::path> removed;
    std::error_code ec;
    const std::filesystem::path dir = path.parent_path().empty() ? "." : path.parent_path();
    std::filesystem::directory_iterator it(dir, ec);
    if (ec) return removed;
    for (const std::filesystem::directory_entry& e : it) {
        const std::filesystem::path p = e.path();
        if (!is_temp_file_of(p, path)) continue;
        const int fd = ::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat held {
        }, now{};
        // Unlocked (its writer is gone), old enough, and still the file that was locked (the same
        // inode) when it is unlinked.
        const bool stale = ::fstat(fd, &held) == 0 && S_ISREG(held.st_mode) &&
                           held.st_mtime + min_age.count() <= std::time(nullptr) &&
                           ::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::lstat(p.c_str(), &now) == 0 &&
                           now.st_dev == held.st_dev && now.st_ino == held.st_ino;
        if (stale && ::unlink(p.c_str()) == 0) removed.push_back(p);
        ::close(fd);
    }
    return removed;
}

void write_file_atomic(const std::filesystem::path& requested, std::string_view bytes) {
    // A link to a regular file is written through (the link stays); a FIFO, device or folder
    // is refused.
    const std::filesystem::path path = checked_output_path(requested);
    const std::filesystem::path tmp = temp_file_for(path);
    remove_stale_temp_files(path, std::chrono::minutes(1));
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) fail("cannot create {}: {}", tmp.string(), std::strerror(errno));
    ::flock(fd, LOCK_EX | LOCK_NB);  // held until close: marks the file as being written
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

std::string read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) fail("cannot read {}: {}", path.string(), std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        const int err = errno;
        ::close(fd);
        fail("cannot read {}: {}", path.string(), std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        fail("cannot read {}: it is {}, not a regular file", path.string(),
             S_ISDIR(st.st_mode)    ? "a folder"
             : S_ISFIFO(st.st_mode) ? "a FIFO (named pipe)"
             : S_ISSOCK(st.st_mode) ? "a socket"
                                    : "a device");
    }
    if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
        ::close(fd);
        fail("cannot read {}: {} bytes, more than the {} this file may have", path.string(),
             static_cast<long long>(st.st_size), max_bytes);
    }
    std::string out(static_cast<std::size_t>(st.st_size), '\0');
    std::size_t done = 0;
    while (done < out.size()) {
        const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const int err = errno;
            ::close(fd);
            fail("cannot read {}: {}", path.string(), std::strerror(err));
        }
        if (n == 0) break;  // shrank meanwhile
        done += static_cast<std::size_t>(n);
    }
    ::close(fd);
    out.resize(done);
    return out;
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
