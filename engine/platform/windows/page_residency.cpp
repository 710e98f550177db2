#include "platform/page_residency.h"

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
// PSAPI_VERSION 2: QueryWorkingSetEx is K32QueryWorkingSetEx in kernel32 (Windows 7+), so no
// psapi.lib is needed.
#ifndef PSAPI_VERSION
#define PSAPI_VERSION 2
#endif
#include <psapi.h>

#include <algorithm>
#include <vector>

namespace neural {

namespace {

struct PageSpan {
    std::uintptr_t begin = 0;
    std::uintptr_t end = 0;  // exclusive, page-aligned
};

PageSpan widen(const void* p, std::size_t n) {
    const std::uintptr_t page = page_size();
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    return {a & ~(page - 1), (a + n + page - 1) & ~(page - 1)};
}

std::string with_code(const char* what, DWORD code) {
    return std::string(what) + " failed (error " + std::to_string(code) + ")";
}

}  // namespace

std::size_t page_size() {
    static const std::size_t page = [] {
        SYSTEM_INFO si{};
        GetSystemInfo(&si);
        return si.dwPageSize > 0 ? static_cast<std::size_t>(si.dwPageSize) : std::size_t{4096};
    }();
    return page;
}

std::optional<std::uint64_t> resident_pages(const void* p, std::size_t n) {
    if (p == nullptr || n == 0) return 0;
    const PageSpan s = widen(p, n);
    const std::size_t pages = (s.end - s.begin) / page_size();
    std::vector<PSAPI_WORKING_SET_EX_INFORMATION> info(pages);
    for (std::size_t i = 0; i < pages; ++i) {
        info[i].VirtualAddress = reinterpret_cast<void*>(s.begin + i * page_size());
    }
    if (!QueryWorkingSetEx(GetCurrentProcess(), info.data(),
                           static_cast<DWORD>(info.size() * sizeof(info[0])))) {
        return std::nullopt;
    }
    std::uint64_t resident = 0;
    for (const auto& e : info) resident += e.VirtualAttributes.Valid ? 1u : 0u;
    return resident;
}

std::optional<CachedMapping> map_cached_pages(const void*, std::size_t) {
    return std::nullopt;  // page_residency.h: Windows cannot say which pages the standby list holds
}

PageRelease release_mapped_pages(const MappedFile& file, std::uint64_t offset, std::uint64_t n) {
    PageRelease r;
    if (file.data() == nullptr || offset >= file.size() || n == 0) {
        r.ok = true;
        r.message = "nothing to release";
        return r;
    }
    n = std::min(n, file.size() - offset);
    const PageSpan s = widen(file.data() + offset, static_cast<std::size_t>(n));
    void* begin = reinterpret_cast<void*>(s.begin);
    const SIZE_T len = s.end - s.begin;
    // VirtualUnlock of an unlocked range removes its pages from the working set and fails with
    // ERROR_NOT_LOCKED (documented); of a locked range it only unlocks, so then trim once more.
    SetLastError(ERROR_SUCCESS);
    if (VirtualUnlock(begin, len) != 0) VirtualUnlock(begin, len);
    const DWORD code = GetLastError();
    if (code == ERROR_NOT_LOCKED || code == ERROR_SUCCESS) {
        r.mapping_released = true;
        r.ok = true;
        r.message =
            "VirtualUnlock: removed from the working set (the pages stay on the standby "
            "list until Windows reuses them)";
    } else {
        r.message = with_code("VirtualUnlock", code);
    }
    r.pages_left = resident_pages(begin, len).value_or(0);
    return r;
}

LockAllowance grow_lock_allowance(std::uint64_t extra) {
    LockAllowance a;
    const HANDLE self = GetCurrentProcess();
    SIZE_T cur_min = 0;
    SIZE_T cur_max = 0;
    DWORD flags = 0;
    if (GetProcessWorkingSetSizeEx(self, &cur_min, &cur_max, &flags) == 0) {
        a.message = with_code("GetProcessWorkingSetSizeEx", GetLastError());
        return a;
    }
    const SIZE_T add = static_cast<SIZE_T>(extra);
    const SIZE_T min = cur_min + add < cur_min ? SIZE_T(-1) / 2 : cur_min + add;
    const SIZE_T max = std::max(cur_max, min + min / 8 + (SIZE_T{64} << 20));
    if (SetProcessWorkingSetSizeEx(
            self, min, max, QUOTA_LIMITS_HARDWS_MIN_DISABLE | QUOTA_LIMITS_HARDWS_MAX_DISABLE) ==
        0) {
        a.message = with_code("SetProcessWorkingSetSizeEx", GetLastError()) +
                    ": the working-set minimum could not be raised (not enough RAM for it?)";
        return a;
    }
    a.ok = true;
    a.message =
        "working-set minimum " + std::to_string(min) + " bytes (SetProcessWorkingSetSizeEx)";
    return a;
}

}  // namespace neural
