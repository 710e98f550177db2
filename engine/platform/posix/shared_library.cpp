#include "platform/shared_library.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <system_error>
#include <utility>

#if defined(__APPLE__)
#include <mach-o/dyld.h>
#endif

#include "neural/error.h"

namespace neural {

SharedLibrary SharedLibrary::open(const std::filesystem::path& path) {
    ::dlerror();  // clear a stale message
    // RTLD_NODELETE: the library stays mapped after dlclose. The persistent team library has
    // thread_local state; unmapping a module with TLS left stale DTV entries that crashed
    // LeakSanitizer's exit scan (ASan pass: FixtureStore.PersistentTeamGivesTheSameBitsAsOpenMp
    // loads and closes it six times). Reloading then returns the same, already-mapped copy.
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (h == nullptr) {
        const char* why = ::dlerror();
        fail("cannot load shared library {}: {}", path.string(),
             why != nullptr ? why : "unknown dlopen error");
    }
    SharedLibrary lib;
    lib.handle_ = h;
    lib.path_ = path;
    return lib;
}

std::string SharedLibrary::file_name(std::string_view base) {
#if defined(__APPLE__)
    return "lib" + std::string(base) + ".dylib";
#else
    return "lib" + std::string(base) + ".so";
#endif
}

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
    if (handle_ != nullptr) ::dlclose(handle_);
    handle_ = nullptr;
}

void* SharedLibrary::symbol(const char* name) const {
    if (handle_ == nullptr) return nullptr;
    return ::dlsym(handle_, name);
}

std::filesystem::path executable_dir() {
#if defined(__APPLE__)
    char buf[4096];
    std::uint32_t size = sizeof buf;
    if (_NSGetExecutablePath(buf, &size) != 0) return {};
    std::error_code ec;
    auto p = std::filesystem::weakly_canonical(buf, ec);
    return ec ? std::filesystem::path(buf).parent_path() : p.parent_path();
#else
    std::error_code ec;
    const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return {};
    return p.parent_path();
#endif
}

}  // namespace neural
