#include "store/store.h"

#include <algorithm>
#include <cstring>
#include <system_error>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "neural/error.h"
#include "platform/memory.h"
#include "platform/prefetch.h"
#include "store/hash.h"

namespace neural::store {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

int model_int(const json& model, const char* key, const std::string& file) {
    auto it = model.find(key);
    if (it == model.end() || !it->is_number_integer() || it->get<std::int64_t>() <= 0 ||
        it->get<std::int64_t>() > (1 << 24)) {
        fail("{}: metadata \"model\".\"{}\" is missing or not a positive integer", file, key);
    }
    return static_cast<int>(it->get<std::int64_t>());
}

// What a release does while the store is pinned (ExpertStore::set_pinned): nothing.
PageRelease pinned_release() {
    PageRelease r;
    r.message =
        "not released: the GPU backend keeps the whole store registered in RAM (--pin-store)";
    return r;
}

}  // namespace

ExpertStore ExpertStore::open(const fs::path& path) {
    ExpertStore s;
    s.map_ = MappedFile::open(path);
    const std::string file = path.string();
    const std::uint8_t* base = s.map_.data();
    const std::uint64_t size = s.map_.size();

    // Identity first, so a foreign file gets "not a store" rather than a size complaint.
    if (size < kMagic.size() || std::memcmp(base, kMagic.data(), kMagic.size()) != 0) {
        fail(
            "{} is not a Neural expert store (no \"NRLSTORE\" magic; make one with "
            "`neural repack`)",
            file);
    }
    if (size < kHeaderBytes) {
        fail("{}: truncated expert store: {} bytes, shorter than the {}-byte header", file, size,
             kHeaderBytes);
    }
    const FixedHeader h = FixedHeader::decode(base);
    s.header_.assign(base, base + kHeaderBytes);
    if (h.format_version > kFormatVersion) {
        fail(
            "{}: expert store format version {} is newer than this build of Neural reads "
            "(version {}); update Neural or repack the store with this version",
            file, h.format_version, kFormatVersion);
    }
    if (h.format_version == 0) fail("{}: invalid expert store format version 0", file);
    if (h.kind > static_cast<std::uint32_t>(StoreKind::kPacked)) {
        fail("{}: unknown expert store kind {} (this build knows 0 = raw and 1 = packed)", file,
             h.kind);
    }
    const auto kind = static_cast<StoreKind>(h.kind);

    // Header fields: every area inside the file, in order, aligned as the format says.
    if (h.meta_offset != kHeaderBytes) {
        fail("{}: corrupt expert store header: metadata offset {} (expected {})", file,
             h.meta_offset, kHeaderBytes);
    }
    if (h.meta_bytes == 0 || h.meta_bytes > kMaxMetaBytes || h.meta_offset + h.meta_bytes > size) {
        fail(
            "{}: {} expert store: metadata of {} bytes at offset {} does not fit in the file "
            "({} bytes)",
            file, h.meta_offset + h.meta_bytes > size ? "truncated" : "corrupt", h.meta_bytes,
            h.meta_offset, size);
    }
    if (h.index_offset % 8 != 0 || h.index_offset < h.meta_offset + h.meta_bytes) {
        fail("{}: corrupt expert store header: index offset {}", file, h.index_offset);
    }
    if (h.record_count == 0 || h.record_count > (std::uint64_t{1} << 32)) {
        fail("{}: corrupt expert store header: {} records", file, h.record_count);
    }
    // index_offset is any u64: compare before adding, or offset + length can wrap around, pass
    // the check and send the checksum below reading outside the mapping (found by fuzzing).
    if (h.index_offset > size || h.record_count * kIndexEntryBytes > size - h.index_offset) {
        fail(
            "{}: truncated expert store: the index ({} records at byte {}) ends past the end of "
            "the file ({} bytes)",
            file, h.record_count, h.index_offset, size);
    }
    const std::uint64_t index_end = h.index_offset + h.record_count * kIndexEntryBytes;
    if (h.data_offset % kRecordAlignment != 0 || h.data_offset < index_end) {
        fail(
            "{}: corrupt expert store header: data offset {} (must be a multiple of {} after "
            "the index)",
            file, h.data_offset, kRecordAlignment);
    }

    Xxh3 hh;
    hh.update(base, FixedHeader::kChecksumOffset);
    hh.update(base + h.meta_offset, h.meta_bytes);
    hh.update(base + h.index_offset, h.record_count * kIndexEntryBytes);
    if (hh.digest() != h.header_checksum) {
        fail(
            "{}: expert store header checksum mismatch (stored {}, computed {}): the header, "
            "metadata or index is damaged; repack the store",
            file, hex64(h.header_checksum), hex64(hh.digest()));
    }

    // Metadata.
    json meta;
    try {
        const char* mp = reinterpret_cast<const char*>(base + h.meta_offset);
        meta = json::parse(mp, mp + h.meta_bytes);
    } catch (const json::exception& e) {  // parse_error, or out_of_range for 1e999
        fail("{}: expert store metadata is not valid JSON: {}", file, e.what());
    }
    if (!meta.is_object() || !meta.contains("model") || !meta["model"].is_object() ||
        !meta.contains("checkpoint")) {
        fail("{}: expert store metadata lacks the \"model\" or \"checkpoint\" object", file);
    }
    const json& model = meta["model"];
    if (model.contains("model_type") && model["model_type"].is_string()) {
        s.shape_.model_type = model["model_type"].get<std::string>();
    }
    s.shape_.hidden_size = model_int(model, "hidden_size", file);
    s.shape_.intermediate_size = model_int(model, "intermediate_size", file);
    s.shape_.num_layers = model_int(model, "num_layers", file);
    s.shape_.num_experts = model_int(model, "num_experts", file);
    if (meta.contains("created_by") && meta["created_by"].is_string()) {
        s.created_by_ = meta["created_by"].get<std::string>();
    }
    s.checkpoint_ = checkpoint_id_from_json(meta["checkpoint"], file);
    try {
        s.layout_ = RecordLayout::make(kind, s.shape_.hidden_size, s.shape_.intermediate_size);
    } catch (const Error& e) {
        fail("{}: expert store metadata: {}", file, e.what());
    }
    const std::uint64_t want_records = static_cast<std::uint64_t>(s.shape_.num_layers) *
                                       static_cast<std::uint64_t>(s.shape_.num_experts);
    if (h.record_count != want_records) {
        fail("{}: corrupt expert store: {} records, but {} layers x {} experts need {}", file,
             h.record_count, s.shape_.num_layers, s.shape_.num_experts, want_records);
    }

    // Index: every record aligned, in order, inside the file, with the size its kind implies.
    s.index_.reserve(h.record_count);
    std::uint64_t prev_end = h.data_offset;
    for (std::uint64_t i = 0; i < h.record_count; ++i) {
        const IndexEntry e = IndexEntry::decode(base + h.index_offset + i * kIndexEntryBytes);
        const auto layer = i / static_cast<std::uint64_t>(s.shape_.num_experts);
        const auto expert = i % static_cast<std::uint64_t>(s.shape_.num_experts);
        if (e.offset % kRecordAlignment != 0 || e.offset < prev_end) {
            fail(
                "{}: corrupt expert store index: record of layer {} expert {} at offset {} (must "
                "be a multiple of {} after the previous record)",
                file, layer, expert, e.offset, kRecordAlignment);
        }
        const std::uint64_t want =
            kind == StoreKind::kRaw ? s.layout_.fixed_bytes
                                    : s.layout_.payload_bytes(e.escaped_rows(Projection::kGateUp),
                                                              e.escaped_rows(Projection::kDown));
        if ((kind == StoreKind::kRaw && e.escapes != 0) || e.payload_bytes != want) {
            fail(
                "{}: expert store record of layer {} expert {} holds {} bytes, but a {} record of "
                "this shape (hidden {}, intermediate {}) holds {}: wrong kind or corrupt index",
                file, layer, expert, e.payload_bytes, kind_name(kind), s.shape_.hidden_size,
                s.shape_.intermediate_size, want);
        }
        if (e.payload_bytes > size || e.offset > size - e.payload_bytes) {
            fail(
                "{}: truncated expert store: the record of layer {} expert {} ends at byte {} but "
                "the file has {} bytes",
                file, layer, expert, e.offset + e.payload_bytes, size);
        }
        prev_end = e.offset + e.payload_bytes;
        s.index_.push_back(e);
    }
    s.state_ = std::make_unique<std::atomic<std::uint8_t>[]>(s.index_.size());
    return s;
}

