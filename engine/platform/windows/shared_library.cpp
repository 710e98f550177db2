#include "platform/shared_library.h"

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

#include <string>
#include <utility>
#include <vector>

#include "neural/error.h"

namespace neural {

namespace {

// FormatMessageW text for a Win32 error code, as UTF-8 without the trailing newline.
std::string win32_message(DWORD code) {
    wchar_t* buf = nullptr;
    const DWORD n = FormatMessageW(
        FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
        nullptr, code, 0, reinterpret_cast<wchar_t*>(&buf), 0, nullptr);
    std::string out;
    if (n > 0 && buf != nullptr) {
        const int len =
            WideCharToMultiByte(CP_UTF8, 0, buf, static_cast<int>(n), nullptr, 0, nullptr, nullptr);
        out.resize(static_cast<size_t>(len));
        WideCharToMultiByte(CP_UTF8, 0, buf, static_cast<int>(n), out.data(), len, nullptr,
                            nullptr);
        while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) {
            out.pop_back();
        }
    }
    if (buf != nullptr) LocalFree(buf);
    return out + " (error " + std::to_string(code) + ")";
}

}  // namespace

SharedLibrary SharedLibrary::open(const std::filesystem::path& path) {
    // LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR lets the DLL's own dependencies be found beside it; it
    // requires an absolute path, so relative paths are made absolute first.
    std::error_code ec;
    const std::filesystem::path abs = std::filesystem::absolute(path, ec);
    const std::filesystem::path& use = ec ? path : abs;
    HMODULE h = LoadLibraryExW(use.c_str(), nullptr,
                               LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR | LOAD_LIBRARY_SEARCH_DEFAULT_DIRS);
    if (h == nullptr) {
        const DWORD err = GetLastError();
        fail("cannot load shared library {}: {}", path.string(), win32_message(err));
    }
    SharedLibrary lib;
    lib.handle_ = h;
    lib.path_ = path;
    return lib;
}

std::string SharedLibrary::file_name(std::string_view base) { return std::string(base) + ".dll"; }

SharedLibrary::SharedLibrary(SharedLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), path_(std::move(other.path_)) {}

SharedLibrary& SharedLibrary::operator=(SharedLibrary&& other) noexcept {
    if (this != &other) {
        release();
        handle_ = std::exchange(other.handle_, nullptr);
        path_ = std::move(other.path_);
    }
    return *this;
}

SharedLibrary::~SharedLibrary() { release(); }

void SharedLibrary::release() {
    if (handle_ != nullptr) FreeLibrary(static_cast<HMODULE>(handle_));
    handle_ = nullptr;
}

void* SharedLibrary::symbol(const char* name) const {
    if (handle_ == nullptr) return nullptr;
    return reinterpret_cast<void*>(GetProcAddress(static_cast<HMODULE>(handle_), name));
}

std::filesystem::path executable_dir() {
    std::vector<wchar_t> buf(1024);
    for (;;) {
        const DWORD n = GetModuleFileNameW(nullptr, buf.data(), static_cast<DWORD>(buf.size()));
        if (n == 0) return {};
        if (n < buf.size()) return std::filesystem::path(std::wstring(buf.data(), n)).parent_path();
        buf.resize(buf.size() * 2);
    }
}

}  // namespace neural
