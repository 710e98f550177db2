#include "platform/atomic_file.h"

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

#include <random>

#include "neural/error.h"

namespace neural {

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
    std::random_device rd;
    const std::filesystem::path tmp =
        path.parent_path() / (path.filename().wstring() + L".tmp-" + std::to_wstring(rd()));
    HANDLE h = CreateFileW(tmp.c_str(), GENERIC_WRITE, 0, nullptr, CREATE_NEW,
                           FILE_ATTRIBUTE_NORMAL, nullptr);
    if (h == INVALID_HANDLE_VALUE) {
        fail("cannot create {} (error {})", tmp.string(), static_cast<unsigned long>(GetLastError()));
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
    if (!MoveFileExW(tmp.c_str(), path.c_str(), MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) {
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

}  // namespace neural
