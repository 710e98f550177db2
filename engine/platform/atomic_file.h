// Crash-safe file replacement: data goes to a temporary file in the same folder, is flushed to
// disk, and is renamed over the target, so readers see either the old or the new file, never a
// torn one. A full disk or any write error leaves the old file intact and throws neural::Error.
#pragma once

#include <filesystem>
#include <string_view>

namespace neural {

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

// Flushes a written file's data to stable storage (fsync / FlushFileBuffers).
void sync_file(const std::filesystem::path& path);

}  // namespace neural
