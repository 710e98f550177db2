// A memory-mapped expert store (docs/STORE_FORMAT.md). open() validates the whole structure
// (magic, version, kind, metadata, index, record offsets and sizes, header checksum) so that
// every record access afterwards is in bounds; a record's checksum is checked the first time the
// engine reads it (verify_record; `neural verify-store` checks all). The store serves expert rows
// to the CPU engine in place (ExpertSource): raw scales are read from the mapping, packed ones
// decoded per row.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/expert_source.h"
#include "model/safetensors.h"
#include "platform/mapped_file.h"
#include "platform/page_residency.h"
#include "store/format.h"
#include "store/identity.h"
#include "telemetry/telemetry.h"

namespace neural::store {

// The model fields a store records (metadata "model").
struct StoreShape {
    std::string model_type;
    int hidden_size = 0;
    int intermediate_size = 0;
    int num_layers = 0;
    int num_experts = 0;
};

// One expert of one layer.
struct ExpertKey {
    int layer = 0;
    int expert = 0;
    bool operator==(const ExpertKey&) const = default;
};

// What ExpertStore::warm_up() did.
struct WarmupReport {
    std::uint64_t records = 0;       // records warmed completely, in order
    std::uint64_t bytes = 0;         // bytes touched (including a record cut off by the bound)
    std::uint64_t pages = 0;         // pages touched
    std::uint64_t pages_loaded = 0;  // of them, pages that were not resident before the warm-up
                                     // asked for them (mincore / QueryWorkingSetEx)
    std::uint64_t skipped = 0;       // records skipped: released (in VRAM) or locked already
    std::uint64_t damaged = 0;       // records warmed that failed verify_record
    std::string damage;              // the first of those errors
    double seconds = 0;
    bool completed = false;  // every record of the order was reached
    bool stopped = false;    // `stop` was set (the model is being unloaded)
};

// What ExpertStore::map_cached() did.
struct CachedWarmupReport {
    std::uint64_t records = 0;     // records mapped and checked: all their pages were in RAM
    std::uint64_t bytes = 0;       // their bytes
    std::uint64_t not_cached = 0;  // records left alone: some of their pages were not in RAM
    std::uint64_t skipped = 0;     // records skipped: released (in VRAM) or locked already
    std::uint64_t damaged = 0;     // mapped records that failed verify_record
    std::string damage;            // the first of those errors (in order)
    int threads = 0;               // threads the pass ran on
    double seconds = 0;
    bool supported = true;  // false: the OS cannot say what is cached (Windows)
    bool stopped = false;   // `stop` was set (the model is being unloaded)
};

// What ExpertStore::lock_experts() did.
struct LockReport {
    std::uint64_t records = 0;  // records locked, in order
    std::uint64_t bytes = 0;
    bool limited = false;  // a lock failed before `bytes` were locked (the OS limit)
    std::string message;   // for the log: what was locked, or why not more
    double seconds = 0;
};

class ExpertStore final : public ExpertSource {
public:
    // Maps and validates `path`. Throws neural::Error naming the file: not a store (foreign file),
    // truncated, a format version from the future, an unknown kind, a bad header checksum, or
    // offsets/sizes that do not fit the recorded shape.
    static ExpertStore open(const std::filesystem::path& path);

    ExpertStore(ExpertStore&&) noexcept = default;
    ExpertStore& operator=(ExpertStore&&) noexcept = default;

    const std::filesystem::path& path() const { return map_.path(); }
    StoreKind kind() const { return layout_.kind; }
    const StoreShape& shape() const { return shape_; }
    const CheckpointId& checkpoint() const { return checkpoint_; }
    const std::string& created_by() const { return created_by_; }
    const RecordLayout& layout() const { return layout_; }
    std::uint64_t file_bytes() const { return map_.size(); }
    // The whole mapping (header, index and records), for the GPU backend's --pin-store.
    std::span<const std::uint8_t> mapping() const { return {map_.data(), map_.size()}; }
    int num_layers() const { return shape_.num_layers; }
    int num_experts() const { return shape_.num_experts; }

