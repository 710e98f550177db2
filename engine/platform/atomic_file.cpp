// The platform-independent part of atomic_file.h: the temporary files' names, shared by
// write_file_atomic, repack and remove_stale_temp_files (posix/ and windows/).
#include "platform/atomic_file.h"

#include <algorithm>
#include <random>
#include <string>

namespace neural {

namespace {
// ".tmp-" in the platform's path characters.
std::filesystem::path::string_type temp_infix() { return std::filesystem::path(".tmp-").native(); }
}  // namespace

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
