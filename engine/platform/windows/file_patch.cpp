#include "platform/file_patch.h"

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

#include "platform/windows/win_error.h"

#include <string>

#include "neural/error.h"

namespace neural {

using win::last_error_text;

void write_file_range(const std::filesystem::path& path, std::uint64_t offset, const void* data,
                      std::size_t n) {
    HANDLE h = CreateFileW(path.c_str(), GENERIC_WRITE, 0, nullptr, OPEN_EXISTING,
                           FILE_ATTRIBUTE_NORMAL, nullptr);
    if (h == INVALID_HANDLE_VALUE) {
        fail("cannot open {} for writing: {}", path.string(), last_error_text());
    }
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
        const DWORD piece =
            static_cast<DWORD>(n < (std::size_t{1} << 30) ? n : (std::size_t{1} << 30));
        OVERLAPPED ov{};
        ov.Offset = static_cast<DWORD>(offset & 0xffffffffu);
        ov.OffsetHigh = static_cast<DWORD>(offset >> 32);
        DWORD written = 0;
        const bool ok = WriteFile(h, p, piece, &written, &ov) != 0;
        if (!ok || written == 0) {
            const std::string why = ok ? std::string("disk full") : last_error_text();
            CloseHandle(h);
            fail("cannot write {}: {}", path.string(), why);
        }
        p += written;
        n -= written;
        offset += written;
    }
    if (!CloseHandle(h)) fail("cannot write {}: {}", path.string(), last_error_text());
}

void sync_directory(const std::filesystem::path&) {}

}  // namespace neural
