#include "store/repack.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#ifndef _WIN32
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "model/gguf.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "neural/error.h"
#include "platform/atomic_file.h"
#include "platform/file_patch.h"
#include "platform/output_file.h"
#include "platform/prefetch.h"
#include "store/hash.h"
#include "store/identity.h"
#include "store/tasks.h"

namespace neural::store {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// Builders mostly wait for checkpoint pages to arrive from disk, so more of them than cores keep
// more reads in flight (docs/BENCHMARKS.md "Measurements behind code defaults").
constexpr int kDefaultThreads = 8;

// 4 KiB-aligned, so whole padded records can go to the disk unbuffered (OutputFile).
struct AlignedDelete {
    void operator()(std::uint8_t* p) const {
        ::operator delete[](p, std::align_val_t(kRecordAlignment));
    }
};
using AlignedBuffer = std::unique_ptr<std::uint8_t[], AlignedDelete>;
AlignedBuffer aligned_buffer(std::uint64_t n) {
    auto* p = static_cast<std::uint8_t*>(
        ::operator new[](static_cast<std::size_t>(n), std::align_val_t(kRecordAlignment)));
    return AlignedBuffer(p);
}

std::string gb(std::uint64_t n) { return fmt::format("{:.2f} GB", static_cast<double>(n) / 1e9); }

// One record being built: the padded payload and its index entry (offset filled by the writer).
struct Slot {
    AlignedBuffer buf;
    std::int64_t record = -1;  // which record the buffer holds; -1 = free
    bool ready = false;
    IndexEntry entry;
    std::vector<std::uint8_t> ggml_scales[2];  // a GGUF's converted raw scales (build_record)
};

// Asks the OS to read expert `expert`'s source bytes of layer `w` (four slices of the
// checkpoint mapping) ahead of the copy.
void prefetch_record(const RecordLayout& layout, const LayerWeights& w, int expert) {
    for (Projection proj : {Projection::kGateUp, Projection::kDown}) {
        const ProjectionLayout& p = layout[proj];
        const Mxfp4Experts& src = proj == Projection::kGateUp ? w.gate_up : w.down;
        if (src.ggml != nullptr) {  // a GGUF: the expert's rows of ggml blocks
            const std::size_t n = static_cast<std::size_t>(src.ggml->expert_bytes());
            prefetch_mapped(src.ggml->ggml_row(expert, 0), n);
            if (src.ggml->second != nullptr) prefetch_mapped(src.ggml->ggml_row(expert, 1), n);
            continue;
        }
        prefetch_mapped(src.row_blocks(expert, 0), static_cast<std::size_t>(p.blocks_bytes()));
        prefetch_mapped(src.row_scales(expert, 0), static_cast<std::size_t>(p.raw_scales_bytes()));
    }
}

// Builds record (layer, expert) into `out` (max_payload rounded up to 4 KiB, zero padded). A GGUF
// checkpoint's experts are converted to the checkpoint layout on the way; their raw scales are
// left in `ggml_scales[projection]` for the checkpoint hash.
IndexEntry build_record(const RecordLayout& layout, const LayerWeights& w, int expert,
                        std::uint8_t* out, std::vector<std::uint8_t>* ggml_scales) {
    std::uint64_t escape_at = layout.fixed_bytes;  // packed: next escape row's payload offset
    std::uint32_t escaped[2] = {0, 0};
    for (Projection proj : {Projection::kGateUp, Projection::kDown}) {
        const ProjectionLayout& p = layout[proj];
        const Mxfp4Experts& src = proj == Projection::kGateUp ? w.gate_up : w.down;
        const std::uint8_t* scales = nullptr;
        if (src.ggml != nullptr) {
            std::vector<std::uint8_t>& raw = ggml_scales[static_cast<int>(proj)];
            raw.resize(static_cast<std::size_t>(p.raw_scales_bytes()));
            src.copy_expert(expert, out + p.blocks_offset, raw.data());
            scales = raw.data();
        } else {
            std::memcpy(out + p.blocks_offset, src.row_blocks(expert, 0), p.blocks_bytes());
            scales = src.row_scales(expert, 0);
        }
        if (layout.kind == StoreKind::kRaw) {
            std::memcpy(out + p.scales_offset, scales, p.raw_scales_bytes());
            continue;
        }
        for (std::int64_t r = 0; r < p.rows; ++r) {
            const std::uint8_t* row = scales + r * p.groups;
            std::uint8_t* slot =
                out + p.scales_offset + static_cast<std::uint64_t>(r) * p.scale_stride;
            if (needs_escape(row, p.groups)) {
                pack_escape(static_cast<std::uint32_t>(escape_at), p.groups, slot);
                std::memcpy(out + escape_at, row, static_cast<std::size_t>(p.groups));
                escape_at += static_cast<std::uint64_t>(p.groups);
                ++escaped[static_cast<int>(proj)];
            } else {
                pack_scales(row, p.groups, slot);
            }
        }
    }
    IndexEntry e;
    e.payload_bytes = layout.payload_bytes(escaped[0], escaped[1]);
    e.escapes =
        static_cast<std::uint64_t>(escaped[0]) | (static_cast<std::uint64_t>(escaped[1]) << 32);
    std::memset(
        out + e.payload_bytes, 0,
        static_cast<std::size_t>(align_up(e.payload_bytes, kRecordAlignment) - e.payload_bytes));
    e.checksum = xxh3_64(out, static_cast<std::size_t>(e.payload_bytes));
    return e;
}

std::string metadata_json(const ModelConfig& c, const CheckpointId& id, const std::string& by) {
    json model = {{"model_type", c.model_type},
                  {"hidden_size", c.hidden_size},
                  {"intermediate_size", c.intermediate_size},
                  {"num_layers", c.num_layers},
                  {"num_experts", c.num_experts},
                  {"experts_per_token", c.experts_per_token}};
    json meta = {{"model", model}, {"checkpoint", to_json(id)}, {"created_by", by}};
    return meta.dump();
}

// What write_records needs; `id` receives the tensor hashes.
struct WriteJob {
    const RepackOptions& o;
    const RecordLayout& layout;
    const ModelConfig& config;
    const ModelWeights& weights;
    CheckpointId& id;
    std::uint64_t data_offset = 0;
    Clock::time_point t0;
};

// Builds and writes every record after the (zero) header region, in index order; returns the
// index and fills in the checkpoint hashes.
std::vector<IndexEntry> write_records(const WriteJob& job, OutputFile& file, RepackResult& result) {
    const RepackOptions& o = job.o;
    const int L = job.config.num_layers, E = job.config.num_experts;
    const std::int64_t R = static_cast<std::int64_t>(L) * E;
    const int threads = resolve_threads(o.threads > 0 ? o.threads : kDefaultThreads, R);
    const std::int64_t window = threads + 2;
    const std::uint64_t slot_bytes = align_up(job.layout.max_payload_bytes(), kRecordAlignment);
    std::vector<Slot> slots(static_cast<std::size_t>(window));
    for (auto& s : slots) s.buf = aligned_buffer(slot_bytes);

    std::mutex mu;
    std::condition_variable cv;
    std::int64_t written = 0;  // records handed to the file
    bool stop = false;
    std::exception_ptr error;
    std::atomic<std::int64_t> next{0};
    auto cancelled = [&] { return o.cancel != nullptr && o.cancel->load(); };

    auto worker = [&] {
        for (;;) {
            const std::int64_t i = next.fetch_add(1);
            if (i >= R) return;
            const int layer = static_cast<int>(i / E), expert = static_cast<int>(i % E);
            const LayerWeights& lw = job.weights.layers[static_cast<std::size_t>(layer)];
            // Read-ahead starts now, while this worker may still wait for its buffer.
            prefetch_record(job.layout, lw, expert);
            Slot& slot = slots[static_cast<std::size_t>(i % window)];
            {
                std::unique_lock<std::mutex> lock(mu);
                cv.wait(lock, [&] { return stop || i < written + window; });
                if (stop) return;
            }
            try {
                IndexEntry e =
                    build_record(job.layout, lw, expert, slot.buf.get(), slot.ggml_scales);
                std::lock_guard<std::mutex> lock(mu);
                slot.entry = e;
                slot.record = i;
                slot.ready = true;
            } catch (...) {
                std::lock_guard<std::mutex> lock(mu);
                if (!error) error = std::current_exception();
                stop = true;
            }
            cv.notify_all();
        }
    };
    std::vector<std::thread> pool;
    // Stops and joins the workers on every way out (error, cancel, success).
    struct Joiner {
        std::mutex& mu;
        std::condition_variable& cv;
        bool& stop;
        std::vector<std::thread>& pool;
        ~Joiner() {
            {
                std::lock_guard<std::mutex> lock(mu);
                stop = true;
            }
            cv.notify_all();
            for (auto& t : pool) t.join();
        }
    } joiner{mu, cv, stop, pool};
    for (int t = 0; t < threads; ++t) pool.emplace_back(worker);

    // Per-tensor hash states in CheckpointId order; each record feeds its four slices in order.
    std::map<std::string, std::size_t> tensor_index;
    for (std::size_t k = 0; k < job.id.tensors.size(); ++k)
        tensor_index[job.id.tensors[k].name] = k;
    std::vector<Xxh3> tensor_hash(job.id.tensors.size());

    std::vector<IndexEntry> index(static_cast<std::size_t>(R));
    std::uint64_t at = job.data_offset;
    const std::uint64_t stride_estimate = align_up(job.layout.fixed_bytes, kRecordAlignment);
    auto report = [&](std::int64_t done) {
        if (!o.on_progress) return;
        const auto now = Clock::now();
        RepackProgress p;
        p.bytes_done = at;
        p.bytes_total = at + static_cast<std::uint64_t>(R - done) * stride_estimate;
        p.records_done = done;
        p.records_total = R;
        p.seconds = std::chrono::duration<double>(now - job.t0).count();
        p.bytes_per_second = p.seconds > 0 ? static_cast<double>(at) / p.seconds : 0.0;
        p.eta_seconds = p.bytes_per_second > 0
                            ? static_cast<double>(p.bytes_total - p.bytes_done) / p.bytes_per_second
                            : 0.0;
        o.on_progress(p);
    };

    for (std::int64_t i = 0; i < R; ++i) {
        if (cancelled()) throw Cancelled();
        Slot& slot = slots[static_cast<std::size_t>(i % window)];
        {
            std::unique_lock<std::mutex> lock(mu);
            cv.wait(lock, [&] { return error || (slot.ready && slot.record == i); });
            if (error) std::rethrow_exception(error);
        }
        IndexEntry e = slot.entry;
        e.offset = at;
        const std::uint64_t padded = align_up(e.payload_bytes, kRecordAlignment);
        file.write(slot.buf.get(), static_cast<std::size_t>(padded));
        at += padded;
        index[static_cast<std::size_t>(i)] = e;
        result.payload_bytes += e.payload_bytes;
        result.escaped_rows +=
            e.escaped_rows(Projection::kGateUp) + e.escaped_rows(Projection::kDown);

        const int layer = static_cast<int>(i / E), expert = static_cast<int>(i % E);
        const LayerWeights& w = job.weights.layers[static_cast<std::size_t>(layer)];
        for (Projection proj : {Projection::kGateUp, Projection::kDown}) {
            const ProjectionLayout& p = job.layout[proj];
            const Mxfp4Experts& src = proj == Projection::kGateUp ? w.gate_up : w.down;
            const std::string stem =
                fmt::format("model.layers.{}.mlp.experts.{}_", layer,
                            proj == Projection::kGateUp ? "gate_up_proj" : "down_proj");
            // A GGUF's bytes in the checkpoint layout are the record's code bytes (the same in
            // both kinds) and the raw scales build_record kept.
            const bool ggml = src.ggml != nullptr;
            tensor_hash[tensor_index.at(stem + "blocks")].update(
                ggml ? slot.buf.get() + p.blocks_offset : src.row_blocks(expert, 0),
                p.blocks_bytes());
            tensor_hash[tensor_index.at(stem + "scales")].update(
                ggml ? slot.ggml_scales[static_cast<int>(proj)].data() : src.row_scales(expert, 0),
                p.raw_scales_bytes());
        }
        {
            std::lock_guard<std::mutex> lock(mu);
            slot.ready = false;
            slot.record = -1;
            written = i + 1;
        }
        cv.notify_all();
        report(i + 1);
    }
    for (std::size_t k = 0; k < tensor_hash.size(); ++k)
        job.id.tensors[k].hash = tensor_hash[k].digest();
    job.id.hash = combine_hashes(job.id.tensors);
    result.bytes = at;
    return index;
}

// Held by the writer on its temporary file from creation to rename (or removal): a second
// descriptor with an exclusive flock. The kernel drops it when the process dies, which is how
// remove_stale_temp_files tells a killed writer's file from a running one's.
class TempFileLock {
public:
    explicit TempFileLock(const fs::path& path) {
#ifndef _WIN32
        fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd_ >= 0 && ::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
            ::close(fd_);
            fd_ = -1;
        }
#else
        (void)path;
#endif
    }
    ~TempFileLock() {
#ifndef _WIN32
        if (fd_ >= 0) ::close(fd_);
#endif
    }
    TempFileLock(const TempFileLock&) = delete;
    TempFileLock& operator=(const TempFileLock&) = delete;

private:
    int fd_ = -1;
};

}  // namespace

