#include "platform/mapped_file.h"

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

#include "platform/windows/win_error.h"

#include <utility>

#include "neural/error.h"

namespace neural {

using win::last_error_text;

MappedFile MappedFile::open(const std::filesystem::path& path) {
    MappedFile file;
    file.path_ = path;
    HANDLE h = CreateFileW(path.c_str(), GENERIC_READ, FILE_SHARE_READ, nullptr, OPEN_EXISTING,
                           FILE_ATTRIBUTE_NORMAL, nullptr);
    if (h == INVALID_HANDLE_VALUE) fail("cannot open {}: {}", path.string(), last_error_text());
    LARGE_INTEGER size{};
    if (!GetFileSizeEx(h, &size)) {
        std::string err = last_error_text();
        CloseHandle(h);
        fail("cannot stat {}: {}", path.string(), err);
    }
    file.file_handle_ = h;
    file.size_ = static_cast<std::uint64_t>(size.QuadPart);
    if (file.size_ > 0) {
        // Large files: CreateFileMapping takes the full 64-bit size (0, 0 = whole file).
        HANDLE m = CreateFileMappingW(h, nullptr, PAGE_READONLY, 0, 0, nullptr);
        if (m == nullptr) {
            std::string err = last_error_text();
            file.release();
            fail("cannot map {}: {}", path.string(), err);
        }
        file.mapping_handle_ = m;
        void* p = MapViewOfFile(m, FILE_MAP_READ, 0, 0, 0);
        if (p == nullptr) {
            std::string err = last_error_text();
            file.release();
            fail("cannot map a view of {} ({} bytes): {}", path.string(), file.size_, err);
        }
        file.data_ = static_cast<const std::uint8_t*>(p);
    }
    return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)),
      file_handle_(std::exchange(other.file_handle_, nullptr)),
      mapping_handle_(std::exchange(other.mapping_handle_, nullptr)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        path_ = std::move(other.path_);
        file_handle_ = std::exchange(other.file_handle_, nullptr);
        mapping_handle_ = std::exchange(other.mapping_handle_, nullptr);
    }
    return *this;
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() {
    if (data_ != nullptr) UnmapViewOfFile(data_);
    if (mapping_handle_ != nullptr) CloseHandle(static_cast<HANDLE>(mapping_handle_));
    if (file_handle_ != nullptr) CloseHandle(static_cast<HANDLE>(file_handle_));
    data_ = nullptr;
    mapping_handle_ = nullptr;
    file_handle_ = nullptr;
    size_ = 0;
}

}  // namespace neural
