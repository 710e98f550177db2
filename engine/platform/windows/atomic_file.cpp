#include "platform/atomic_file.h"

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

#include <algorithm>
#include <system_error>
#include <vector>

#include "neural/error.h"
#include "platform/windows/win_error.h"

namespace neural {

std::vector<std::filesystem::path> remove_stale_temp_files(const std::filesystem::path& path,
                                                           std::chrono::seconds /*min_age*/) {
    // A live writer has its file open without sharing, so deleting it fails; a killed writer's
    // file goes.
    std::vector<std::filesystem::path> removed;
    std::error_code ec;
    const std::filesystem::path dir =
        path.parent_path().empty() ? std::filesystem::path(L".") : path.parent_path();
    std::filesystem::directory_iterator it(dir, ec);
    if (ec) return removed;
    for (const std::filesystem::directory_entry& e : it) {
        if (!is_temp_file_of(e.path(), path)) continue;
        if (e.is_regular_file(ec) && !e.is_symlink(ec) && DeleteFileW(e.path().c_str()))
            removed.push_back(e.path());
    }
    return removed;
}

void write_file_atomic(const std::filesystem::path& requested, std::string_view bytes) {
    // A link to a regular file is written through (the link stays); a FIFO, device or folder
    // is refused.
    const std::filesystem::path path = checked_output_path(requested);
    remove_stale_temp_files(path, std::chrono::minutes(1));
    const std::filesystem::path tmp = temp_file_for(path);
    HANDLE h = CreateFileW(tmp.c_str(), GENERIC_WRITE, 0, nullptr, CREATE_NEW,
                           FILE_ATTRIBUTE_NORMAL, nullptr);
    if (h == INVALID_HANDLE_VALUE) {
        fail("cannot create {} (error {})", tmp.string(),
             static_cast<unsigned long>(GetLastError()));
    }
    size_t done = 0;
    bool ok = true;
    DWORD err = 0;
    while (ok && done < bytes.size()) {
        DWORD chunk = static_cast<DWORD>(std::min<size_t>(bytes.size() - done, 1u << 30));
        DWORD wrote = 0;
        ok = WriteFile(h, bytes.data() + done, chunk, &wrote, nullptr) != 0;
        if (!ok) err = GetLastError();
        done += wrote;
    }
    if (ok && !FlushFileBuffers(h)) {
        ok = false;
        err = GetLastError();
    }
    CloseHandle(h);
    if (!ok) {
        DeleteFileW(tmp.c_str());
        fail("cannot write {} (error {}{})", path.string(), static_cast<unsigned long>(err),
             err == ERROR_DISK_FULL ? ": disk full" : "");
    }
    if (!MoveFileExW(tmp.c_str(), path.c_str(),
                     MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) {
        err = GetLastError();
        DeleteFileW(tmp.c_str());
        fail("cannot replace {} (error {})", path.string(), static_cast<unsigned long>(err));
    }
}

void sync_file(const std::filesystem::path& path) {
    HANDLE h = CreateFileW(path.c_str(), GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE, nullptr,
                           OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr);
    if (h == INVALID_HANDLE_VALUE) fail("cannot open {}", path.string());
    BOOL ok = FlushFileBuffers(h);
    CloseHandle(h);
    if (!ok) fail("cannot flush {}", path.string());
}

std::string read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes) {
    // FILE_FLAG_BACKUP_SEMANTICS opens a folder too, so that it is refused below by its type
    // rather than with an access error.
    HANDLE h =
        CreateFileW(path.c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, nullptr,
                    OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL | FILE_FLAG_BACKUP_SEMANTICS, nullptr);
    if (h == INVALID_HANDLE_VALUE)
        fail("cannot read {}: {}", path.string(), win::last_error_text());
    struct Closer {
        HANDLE h;
        ~Closer() { CloseHandle(h); }
    } closer{h};
    BY_HANDLE_FILE_INFORMATION info{};
    if (GetFileType(h) != FILE_TYPE_DISK || !GetFileInformationByHandle(h, &info) ||
        (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) != 0) {
        fail("cannot read {}: it is not a regular file", path.string());
    }
    const std::uint64_t size =
        (static_cast<std::uint64_t>(info.nFileSizeHigh) << 32) | info.nFileSizeLow;
    if (size > max_bytes) {
        fail("cannot read {}: {} bytes, more than the {} this file may have", path.string(), size,
             max_bytes);
    }
    std::string out(static_cast<std::size_t>(size), '\0');
    std::size_t done = 0;
    while (done < out.size()) {
        DWORD n = 0;
        if (!ReadFile(h, out.data() + done, static_cast<DWORD>(out.size() - done), &n, nullptr))
            fail("cannot read {}: {}", path.string(), win::last_error_text());
        if (n == 0) break;
        done += n;
    }
    out.resize(done);
    return out;
}

}  // namespace neural
