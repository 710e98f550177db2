#include "platform/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "neural/error.h"

namespace neural {

MappedFile MappedFile::open(const std::filesystem::path& path) {
    MappedFile file;
    file.path_ = path;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("cannot open {}: {}", path.string(), std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        int err = errno;
        ::close(fd);
        fail("cannot stat {}: {}", path.string(), std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        fail("{} is not a regular file", path.string());
    }
    file.size_ = static_cast<std::uint64_t>(st.st_size);
    if (file.size_ > 0) {
        void* p = ::mmap(nullptr, file.size_, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            int err = errno;
            ::close(fd);
            fail("cannot map {} ({} bytes): {}", path.string(), file.size_, std::strerror(err));
        }
        file.data_ = static_cast<const std::uint8_t*>(p);
        file.fd_ = fd;  // kept: page-cache hints need the file (release_mapped_pages)
    } else {
        ::close(fd);
    }
    return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        path_ = std::move(other.path_);
        fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() {
    if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    data_ = nullptr;
    size_ = 0;
}

}  // namespace neural
