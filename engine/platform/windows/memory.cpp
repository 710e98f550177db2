#include "platform/memory.h"

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
// windows.h first: the shell headers need its types.
#include <knownfolders.h>
#include <shlobj.h>

namespace neural {

namespace {

std::string with_code(const char* what, DWORD code) {
    return std::string(what) + " failed (error " + std::to_string(code) + ")";
}

}  // namespace

bool advise_huge_pages(void*, std::size_t) { return false; }

bool lock_memory(const void* p, std::size_t n, std::string* error) {
    if (p == nullptr || n == 0) return true;
    if (VirtualLock(const_cast<void*>(p), n) != 0) return true;
    if (error != nullptr) {
        const DWORD code = GetLastError();
        *error = with_code("VirtualLock", code);
        if (code == ERROR_WORKING_SET_QUOTA) *error += ": raise the working-set minimum (--ws-min)";
    }
    return false;
}

void unlock_memory(const void* p, std::size_t n) {
    if (p == nullptr || n == 0) return;
    VirtualUnlock(const_cast<void*>(p), n);
}

bool set_working_set_minimum(std::uint64_t bytes, std::string* error) {
    const HANDLE self = GetCurrentProcess();
    SIZE_T cur_min = 0;
    SIZE_T cur_max = 0;
    DWORD flags = 0;
    if (GetProcessWorkingSetSizeEx(self, &cur_min, &cur_max, &flags) == 0) {
        if (error != nullptr) *error = with_code("GetProcessWorkingSetSizeEx", GetLastError());
        return false;
    }
    if (cur_min >= bytes) return true;
    const SIZE_T want = static_cast<SIZE_T>(bytes);
    // The maximum must exceed the minimum; it stays a soft limit (QUOTA_LIMITS_HARDWS_MAX_DISABLE).
    const SIZE_T max = cur_max > want ? cur_max : want + (want / 8) + (64u << 20);
    if (SetProcessWorkingSetSizeEx(
            self, want, max, QUOTA_LIMITS_HARDWS_MIN_DISABLE | QUOTA_LIMITS_HARDWS_MAX_DISABLE) ==
        0) {
        if (error != nullptr) *error = with_code("SetProcessWorkingSetSizeEx", GetLastError());
        return false;
    }
    return true;
}

ResidentResult keep_resident(std::uint64_t bytes, std::span<const MemoryRange> hot) {
    (void)hot;  // the working-set minimum covers whatever the process touches, no range needed
    ResidentResult r;
    std::string error;
    r.ok = set_working_set_minimum(bytes, &error);
    r.message = r.ok ? "working-set minimum " + std::to_string(bytes) +
                           " bytes (SetProcessWorkingSetSizeEx)"
                     : error;
    return r;
}

std::filesystem::path app_data_dir() {
    PWSTR path = nullptr;
    std::filesystem::path out;
    if (SUCCEEDED(SHGetKnownFolderPath(FOLDERID_LocalAppData, 0, nullptr, &path)) &&
        path != nullptr) {
        out = std::filesystem::path(path) / L"Neural";
    }
    CoTaskMemFree(path);
    return out;
}

}  // namespace neural