std::vector<fs::path> remove_stale_temp_files(const fs::path& out) {
    std::error_code ec;
    const fs::path dest = fs::absolute(out, ec);
    if (ec) return {};
    // Any age: a repack creates and locks its file before it writes for minutes.
    std::vector<fs::path> removed = neural::remove_stale_temp_files(dest, std::chrono::seconds(0));
    for (const fs::path& p : removed)
        spdlog::info("removed {}, left behind by an interrupted repack", p.string());
    return removed;
}

RepackResult repack(const RepackOptions& o) {
    const auto t0 = Clock::now();
    if (o.out.empty()) fail("no output file given for the store");
    const Checkpoint ckpt = Checkpoint::open(o.checkpoint);
    const ModelConfig config = checkpoint_config(ckpt);
    const ModelWeights weights = ModelWeights::bind(ckpt, config);
    const RecordLayout layout =
        RecordLayout::make(o.kind, config.hidden_size, config.intermediate_size);
    CheckpointId id = describe_experts(ckpt, config);

    // Every hash in the metadata is 16 hex digits, so the metadata written at the end (with the
    // real hashes) has exactly the length planned here.
    const std::string planned_meta = metadata_json(config, id, o.created_by);
    FixedHeader h;
    h.kind = static_cast<std::uint32_t>(o.kind);
    h.meta_bytes = planned_meta.size();
    h.index_offset = align_up(h.meta_offset + h.meta_bytes, 8);
    h.record_count = static_cast<std::uint64_t>(config.num_layers) *
                     static_cast<std::uint64_t>(config.num_experts);
    h.data_offset = align_up(h.index_offset + h.record_count * kIndexEntryBytes, kRecordAlignment);
    const std::uint64_t expected =
        h.data_offset + h.record_count * align_up(layout.fixed_bytes, kRecordAlignment);

    // Destination checks before anything is written.
    std::error_code ec;
    const fs::path requested = fs::absolute(o.out, ec);
    if (fs::is_directory(requested, ec)) {
        fail("{} is a folder; give the store's file name, e.g. {}", o.out.string(),
             (o.out / "experts.nstore").string());
    }
    // A FIFO, socket or device at the path is refused (never replaced); a symbolic link to a
    // regular file is written through: the new store replaces the link's target.
    const fs::path out = checked_output_path(requested);
    const fs::path dir = out.parent_path();
    if (!fs::is_directory(dir, ec)) {
        fail("cannot write the store {}: folder {} does not exist", o.out.string(), dir.string());
    }
    if (fs::exists(out, ec)) {
        for (const fs::path& f : ckpt.file_paths()) {
            if (fs::equivalent(out, f, ec)) {
                fail("{} is a file of the checkpoint itself; write the store somewhere else",
                     o.out.string());
            }
        }
    }
    // Temporary files of killed repacks to this destination (up to a whole store each) go
    // before the free space is measured.
    std::vector<fs::path> stale = remove_stale_temp_files(out);
    if (o.on_stale_removed) {
        for (const fs::path& p : stale) o.on_stale_removed(p);
    }
    const fs::space_info space = fs::space(dir, ec);
    if (ec) fail("cannot read the free space of {}: {}", dir.string(), ec.message());
    if (space.available < expected) {
        fail(
            "not enough free disk space in {} for the {} store: it needs {} ({} bytes), {} ({} "
            "bytes) are available",
            dir.string(), kind_name(o.kind), gb(expected), expected, gb(space.available),
            space.available);
    }

    const fs::path tmp = temp_file_for(dir / out.filename());
    RepackResult result;
    result.path = out;
    result.kind = o.kind;
    result.records = static_cast<std::int64_t>(h.record_count);
    result.stale_removed = std::move(stale);
    OutputFile file;
    std::unique_ptr<TempFileLock> lock;
    try {
        file = OutputFile::create(tmp, /*unbuffered=*/true);
        lock = std::make_unique<TempFileLock>(tmp);
        {
            // The header region stays zero (no magic) until every record is on disk.
            AlignedBuffer zeros = aligned_buffer(h.data_offset);
            std::memset(zeros.get(), 0, static_cast<std::size_t>(h.data_offset));
            file.write(zeros.get(), static_cast<std::size_t>(h.data_offset));
        }
        WriteJob job{o, layout, config, weights, id, h.data_offset, t0};
        const std::vector<IndexEntry> index = write_records(job, file, result);
        file.sync();
        file.close();

        const std::string meta = metadata_json(config, id, o.created_by);
        if (meta.size() != h.meta_bytes) {
            fail("internal error: store metadata changed size ({} -> {} bytes)", h.meta_bytes,
                 meta.size());
        }
        std::vector<std::uint8_t> head(static_cast<std::size_t>(h.data_offset), 0);
        std::memcpy(head.data() + h.meta_offset, meta.data(), meta.size());
        for (std::size_t i = 0; i < index.size(); ++i) {
            index[i].encode(head.data() + h.index_offset + i * kIndexEntryBytes);
        }
        Xxh3 hh;
        const auto fixed = h.encode();
        hh.update(fixed.data(), FixedHeader::kChecksumOffset);
        hh.update(head.data() + h.meta_offset, h.meta_bytes);
        hh.update(head.data() + h.index_offset, h.record_count * kIndexEntryBytes);
        h.header_checksum = hh.digest();
        const auto final_fixed = h.encode();
        std::memcpy(head.data(), final_fixed.data(), final_fixed.size());
        write_file_range(tmp, 0, head.data(), head.size());
        sync_file(tmp);
        if (o.cancel != nullptr && o.cancel->load()) throw Cancelled();
        fs::rename(tmp, out, ec);
        if (ec) fail("cannot rename {} to {}: {}", tmp.string(), out.string(), ec.message());
        sync_directory(dir);
    } catch (...) {
        file = OutputFile();  // closes the descriptor before the file is removed (Windows)
        lock.reset();
        std::error_code rm;
        fs::remove(tmp, rm);
        throw;
    }
    result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return result;
}

}  // namespace neural::store
