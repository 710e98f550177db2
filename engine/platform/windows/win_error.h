// The text of GetLastError() for the Windows platform files' error messages (include after
// <windows.h>). Disk-full codes read "disk full" so callers need no special case.
#pragma once

#include <string>

#include <fmt/format.h>

namespace neural::win {

inline std::string last_error_text() {
    const DWORD code = GetLastError();
    if (code == ERROR_DISK_FULL || code == ERROR_HANDLE_DISK_FULL) return "disk full";
    char buf[512] = {};
    DWORD n = FormatMessageA(FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS, nullptr,
                             code, 0, buf, sizeof(buf), nullptr);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = 0;
    return fmt::format("{} (error {})", buf, static_cast<unsigned long>(code));
}

}  // namespace neural::win