std::span<const std::uint8_t> ExpertStore::record(int layer, int expert) const {
    const IndexEntry& e = entry(layer, expert);
    return {map_.data() + e.offset, static_cast<std::size_t>(e.payload_bytes)};
}

bool ExpertStore::released(int layer, int expert) const {
    return (state(layer, expert).load(std::memory_order_relaxed) & kReleased) != 0;
}

bool ExpertStore::locked(int layer, int expert) const {
    return (state(layer, expert).load(std::memory_order_relaxed) & kLocked) != 0;
}

PageRelease ExpertStore::release_expert(int layer, int expert) const {
    if (layer < 0 || layer >= num_layers() || expert < 0 || expert >= num_experts()) {
        fail("{}: no expert {} in layer {} (the store has {} layers x {} experts)", path().string(),
             expert, layer, num_layers(), num_experts());
    }
    if (pinned()) return pinned_release();
    const IndexEntry& e = entry(layer, expert);
    const std::uint8_t before = state(layer, expert).fetch_or(kReleased, std::memory_order_relaxed);
    PageRelease r = release_mapped_pages(map_, e.offset, e.payload_bytes);
    if ((before & kLocked) != 0) {  // release_mapped_pages unlocked it
        state(layer, expert)
            .fetch_and(static_cast<std::uint8_t>(~kLocked), std::memory_order_relaxed);
        if (ram_ != nullptr) {
            ram_->locked_records.fetch_sub(1, std::memory_order_relaxed);
            ram_->locked_bytes.fetch_sub(e.payload_bytes, std::memory_order_relaxed);
        }
    }
    if ((before & kReleased) == 0 && ram_ != nullptr) {
        ram_->released_records.fetch_add(1, std::memory_order_relaxed);
        ram_->released_bytes.fetch_add(e.payload_bytes, std::memory_order_relaxed);
    }
    return r;
}

