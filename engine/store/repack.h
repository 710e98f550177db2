// `neural repack`: writes an expert store from a checkpoint (docs/STORE_FORMAT.md).
//
// Streaming with bounded memory: records are built (copied, scales packed, checksummed) by
// worker threads into at most threads + 2 record buffers and written in order by the calling
// thread; the checkpoint stays memory-mapped and is read once, record by record. Atomic: the
// store is written to a temporary file beside the destination ("STORE.tmp-N"), its header (the
// only place with the magic) last, synced and renamed over the destination only when complete.
// A failed or cancelled repack removes the temporary file and leaves an existing store intact.
// A killed one cannot: its STORE.tmp-N stays (up to the store's size). The writer holds a lock on
// its temporary file while it runs (POSIX flock, released by the kernel when the process dies),
// and every repack starts by removing the STORE.tmp-N files beside its destination that no live
// writer holds (remove_stale_temp_files), before the free-space check.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "store/format.h"

namespace neural::store {

struct RepackProgress {
    std::uint64_t bytes_done = 0;   // store bytes written so far
    std::uint64_t bytes_total = 0;  // expected store size (packed: escapes counted as they appear)
    std::int64_t records_done = 0;
    std::int64_t records_total = 0;
    double seconds = 0.0;           // since the repack started
    double bytes_per_second = 0.0;  // bytes_done / seconds
    double eta_seconds = 0.0;       // remaining bytes at the average rate so far
};

struct RepackOptions {
    std::filesystem::path checkpoint;  // checkpoint folder (config.json + safetensors) or GGUF file
    std::filesystem::path out;         // the store file to create or replace
    StoreKind kind = StoreKind::kRaw;
    int threads = 0;  // record builders (I/O bound, so not tied to cores); 0 = 8
    // Called from the calling thread after every record written (the last call has
    // records_done == records_total); callers throttle their display.
    std::function<void(const RepackProgress&)> on_progress;
    const std::atomic<bool>* cancel = nullptr;  // checked between records; throws Cancelled
    // Called from the calling thread for each temporary file of an interrupted repack that was
    // removed before writing (also listed in RepackResult::stale_removed).
    std::function<void(const std::filesystem::path&)> on_stale_removed;
    std::string created_by = "neural";  // recorded in the metadata
};

struct RepackResult {
    std::filesystem::path path;
    StoreKind kind = StoreKind::kRaw;
    std::uint64_t bytes = 0;          // file size
    std::uint64_t payload_bytes = 0;  // sum of record payloads
    std::int64_t records = 0;
    std::uint64_t escaped_rows = 0;  // packed rows stored with their raw scales
    double seconds = 0.0;
    std::vector<std::filesystem::path> stale_removed;  // temporary files of killed repacks
};

// Removes the temporary files a killed repack to `out` left behind: exactly the names
// "<out's file name>.tmp-<decimal digits>" in out's folder, regular files only, and only those no
// running repack holds (POSIX: the writer's flock; a live writer's file is skipped. Windows: a file
// another process has open cannot be removed, so a live writer's file stays). Nothing else is
// touched. Returns the removed paths; errors are ignored (the file stays).
std::vector<std::filesystem::path> remove_stale_temp_files(const std::filesystem::path& out);

// Throws neural::Error (bad checkpoint, not enough disk space, write errors, ...) or
// neural::Cancelled; in every such case the destination is unchanged and nothing is left behind.
RepackResult repack(const RepackOptions& options);

}  // namespace neural::store
