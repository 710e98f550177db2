// Crash-safe file replacement: data goes to a temporary file in the same folder, is flushed to
// disk, and is renamed over the target, so readers see either the old or the new file, never a
// torn one. A full disk or any write error leaves the old file intact and throws neural::Error.
// The temporary file is NAME.tmp-DIGITS; a writer killed mid-write leaves it behind, and the next
// write of the same NAME removes such files that no writer holds (POSIX: the writer keeps an
// flock on it, which the kernel drops when the process dies; files younger than a minute are
// left alone as well. Windows: the writer opens it without sharing, so it cannot be deleted
// while written).
#pragma once

#include <chrono>
#include <filesystem>
#include <string_view>
#include <vector>

namespace neural {

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// The temporary files of writers of `path` that were killed: exactly "<file name>.tmp-<decimal
// digits>" beside it, regular files only, that no live writer holds (POSIX: the writer keeps an
// flock on it; Windows: a file another process has open cannot be deleted) and, POSIX, at least
// `min_age` old (a writer between creating its file and locking it). Removes them and returns
// their paths; errors are ignored (the file stays). write_file_atomic and repack call it.
std::vector<std::filesystem::path> remove_stale_temp_files(const std::filesystem::path& path,
                                                           std::chrono::seconds min_age);

// The temporary file for `path`: "<file name>.tmp-<random decimal digits>" beside it (used by
// write_file_atomic and repack), and whether `file` is such a name for `path`.
std::filesystem::path temp_file_for(const std::filesystem::path& path);
bool is_temp_file_of(const std::filesystem::path& file, const std::filesystem::path& path);

// Flushes a written file's data to stable storage (fsync / FlushFileBuffers).
void sync_file(const std::filesystem::path& path);

}  // namespace neural