PageRelease ExpertStore::drop_from_ram() const {
    if (pinned()) return pinned_release();
    return release_mapped_pages(map_, 0, map_.size());
}

bool ExpertStore::note_resident_in_vram(int layer, int expert) const {
    if (!release_resident_ || pinned()) return false;
    release_expert(layer, expert);
    return true;
}

WarmupReport ExpertStore::warm_up(std::span<const ExpertKey> order, std::chrono::nanoseconds budget,
                                  const std::atomic<bool>* stop,
                                  const WarmupProgress& after_record) const {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    const auto deadline = t0 + budget;
    WarmupReport w;
    const std::size_t page = page_size();
    constexpr std::size_t kChunk = std::size_t{1} << 20;  // deadline / stop checked per MiB
    constexpr std::uint64_t kAheadBytes = std::uint64_t{64} << 20;  // read-ahead window
    const auto skip = [&](const ExpertKey& k) {
        return (state(k.layer, k.expert).load(std::memory_order_relaxed) & (kReleased | kLocked)) !=
               0;
    };
    for (const ExpertKey& k : order) {
        if (k.layer < 0 || k.layer >= num_layers() || k.expert < 0 || k.expert >= num_experts()) {
            fail("{}: warm-up order names expert {} of layer {}, outside {} layers x {} experts",
                 path().string(), k.expert, k.layer, num_layers(), num_experts());
        }
    }
    // not_resident[i]: pages of order[i] that were not resident when its read-ahead was asked
    // for (measured before asking, so the read-ahead itself does not hide them).
    std::vector<std::uint64_t> not_resident(order.size(), 0);
    std::size_t ahead = 0;          // order[0, ahead) has been asked for
    std::uint64_t ahead_bytes = 0;  // bytes asked for beyond the record being touched
    std::uint64_t sink = 0;
    bool out_of_time = false;
    const auto expired = [&] {
        if (stop != nullptr && stop->load(std::memory_order_relaxed)) {
            w.stopped = true;
            return true;
        }
        if (Clock::now() >= deadline) {
            out_of_time = true;
            return true;
        }
        return false;
    };
    std::size_t i = 0;
    for (; i < order.size(); ++i) {
        if (expired()) break;
        const ExpertKey k = order[i];
        if (skip(k)) {
            ++w.skipped;
            continue;
        }
        const auto rec = record(k.layer, k.expert);
        // Keep about kAheadBytes of the following records on their way from disk.
        if (ahead <= i) {
            ahead = i;
            ahead_bytes = 0;
        } else {
            ahead_bytes -= std::min<std::uint64_t>(ahead_bytes, rec.size());
        }
        while (ahead < order.size() && (ahead == i || ahead_bytes < kAheadBytes)) {
            const ExpertKey a = order[ahead];
            if (!skip(a)) {
                const auto ra = record(a.layer, a.expert);
                const std::uint64_t pages = (ra.size() + page - 1) / page;
                not_resident[ahead] =
                    pages - std::min(pages, resident_pages(ra.data(), ra.size()).value_or(0));
                prefetch_mapped(ra.data(), ra.size());
                if (ahead != i) ahead_bytes += ra.size();
            }
            ++ahead;
        }
        bool whole = true;
        for (std::size_t off = 0; off < rec.size(); off += kChunk) {
            if (off > 0 && expired()) {
                whole = false;
                break;
            }
            const std::size_t n = std::min(kChunk, rec.size() - off);
            sink += touch_pages(rec.data() + off, n);
            w.bytes += n;
            w.pages += (n + page - 1) / page;
        }
        if (!whole) break;
        // The pages are in: hashing them now takes the first read's check off the forward pass.
        try {
            verify_record(k.layer, k.expert);
        } catch (const Error& e) {
            if (w.damaged++ == 0) w.damage = e.what();
        }
        ++w.records;
        w.pages_loaded += not_resident[i];
        if (after_record) {
            w.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
            if (!after_record(k, w)) {
                w.stopped = true;
                ++i;
                break;
            }
        }
    }
    w.completed = i == order.size() && !out_of_time && !w.stopped;
    w.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    (void)sink;  // the reads themselves are volatile (touch_pages)
    return w;
}

