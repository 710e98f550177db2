// In-place updates of a written file, for writers that fill a header in last (the expert store
// writes its records first and then the header that holds their checksums), and durable renames.
// POSIX: engine/platform/posix/file_patch.cpp; Windows: engine/platform/windows/file_patch.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace neural {

// Overwrites bytes [offset, offset + n) of the existing file `path` (no truncation, no creation).
// Throws neural::Error naming the file and the reason.
void write_file_range(const std::filesystem::path& path, std::uint64_t offset, const void* data,
                      std::size_t n);

// Makes a rename or creation inside `dir` durable (POSIX: fsync of the folder; Windows: nothing
// to do, NTFS journals it). Best effort: errors are ignored, the data itself is already synced.
void sync_directory(const std::filesystem::path& dir);

}  // namespace neural
