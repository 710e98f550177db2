// The platform-independent part of atomic_file.h: the temporary files' names, shared by
// write_file_atomic, repack and remove_stale_temp_files (posix/ and windows/).
#include "platform/atomic_file.h"

#include <algorithm>
#include <cctype>
#include <random>
#include <string>

#include "neural/error.h"

namespace neural {

namespace {
// ".tmp-" in the platform's path characters.
std::filesystem::path::string_type temp_infix() { return std::filesystem::path(".tmp-").native(); }
}  // namespace

namespace {

const char* type_name(std::filesystem::file_type t) {
    using T = std::filesystem::file_type;
    switch (t) {
        case T::directory:
            return "a folder";
        case T::fifo:
            return "a FIFO (named pipe)";
        case T::socket:
            return "a socket";
        case T::block:
            return "a block device";
        case T::character:
            return "a character device";
        default:
            return "not a regular file";
    }
}

// Windows opens these names (with any extension, in any folder) as devices.
bool windows_device_name(const std::filesystem::path& path) {
    const std::string full = path.generic_string();
    if (full.rfind("//./", 0) == 0 || full.rfind("//?/GLOBALROOT", 0) == 0) return true;
    std::string stem = path.stem().string();
    std::transform(stem.begin(), stem.end(), stem.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    while (!stem.empty() && (stem.back() == ' ' || stem.back() == '.')) stem.pop_back();
    if (stem == "CON" || stem == "PRN" || stem == "AUX" || stem == "NUL" || stem == "CONIN$" ||
        stem == "CONOUT$")
        return true;
    return stem.size() == 4 && (stem.rfind("COM", 0) == 0 || stem.rfind("LPT", 0) == 0) &&
           stem[3] >= '1' && stem[3] <= '9';
}

}  // namespace

std::filesystem::path checked_output_path(const std::filesystem::path& path) {
    namespace fs = std::filesystem;
#ifdef _WIN32
    if (windows_device_name(path))
        fail("cannot write {}: it names a device; Neural writes only regular files", path.string());
#else
    (void)&windows_device_name;
#endif
    std::error_code ec;
    const fs::file_status own = fs::symlink_status(path, ec);
    if (own.type() == fs::file_type::not_found) return path;
    if (ec) fail("cannot write {}: {}", path.string(), ec.message());
    if (own.type() == fs::file_type::regular) return path;
    if (own.type() != fs::file_type::symlink) {
        fail(
            "cannot write {}: it is {}; Neural writes only regular files (remove it or choose "
            "another path)",
            path.string(), type_name(own.type()));
    }
    const fs::file_status target = fs::status(path, ec);
    if (target.type() == fs::file_type::not_found) {
        fail(
            "cannot write {}: it is a symbolic link to a file that does not exist; Neural writes "
            "through a link only to an existing regular file",
            path.string());
    }
    if (ec) fail("cannot write {}: {}", path.string(), ec.message());
    if (target.type() != fs::file_type::regular) {
        fail("cannot write {}: it is a symbolic link to {}; Neural writes only regular files",
             path.string(), type_name(target.type()));
    }
    const fs::path resolved = fs::canonical(path, ec);
    if (ec) fail("cannot write {}: {}", path.string(), ec.message());
    return resolved;
}

std::filesystem::path temp_file_for(const std::filesystem::path& path) {
    std::random_device rd;
    return path.parent_path() / (path.filename().native() + temp_infix() +
                                 std::filesystem::path(std::to_string(rd())).native());
}

bool is_temp_file_of(const std::filesystem::path& file, const std::filesystem::path& path) {
    const auto name = file.filename().native();
    const auto prefix = path.filename().native() + temp_infix();
    if (name.size() <= prefix.size() || name.size() > prefix.size() + 20) return false;
    if (name.compare(0, prefix.size(), prefix) != 0) return false;
    return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()), name.end(),
                       [](auto c) { return c >= '0' && c <= '9'; });
}

}  // namespace neural