    const IndexEntry& entry(int layer, int expert) const {
        return index_[static_cast<std::size_t>(layer) *
                          static_cast<std::size_t>(shape_.num_experts) +
                      static_cast<std::size_t>(expert)];
    }
    // The record's payload bytes (inside the mapping).
    std::span<const std::uint8_t> record(int layer, int expert) const;
    bool record_checksum_ok(int layer, int expert) const;
    // What the engine calls before it reads a record (docs/STORE_FORMAT.md "Reading and
    // integrity"): the first time, the payload's XXH3-64 is compared with the record's index
    // entry (which the header checksum covers, so a record moved to another position fails too)
    // and a packed record's escapes are checked; then the record is marked verified and later
    // calls cost one atomic load. Throws neural::Error naming the store, layer and expert ("...
    // fails its checksum; run neural verify-store / repack"); a failed record is checked again
    // (and fails again) on every call. Thread-safe: concurrent first calls hash it once, the
    // others wait for that result.
    void verify_record(int layer, int expert) const {
        if ((state(layer, expert).load(std::memory_order_acquire) & kVerified) == 0) {
            verify_record_slow(layer, expert);
        }
    }
    bool record_verified(int layer, int expert) const {
        return (state(layer, expert).load(std::memory_order_acquire) & kVerified) != 0;
    }
    // The store is still the file that was loaded (docs/RELIABILITY.md "A store changed on
    // disk"): the same device, inode / file index, size and modification time (two stat calls),
    // the same fixed header bytes, and no read of the mapping faulted. Throws
    // neural::ModelFilesChanged naming the file ("... the store changed on disk since it was
    // loaded (...); reload") otherwise. Cheap enough for every forward pass; verify_record runs
    // it before every first read of a record.
    void check_unchanged() const;
    // Packed: every escaped row's offset lies in the record's escape area and the escape count
    // matches the index. Throws neural::Error naming the layer and expert. Raw: nothing to check.
    void check_escapes(int layer, int expert) const;

    // Throws neural::Error unless this store was made from a checkpoint with `config`'s shape and
    // exactly `ckpt`'s expert tensors (names, dtypes, shapes, sizes and, with `compare_sample`,
    // the sample hash). Cheap: the full hash is only compared by verify-store.
    void check_matches(const Checkpoint& ckpt, const ModelConfig& config,
                       bool compare_sample = true) const;

    // RAM residency of the records (docs/USER_GUIDE.md "RAM residency"). All of these may run
    // on any thread while forward passes read the store: they change what is in RAM, never the
    // bytes a read sees (a released record is read back from the file when it is used again).

