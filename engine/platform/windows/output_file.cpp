#include "platform/output_file.h"

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <io.h>
#include <windows.h>

#include "platform/windows/win_error.h"

#include <cstdio>
#include <string>
#include <utility>

#include "neural/error.h"
#include "platform/atomic_file.h"

namespace neural {

using win::last_error_text;

namespace {

// GetLastError() -> the words a user needs; "out of space" gets its plain name.

}  // namespace

// `unbuffered` is ignored: FILE_FLAG_NO_BUFFERING cannot be dropped for a file's unaligned tail
// without reopening the file.
OutputFile OutputFile::create(const std::filesystem::path& path, bool /*unbuffered*/) {
    OutputFile f;
    f.path_ = checked_output_path(path);
    HANDLE h = CreateFileW(f.path_.c_str(), GENERIC_WRITE, 0, nullptr, CREATE_ALWAYS,
                           FILE_ATTRIBUTE_NORMAL | FILE_FLAG_SEQUENTIAL_SCAN, nullptr);
    if (h == INVALID_HANDLE_VALUE) fail("cannot create {}: {}", path.string(), last_error_text());
    f.handle_ = h;
    return f;
}

OutputFile::OutputFile(OutputFile&& other) noexcept
    : path_(std::move(other.path_)), handle_(std::exchange(other.handle_, nullptr)) {}

OutputFile& OutputFile::operator=(OutputFile&& other) noexcept {
    if (this != &other) {
        if (handle_ != nullptr) CloseHandle(handle_);
        path_ = std::move(other.path_);
        handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
}

OutputFile::~OutputFile() {
    if (handle_ != nullptr) CloseHandle(handle_);
}

void OutputFile::set_buffered() {}

bool OutputFile::is_open() const { return handle_ != nullptr; }

void OutputFile::write(const void* data, std::size_t n) {
    if (handle_ == nullptr) fail("cannot write {}: the file is not open", path_.string());
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
        // WriteFile takes a 32-bit count.
        constexpr std::size_t kMaxPiece = std::size_t{1} << 30;
        const DWORD piece = static_cast<DWORD>(n < kMaxPiece ? n : kMaxPiece);
        DWORD written = 0;
        if (!WriteFile(handle_, p, piece, &written, nullptr)) {
            fail("cannot write {}: {}", path_.string(), last_error_text());
        }
        if (written == 0) fail("cannot write {}: disk full", path_.string());
        p += written;
        n -= written;
    }
}

void OutputFile::sync() {
    if (handle_ == nullptr) return;
    if (!FlushFileBuffers(handle_)) {
        fail("cannot flush {} to disk: {}", path_.string(), last_error_text());
    }
}

void OutputFile::close() {
    if (handle_ == nullptr) return;
    HANDLE h = std::exchange(handle_, nullptr);
    if (!CloseHandle(h)) fail("cannot close {}: {}", path_.string(), last_error_text());
}

bool stderr_is_terminal() { return _isatty(_fileno(stderr)) != 0; }

}  // namespace neural
