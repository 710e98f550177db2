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
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace neural {

// Writes `bytes` to checked_output_path(path) through a temporary file and a rename.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// Where a file Neural writes to `path` may go (docs/RELIABILITY.md "Output paths"): `path` itself
// when nothing is there or a regular file is; for a symbolic link, the regular file it points to
// (written through: the link stays a link). Anything else -- a folder, a FIFO, a socket, a
// device (Windows: a reserved device name such as NUL or COM1, or a \\.\ path), a link to one
// of those or a dangling link -- throws neural::Error naming the path and what is there, so no
// write ever blocks on a FIFO or replaces a device. Every writer of files (write_file_atomic,
// OutputFile::create, repack, the app's exports) checks its destination with it.
std::filesystem::path checked_output_path(const std::filesystem::path& path);

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

// Reads a small file Neural keeps beside its data (the expert statistics): only a regular file
// (or a link to one) of at most `max_bytes`. The type is checked on the opened file, which is
// opened without waiting (POSIX O_NONBLOCK: a FIFO never blocks the caller), before any byte is
// read; a folder, FIFO, device or larger file throws neural::Error naming the path and why.
std::string read_regular_file(const std::filesystem::path& path, std::uint64_t max_bytes);

// Flushes a written file's data to stable storage (fsync / FlushFileBuffers).
void sync_file(const std::filesystem::path& path);

}  // namespace neural