    // Faults the records of `order` into RAM, in that order (hot first), until every one is in
    // or `budget` has passed (checked every MiB) or `*stop` is set: the OS is asked to read a few
    // records ahead (platform/prefetch.h) and one byte of every page is read. Released and locked
    // records are skipped. `after_record`, when given, is called after each record warmed with
    // the report so far; returning false stops the warm-up there.
    using WarmupProgress = std::function<bool(const ExpertKey&, const WarmupReport&)>;
    WarmupReport warm_up(std::span<const ExpertKey> order, std::chrono::nanoseconds budget,
                         const std::atomic<bool>* stop = nullptr,
                         const WarmupProgress& after_record = {}) const;
    // The default warm-up (--warmup-ram auto): maps each record of `order` whose pages are all
    // in RAM already into this process (platform/page_residency.h map_cached_pages; no disk
    // read, no new memory) and checks it (verify_record), on `threads` threads (records claimed
    // in order, hot first), until done or `*stop` is set. A record with a page that is not in
    // RAM is left for its first read, so the pass never competes for the disk nor pushes other
    // pages out. What it saves: the first prompt after a load otherwise takes one page fault per
    // few pages of every record it reads, and hashes them. Released and locked records are
    // skipped. A damaged record is counted (and left unverified: its read still fails).
    CachedWarmupReport map_cached(std::span<const ExpertKey> order, int threads = 1,
                                  const std::atomic<bool>* stop = nullptr) const;
    // Locks whole records of `order` in RAM (mlock / VirtualLock: never paged out) until the next
    // one would pass `bytes`, a lock fails (the OS limit: RLIMIT_MEMLOCK, the working-set
    // minimum) or `*stop` is set. Released records are skipped. The caller makes room first
    // (platform/page_residency.h grow_lock_allowance). Locked until release or unmapping.
    LockReport lock_experts(std::span<const ExpertKey> order, std::uint64_t bytes,
                            const std::atomic<bool>* stop = nullptr) const;
    // Gives back the RAM of record (layer, expert) now (platform/page_residency.h
    // release_mapped_pages: unlock, drop the mapping's pages, and on Linux evict them from the
    // page cache) and marks it released so warm_up / lock_experts skip it. Idempotent. Does
    // nothing while pinned (below; ok false, the message says so).
    PageRelease release_expert(int layer, int expert) const;
    // Gives back the RAM of the whole file (every record and the header) without marking any
    // record released: the next reads fault them back in from disk. A cold start without the
    // privilege to drop the system's caches (measurements, tests). Nothing while pinned.
    PageRelease drop_from_ram() const;
    // --pin-store: the GPU backend registered the whole mapping with the CUDA driver (page-locked
    // for its copies); it clears this once it has unregistered the mapping. The pages of a
    // registered range must stay, so while pinned nothing gives RAM back: release_expert,
    // drop_from_ram and note_resident_in_vram do nothing. Like the calls above it changes what is
    // in RAM, not the bytes, so it is const.
    void set_pinned(bool on) const { pinned_->store(on, std::memory_order_relaxed); }
    bool pinned() const { return pinned_->load(std::memory_order_relaxed); }
    // --release-resident (LoadOptions::release_resident): whether an expert that became resident
    // in VRAM for good should give its RAM back. Set once at load, before any backend call.
    void set_release_resident(bool on) { release_resident_ = on; }
    bool release_resident() const { return release_resident_; }
    // For the GPU backend: (layer, expert) now lives in a static VRAM slot and its upload from
    // this mapping has completed, so the CPU will not read it. Releases it when
    // release_resident() and not pinned() (else does nothing); returns whether it was released.
    bool note_resident_in_vram(int layer, int expert) const;
    bool released(int layer, int expert) const;
    bool locked(int layer, int expert) const;
    // Where release / lock counts go (the model's telemetry); null: nowhere.
    void set_ram_counters(telemetry::RamCounters* counters) { ram_ = counters; }

    // ExpertSource: prepare() = verify_record(); row() reads in place.
    void prepare(int layer, int expert) const override { verify_record(layer, expert); }
    ExpertRow row(int layer, Projection projection, int expert, std::int64_t row,
                  std::uint8_t* scale_buf) const override {
        const ProjectionLayout& p = layout_[projection];
        const std::uint8_t* payload = map_.data() + entry(layer, expert).offset;
        const std::uint8_t* blocks =
            payload + p.blocks_offset + static_cast<std::uint64_t>(row * p.groups) * 16;
        const std::uint8_t* slot =
            payload + p.scales_offset + static_cast<std::uint64_t>(row) * p.scale_stride;
        if (layout_.kind == StoreKind::kRaw) return {blocks, slot};
        return {blocks, unpack_scales(slot, p.groups, payload, scale_buf)};
    }

private:
    ExpertStore() = default;

    MappedFile map_;
    StoreShape shape_;
    CheckpointId checkpoint_;
    std::string created_by_;
    RecordLayout layout_;
    std::vector<IndexEntry> index_;     // layer-major
    std::vector<std::uint8_t> header_;  // the fixed header as loaded (check_unchanged)

    void verify_record_slow(int layer, int expert) const;

    static constexpr std::uint8_t kReleased = 1;
    static constexpr std::uint8_t kLocked = 2;
    static constexpr std::uint8_t kVerifying = 4;  // a thread is hashing it (verify_record)
    static constexpr std::uint8_t kVerified = 8;   // checksum and escapes passed
    std::atomic<std::uint8_t>& state(int layer, int expert) const {
        return state_[static_cast<std::size_t>(layer) *
                          static_cast<std::size_t>(shape_.num_experts) +
                      static_cast<std::size_t>(expert)];
    }
    std::unique_ptr<std::atomic<std::uint8_t>[]> state_;  // per record, layer-major
    bool release_resident_ = false;
    // A pointer so the store stays movable (set_pinned).
    std::unique_ptr<std::atomic<bool>> pinned_ = std::make_unique<std::atomic<bool>>(false);
    telemetry::RamCounters* ram_ = nullptr;
};

// One line for messages: "packed store (format 1) of gpt_oss: 24 layers x 32 experts, ...".
std::string describe_store(const ExpertStore& store);

}  // namespace neural::store
