// Loading a shared library (.so / .dll) at run time and looking up C symbols, for optional
// native parts that ship as separate files (the persistent CPU worker team).
// POSIX (dlopen): engine/platform/posix/shared_library.cpp;
// Windows (LoadLibraryW): engine/platform/windows/shared_library.cpp.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace neural {

class SharedLibrary {
public:
    // Loads `path` (used as given: no search path when it contains a directory). Throws
    // neural::Error naming the file and the loader's reason (missing file, missing dependency,
    // wrong architecture, ...).
    static SharedLibrary open(const std::filesystem::path& path);

    // "lib<base>.so" on Linux, "<base>.dll" on Windows, "lib<base>.dylib" on macOS: the name
    // CMake gives a SHARED library target called <base>.
    static std::string file_name(std::string_view base);

    SharedLibrary() = default;
    SharedLibrary(SharedLibrary&& other) noexcept;
    SharedLibrary& operator=(SharedLibrary&& other) noexcept;
    SharedLibrary(const SharedLibrary&) = delete;
    SharedLibrary& operator=(const SharedLibrary&) = delete;
    ~SharedLibrary();  // unloads; every pointer obtained from symbol() dies with it

    // Address of the exported C symbol `name`, or nullptr when the library does not export it.
    void* symbol(const char* name) const;

    bool loaded() const { return handle_ != nullptr; }
    const std::filesystem::path& path() const { return path_; }

private:
    void release();

    void* handle_ = nullptr;
    std::filesystem::path path_;
};

// Folder of the running executable (resolves symlinks on POSIX); empty if it cannot be found.
std::filesystem::path executable_dir();

}  // namespace neural