CachedWarmupReport ExpertStore::map_cached(std::span<const ExpertKey> order, int threads,
                                           const std::atomic<bool>* stop) const {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    for (const ExpertKey& k : order) {
        if (k.layer < 0 || k.layer >= num_layers() || k.expert < 0 || k.expert >= num_experts()) {
            fail("{}: warm-up order names expert {} of layer {}, outside {} layers x {} experts",
                 path().string(), k.expert, k.layer, num_layers(), num_experts());
        }
    }
    // What happened to order[i]; summed in order afterwards (the first damage named is the
    // hottest record's, whatever the threads' timing).
    enum Outcome : std::uint8_t { kNotReached, kMapped, kNotCached, kSkipped, kDamaged, kNoOs };
    std::vector<Outcome> outcome(order.size(), kNotReached);
    std::vector<std::string> damage(order.size());
    std::atomic<std::size_t> next{0};
    std::atomic<bool> unsupported{false};
    std::atomic<bool> stopped{false};
    const auto work = [&] {
        for (;;) {
            if (stop != nullptr && stop->load(std::memory_order_relaxed)) {
                stopped.store(true, std::memory_order_relaxed);
                return;
            }
            if (unsupported.load(std::memory_order_relaxed)) return;
            const std::size_t i = next.fetch_add(1, std::memory_order_relaxed);
            if (i >= order.size()) return;
            const ExpertKey k = order[i];
            if ((state(k.layer, k.expert).load(std::memory_order_relaxed) &
                 (kReleased | kLocked)) != 0) {
                outcome[i] = kSkipped;
                continue;
            }
            const auto rec = record(k.layer, k.expert);
            std::optional<CachedMapping> m;
            try {
                m = map_cached_pages(rec.data(), rec.size());
            } catch (const std::exception&) {  // out of memory for mincore's vector: leave it
                outcome[i] = kNotCached;
                continue;
            }
            if (!m) {
                outcome[i] = kNoOs;
                unsupported.store(true, std::memory_order_relaxed);
                return;
            }
            if (m->cached < m->pages) {
                outcome[i] = kNotCached;
                continue;
            }
            try {
                verify_record(k.layer, k.expert);
                outcome[i] = kMapped;
            } catch (const std::exception& e) {  // a worker thread must not throw
                outcome[i] = kDamaged;
                damage[i] = e.what();
            }
        }
    };
    CachedWarmupReport r;
    r.threads = static_cast<int>(std::clamp<std::size_t>(
        static_cast<std::size_t>(std::max(threads, 1)), 1, std::max<std::size_t>(order.size(), 1)));
    {
        // Fewer threads if the OS refuses one; the pass only gets slower.
        std::vector<std::thread> helpers;
        for (int t = 1; t < r.threads; ++t) {
            try {
                helpers.emplace_back(work);
            } catch (const std::system_error&) {
                break;
            }
        }
        r.threads = static_cast<int>(helpers.size()) + 1;
        work();
        for (std::thread& h : helpers) h.join();
    }
    for (std::size_t i = 0; i < order.size(); ++i) {
        const ExpertKey k = order[i];
        switch (outcome[i]) {
            case kMapped:
                ++r.records;
                r.bytes += record(k.layer, k.expert).size();
                break;
            case kDamaged:
                ++r.records;
                r.bytes += record(k.layer, k.expert).size();
                if (r.damaged++ == 0) r.damage = damage[i];
                break;
            case kNotCached:
                ++r.not_cached;
                break;
            case kSkipped:
                ++r.skipped;
                break;
            case kNoOs:
            case kNotReached:
                break;
        }
    }
    r.supported = !unsupported.load();
    r.stopped = stopped.load();
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return r;
}

