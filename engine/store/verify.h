// `neural verify-store`: the header (ExpertStore::open), every record checksum and packed escape,
// and with the source checkpoint that every expert decodes to exactly the checkpoint's bytes
// (raw) or values (packed: same code bytes, same scale bytes), plus the checkpoint's full hash.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "store/format.h"

namespace neural::store {

struct VerifyProgress {
    std::int64_t records_done = 0;
    std::int64_t records_total = 0;
    double seconds = 0.0;
};

struct VerifyOptions {
    std::filesystem::path checkpoint;  // empty: checksums only
    int threads = 0;                   // 0 = all hardware threads
    // Called from the calling thread after each layer.
    std::function<void(const VerifyProgress&)> on_progress;
    const std::atomic<bool>* cancel = nullptr;  // checked between records; throws Cancelled
    std::size_t max_problems = 20;              // problems listed (all are counted)
};

struct VerifyReport {
    std::string description;  // describe_store()
    StoreKind kind = StoreKind::kRaw;
    std::uint64_t file_bytes = 0;
    std::uint64_t payload_bytes = 0;
    std::uint64_t escaped_rows = 0;
    std::int64_t records = 0;
    bool checkpoint_checked = false;
    double seconds = 0.0;
    std::int64_t problem_count = 0;
    // The first max_problems problems in (layer, expert) order, each naming its layer and expert
    // (or the checkpoint tensor).
    std::vector<std::string> problems;
    bool ok() const { return problem_count == 0; }
};

// Throws neural::Error when the store cannot be opened at all (not a store, truncated, future
// version, bad header checksum, ...) or the checkpoint has another shape; damaged records and
// differences from the checkpoint are reported in VerifyReport::problems.
VerifyReport verify_store(const std::filesystem::path& store, const VerifyOptions& options);

}  // namespace neural::store