LockReport ExpertStore::lock_experts(std::span<const ExpertKey> order, std::uint64_t bytes,
                                     const std::atomic<bool>* stop) const {
    const auto t0 = std::chrono::steady_clock::now();
    LockReport r;
    std::string error;
    for (const ExpertKey& k : order) {
        if (stop != nullptr && stop->load(std::memory_order_relaxed)) break;
        if (k.layer < 0 || k.layer >= num_layers() || k.expert < 0 || k.expert >= num_experts()) {
            fail("{}: lock order names expert {} of layer {}, outside {} layers x {} experts",
                 path().string(), k.expert, k.layer, num_layers(), num_experts());
        }
        std::atomic<std::uint8_t>& st = state(k.layer, k.expert);
        if ((st.load(std::memory_order_relaxed) & (kReleased | kLocked)) != 0) continue;
        const auto rec = record(k.layer, k.expert);
        if (r.bytes + rec.size() > bytes) break;
        if (!lock_memory(rec.data(), rec.size(), &error)) {
            r.limited = true;
            break;
        }
        // mlock / VirtualLock fault the pages in; read them anyway, cheaply when they are there
        // already, because some environments accept the lock without doing it (AddressSanitizer
        // turns mlock into a no-op).
        (void)touch_pages(rec.data(), rec.size());
        st.fetch_or(kLocked, std::memory_order_relaxed);
        ++r.records;
        r.bytes += rec.size();
        if (ram_ != nullptr) {
            ram_->locked_records.fetch_add(1, std::memory_order_relaxed);
            ram_->locked_bytes.fetch_add(rec.size(), std::memory_order_relaxed);
        }
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.message = fmt::format("locked {} experts ({:.2f} GB) of the hottest in RAM in {:.1f} s",
                            r.records, static_cast<double>(r.bytes) / 1e9, r.seconds);
    if (r.limited) r.message += fmt::format("; stopped by the OS limit: {}", error);
    return r;
}

bool ExpertStore::record_checksum_ok(int layer, int expert) const {
    const auto r = record(layer, expert);
    return xxh3_64(r.data(), r.size()) == entry(layer, expert).checksum;
}

void ExpertStore::check_unchanged() const {
    auto changed = [&](const std::string& what) {
        throw ModelFilesChanged(fmt::format(
            "expert store {}: the store changed on disk since it was loaded ({}); reload",
            path().string(), what));
    };
    if (map_.faulted()) changed("a read found it cut short");
    if (const std::string what = map_.changed_on_disk(); !what.empty()) changed(what);
    // Same size: the header pages are there to compare (a truncation was caught above; one
    // racing with this read makes the guard's zero page differ).
    if (std::memcmp(map_.data(), header_.data(), header_.size()) != 0)
        changed("its header is not the one loaded");
    if (map_.faulted()) changed("a read found it cut short");
}

void ExpertStore::verify_record_slow(int layer, int expert) const {
    std::atomic<std::uint8_t>& st = state(layer, expert);
    // Claim the check, or wait for the thread that has it.
    for (;;) {
        const std::uint8_t s = st.load(std::memory_order_acquire);
        if ((s & kVerified) != 0) return;
        if ((s & kVerifying) == 0 &&
            (st.fetch_or(kVerifying, std::memory_order_acq_rel) & kVerifying) == 0) {
            break;
        }
        std::this_thread::yield();
    }
    struct Unclaim {
        std::atomic<std::uint8_t>& st;
        ~Unclaim() {
            st.fetch_and(static_cast<std::uint8_t>(~kVerifying), std::memory_order_release);
        }
    } unclaim{st};
    // The first read of a record: from the file that was loaded, or not at all.
    check_unchanged();
    const auto r = record(layer, expert);
    const std::uint64_t computed = xxh3_64(r.data(), r.size());
    // A truncation while hashing: the guard's zero pages must not be reported as damage.
    if (map_.faulted()) check_unchanged();
    const std::uint64_t stored = entry(layer, expert).checksum;
    if (computed != stored) {
        fail(
            "expert store {}: record layer {} expert {} fails its checksum (the index has {}, "
            "the record hashes to {}): the file is damaged; run `neural verify-store` and repack",
            path().string(), layer, expert, hex64(stored), hex64(computed));
    }
    check_escapes(layer, expert);
    st.fetch_or(kVerified, std::memory_order_release);
}

void ExpertStore::check_escapes(int layer, int expert) const {
    if (layout_.kind != StoreKind::kPacked) return;
    const IndexEntry& e = entry(layer, expert);
    const std::uint8_t* payload = map_.data() + e.offset;
    for (Projection proj : {Projection::kGateUp, Projection::kDown}) {
        const ProjectionLayout& p = layout_[proj];
        // This projection's escape rows follow the fixed part (gate_up's first, then down's).
        const std::uint64_t begin =
            layout_.fixed_bytes +
            (proj == Projection::kDown
                 ? e.escaped_rows(Projection::kGateUp) *
                       static_cast<std::uint64_t>(layout_[Projection::kGateUp].groups)
                 : 0);
        const std::uint64_t end =
            begin + e.escaped_rows(proj) * static_cast<std::uint64_t>(p.groups);
        std::uint64_t escaped = 0;
        for (std::int64_t r = 0; r < p.rows; ++r) {
            const std::uint8_t* slot =
                payload + p.scales_offset + static_cast<std::uint64_t>(r) * p.scale_stride;
            if (!is_escape(slot)) continue;
            ++escaped;
            const std::uint64_t off = escape_offset(slot);
            if (off < begin || off + static_cast<std::uint64_t>(p.groups) > end) {
                fail(
                    "{}: damaged expert store record (layer {} expert {}): {} row {} points to "
                    "escape bytes [{}, {}) outside its escape area [{}, {}); run `neural "
                    "verify-store` and repack",
                    path().string(), layer, expert,
                    proj == Projection::kGateUp ? "gate_up" : "down", r, off, off + p.groups, begin,
                    end);
            }
        }
        if (escaped != e.escaped_rows(proj)) {
            fail(
                "{}: damaged expert store record (layer {} expert {}): {} escaped {} rows, the "
                "index says {}; run `neural verify-store` and repack",
                path().string(), layer, expert, escaped,
                proj == Projection::kGateUp ? "gate_up" : "down", e.escaped_rows(proj));
        }
    }
}

void ExpertStore::check_matches(const Checkpoint& ckpt, const ModelConfig& config,
                                bool compare_sample) const {
    const std::string file = path().string();
    const std::string dir = ckpt.dir().string();
    auto field = [&](const char* name, int in_store, int in_config) {
        if (in_store != in_config) {
            fail(
                "{} was made for a different model: {} is {} in the store but {} in {}/config.json",
                file, name, in_store, in_config, dir);
        }
    };
    field("hidden_size", shape_.hidden_size, config.hidden_size);
    field("intermediate_size", shape_.intermediate_size, config.intermediate_size);
    field("num_hidden_layers", shape_.num_layers, config.num_layers);
    field("num_local_experts", shape_.num_experts, config.num_experts);

    const CheckpointId here = describe_experts(ckpt, config);
    if (here.tensors.size() != checkpoint_.tensors.size()) {
        fail("{} was made for a different model: it records {} expert tensors, {} has {}", file,
             checkpoint_.tensors.size(), dir, here.tensors.size());
    }
    for (std::size_t i = 0; i < here.tensors.size(); ++i) {
        const ExpertTensorId& a = checkpoint_.tensors[i];
        const ExpertTensorId& b = here.tensors[i];
        if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.nbytes != b.nbytes) {
            fail(
                "{} was made for a different checkpoint: the store records tensor \"{}\" {} {} "
                "({} bytes), {} has \"{}\" {} {} ({} bytes)",
                file, a.name, a.dtype, fmt::join(a.shape, "x"), a.nbytes, dir, b.name, b.dtype,
                fmt::join(b.shape, "x"), b.nbytes);
        }
    }
    if (compare_sample && here.sample_hash != checkpoint_.sample_hash) {
        fail(
            "{} was made from a different checkpoint than {}: same shape, but the expert weights "
            "differ (sample hash {} in the store, {} in the checkpoint); repack it with `neural "
            "repack --checkpoint {}`",
            file, dir, hex64(checkpoint_.sample_hash), hex64(here.sample_hash), dir);
    }
}

std::string describe_store(const ExpertStore& s) {
    return fmt::format(
        "{} store (format {}) of {}: {} layers x {} experts, hidden {}, "
        "intermediate {}, {} B per record{}",
        kind_name(s.kind()), kFormatVersion,
        s.shape().model_type.empty() ? "?" : s.shape().model_type, s.num_layers(), s.num_experts(),
        s.shape().hidden_size, s.shape().intermediate_size, s.layout().fixed_bytes,
        s.kind() == StoreKind::kPacked ? " + escapes" : "");
}

}  // namespace neural::store
