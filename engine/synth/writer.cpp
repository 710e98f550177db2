// write_checkpoint: generator threads fill fixed-size chunks in parallel into a ring of buffers;
// the calling thread writes them strictly in file order with large sequential writes, so the
// output is produced at disk speed and its bytes do not depend on the thread count.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <new>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "neural/error.h"
#include "platform/output_file.h"
#include "synth/synth.h"

namespace neural::synth {

namespace {

namespace fs = std::filesystem;

// Bytes per generated chunk: large enough for efficient writes, small enough that the ring
// (threads + 2 chunks, at most 34) stays a few hundred MB at most. A multiple of the direct-I/O
// alignment, so every chunk but a file's last goes to the disk without the page cache.
constexpr std::uint64_t kChunkBytes = 8ull << 20;
static_assert(kChunkBytes % OutputFile::kDirectAlignment == 0);
// Free space kept beyond the checkpoint itself (file system metadata, other writers).
constexpr std::uint64_t kSpaceReserve = 64ull << 20;

// A piece of one shard file: file offsets, the header included.
struct Chunk {
    int shard = 0;
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
};

std::vector<Chunk> split_chunks(const Plan& plan) {
    std::vector<Chunk> chunks;
    for (std::size_t s = 0; s < plan.shards.size(); ++s) {
        const std::uint64_t n = plan.shards[s].file_bytes();
        for (std::uint64_t b = 0; b < n; b += kChunkBytes) {
            chunks.push_back({static_cast<int>(s), b, std::min(n, b + kChunkBytes)});
        }
    }
    return chunks;
}

// Generates the file bytes of `c` into `out`: the part of the header it covers, then a run of
// whole or partial tensors (a shard's tensors are contiguous in data order).
void generate_chunk(const Plan& plan, const Chunk& c, std::uint8_t* out) {
    const ShardPlan& shard = plan.shards[c.shard];
    const std::uint64_t header = shard.header.size();
    if (c.begin < header) {
        const std::uint64_t n = std::min(c.end, header) - c.begin;
        std::memcpy(out, shard.header.data() + c.begin, n);
        if (c.end <= header) return;
    }
    const std::uint64_t begin = std::max(c.begin, header) - header;  // data-area offsets
    const std::uint64_t end = c.end - header;
    std::uint8_t* data = out + (std::max(c.begin, header) - c.begin);
    auto it = std::upper_bound(
        shard.tensors.begin(), shard.tensors.end(), begin,
        [&](std::uint64_t off, std::size_t i) { return off < plan.tensors[i].offset; });
    if (it != shard.tensors.begin()) --it;
    for (; it != shard.tensors.end(); ++it) {
        const TensorPlan& t = plan.tensors[*it];
        if (t.offset >= end) break;
        const std::uint64_t lo = std::max(begin, t.offset);
        const std::uint64_t hi = std::min(end, t.offset + t.nbytes);
        if (lo < hi) fill_tensor(plan, *it, lo - t.offset, hi - t.offset, data + (lo - begin));
    }
}

// A chunk buffer aligned for direct I/O.
struct AlignedBuffer {
    struct Free {
        void operator()(std::uint8_t* p) const {
            ::operator delete[](p, std::align_val_t(OutputFile::kDirectAlignment));
        }
    };
    std::unique_ptr<std::uint8_t[], Free> data;
    explicit AlignedBuffer(std::size_t n)
        : data(static_cast<std::uint8_t*>(
              ::operator new[](n, std::align_val_t(OutputFile::kDirectAlignment)))) {}
};

std::string format_bytes(std::uint64_t n) {
    if (n >= 1'000'000'000ull) return fmt::format("{:.2f} GB", n / 1e9);
    if (n >= 1'000'000ull) return fmt::format("{:.1f} MB", n / 1e6);
    return fmt::format("{} bytes", n);
}

// "Generate in parallel, write in order." Units (chunks) are taken by workers in increasing
// order; unit i lives in ring slot i % slots and may only be generated once unit i - slots has
// been written, so the writer always finds its next unit owned by a running worker.
class Pipeline {
public:
    Pipeline(const Plan& plan, std::vector<Chunk> chunks, int threads)
        : plan_(plan), chunks_(std::move(chunks)) {
        // At most 34 slots (272 MB): beyond ~16 generator threads any disk is the limit.
        const std::size_t slots = std::min<std::size_t>(
            {static_cast<std::size_t>(threads) + 2, 34, std::max<std::size_t>(chunks_.size(), 1)});
        for (std::size_t i = 0; i < slots; ++i) buffers_.emplace_back(kChunkBytes);
        ready_.assign(slots, -1);
        for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
    }
    ~Pipeline() { stop(); }

    std::int64_t size() const { return static_cast<std::int64_t>(chunks_.size()); }
    const Chunk& chunk(std::int64_t i) const { return chunks_[static_cast<std::size_t>(i)]; }

    // Waits for unit i (in order) and returns its bytes; valid until release(i).
    const std::uint8_t* wait(std::int64_t i) {
        std::unique_lock lock(mu_);
        const std::size_t slot = static_cast<std::size_t>(i) % ready_.size();
        ready_cv_.wait(lock, [&] { return ready_[slot] == i || error_; });
        if (error_) std::rethrow_exception(error_);
        return buffers_[slot].data.get();
    }
    void release(std::int64_t i) {
        {
            std::lock_guard lock(mu_);
            written_ = i + 1;
        }
        space_cv_.notify_all();
    }
    void stop() {
        {
            std::lock_guard lock(mu_);
            abort_ = true;
        }
        space_cv_.notify_all();
        for (auto& t : workers_) {
            if (t.joinable()) t.join();
        }
    }

private:
    void work() {
        try {
            for (;;) {
                const std::int64_t i = next_.fetch_add(1);
                if (i >= size()) return;
                const std::size_t slot = static_cast<std::size_t>(i) % ready_.size();
                {
                    std::unique_lock lock(mu_);
                    space_cv_.wait(lock, [&] {
                        return abort_ || i < written_ + static_cast<std::int64_t>(ready_.size());
                    });
                    if (abort_) return;
                }
                // The slot is ours until the writer releases unit i: no lock while generating.
                generate_chunk(plan_, chunk(i), buffers_[slot].data.get());
                {
                    std::lock_guard lock(mu_);
                    ready_[slot] = i;
                }
                ready_cv_.notify_all();
            }
        } catch (...) {
            {
                std::lock_guard lock(mu_);
                if (!error_) error_ = std::current_exception();
                abort_ = true;
            }
            ready_cv_.notify_all();
            space_cv_.notify_all();
        }
    }

    const Plan& plan_;
    const std::vector<Chunk> chunks_;
    std::vector<AlignedBuffer> buffers_;
    std::vector<std::int64_t> ready_;  // per slot: the unit it holds, -1 = none yet
    std::atomic<std::int64_t> next_{0};
    std::int64_t written_ = 0;  // units [0, written_) are on disk (under mu_)
    bool abort_ = false;
    std::exception_ptr error_;
    std::mutex mu_;
    std::condition_variable ready_cv_, space_cv_;
    std::vector<std::thread> workers_;
};

// The tokenizer files to copy: tokenizer.json plus its optional companions.
std::vector<fs::path> tokenizer_files(const fs::path& given) {
    if (given.empty()) {
        fail(
            "a tokenizer is required: pass --tokenizer FILE (a tokenizer.json) or set "
            "NEURAL_TOKENIZER");
    }
    std::error_code ec;
    fs::path file = fs::is_directory(given, ec) ? given / "tokenizer.json" : given;
    if (!fs::is_regular_file(file, ec)) {
        fail(
            "tokenizer {} does not exist or is not a file (pass --tokenizer FILE, a "
            "tokenizer.json)",
            file.string());
    }
    std::vector<fs::path> files = {file};
    for (const char* extra : {"tokenizer_config.json", "chat_template.jinja"}) {
        const fs::path p = file.parent_path() / extra;
        if (fs::is_regular_file(p, ec)) files.push_back(p);
    }
    return files;
}

void write_small_file(const fs::path& path, const std::string& bytes) {
    OutputFile f = OutputFile::create(path);
    f.write(bytes.data(), bytes.size());
    f.sync();
    f.close();
}

void copy_file(const fs::path& from, const fs::path& to, std::uint64_t& written) {
    std::ifstream in(from, std::ios::binary);
    if (!in) fail("cannot read {}", from.string());
    OutputFile out = OutputFile::create(to);
    std::vector<char> buf(1 << 20);
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        const auto n = static_cast<std::size_t>(in.gcount());
        if (n > 0) out.write(buf.data(), n);
        written += n;
    }
    if (in.bad()) fail("cannot read {}", from.string());
    out.sync();
    out.close();
}

std::string random_suffix() {
    std::random_device rd;
    return fmt::format("{:08x}", rd());
}

bool is_empty_dir(const fs::path& p) {
    std::error_code ec;
    return fs::directory_iterator(p, ec) == fs::directory_iterator();
}

}  // namespace

WriteResult write_checkpoint(const Plan& plan, const fs::path& out_dir,
                             const WriteOptions& options) {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    std::error_code ec;

    // --- checks before anything is written ---------------------------------------------------
    if (out_dir.empty()) fail("no output folder given");
    fs::path out = fs::absolute(out_dir).lexically_normal();
    if (!out.has_filename()) out = out.parent_path();  // "dir/" -> "dir"
    if (out == out.root_path() || !out.has_filename()) {
        fail("refusing to write a checkpoint to {}", out.string());
    }
    const bool exists = fs::exists(out, ec);
    if (exists && !fs::is_directory(out, ec)) fail("{} exists and is not a folder", out.string());
    if (exists && !is_empty_dir(out) && !options.force) {
        fail("{} is not empty; pass --force to replace it", out.string());
    }
    const std::vector<fs::path> tok_files = tokenizer_files(options.tokenizer);

    const fs::path parent = out.parent_path();
    fs::create_directories(parent, ec);
    if (ec) fail("cannot create {}: {}", parent.string(), ec.message());
    std::uint64_t needed = plan.file_bytes;
    for (const auto& f : tok_files) needed += fs::file_size(f, ec);
    const fs::space_info space = fs::space(parent, ec);
    if (ec) fail("cannot read the free space of {}: {}", parent.string(), ec.message());
    if (space.available < needed + kSpaceReserve) {
        fail(
            "not enough free disk space in {}: the checkpoint needs {} ({} bytes) plus {} of "
            "headroom, {} ({} bytes) available",
            parent.string(), format_bytes(needed), needed, format_bytes(kSpaceReserve),
            format_bytes(space.available), space.available);
    }

    // --- write into a hidden temporary sibling ------------------------------------------------
    const std::string name = out.filename().string();
    const fs::path tmp = parent / fmt::format(".{}.synth-{}.partial", name, random_suffix());
    if (!fs::create_directory(tmp, ec)) {
        fail("cannot create {}: {}", tmp.string(), ec ? ec.message() : "it already exists");
    }
    int threads = options.threads > 0 ? options.threads
                                      : static_cast<int>(std::thread::hardware_concurrency());
    threads = std::clamp(threads, 1, 256);

    WriteResult result;
    result.dir = out;
    try {
        auto cancelled = [&] { return options.cancel && options.cancel->load(); };
        std::uint64_t done = 0;
        auto last_report = start;
        bool reported = false;
        // About once a second, and only once the job has run for a second; the final call
        // (100 %) only when earlier ones were made, so callers can finish their progress line.
        auto report = [&](bool final) {
            if (!options.on_progress || (final && !reported)) return;
            const auto now = Clock::now();
            if (!final && now - last_report < std::chrono::seconds(1)) return;
            last_report = now;
            reported = true;
            options.on_progress({done, needed, std::chrono::duration<double>(now - start).count()});
        };

        write_small_file(tmp / "config.json", plan.config_json);
        write_small_file(tmp / "generation_config.json", plan.generation_config_json);
        write_small_file(tmp / kSynthMarkerFile, plan.marker_json);
        done +=
            plan.config_json.size() + plan.generation_config_json.size() + plan.marker_json.size();
        for (const auto& f : tok_files) copy_file(f, tmp / f.filename(), done);

        Pipeline pipe(plan, split_chunks(plan), threads);
        OutputFile file;
        int open_shard = -1;
        auto finish_shard = [&] {
            if (!file.is_open()) return;
            file.sync();  // durable before the folder is published
            file.close();
        };
        for (std::int64_t i = 0; i < pipe.size(); ++i) {
            if (cancelled()) throw Cancelled();
            const Chunk& c = pipe.chunk(i);
            if (c.shard != open_shard) {
                finish_shard();
                file = OutputFile::create(tmp / plan.shards[c.shard].file_name, true);
                open_shard = c.shard;
            }
            const std::uint8_t* bytes = pipe.wait(i);
            file.write(bytes, c.end - c.begin);
            pipe.release(i);
            done += c.end - c.begin;
            report(false);
        }
        finish_shard();
        pipe.stop();
        if (plan.indexed) {
            write_small_file(tmp / "model.safetensors.index.json", plan.index_json);
            done += plan.index_json.size();
        }
        if (cancelled()) throw Cancelled();

        // --- publish: an existing folder is moved aside only now, then removed --------------
        fs::path old;
        if (fs::exists(out, ec)) {
            old = parent / fmt::format(".{}.synth-{}.old", name, random_suffix());
            fs::rename(out, old, ec);
            if (ec) fail("cannot move the old {} aside: {}", out.string(), ec.message());
        }
        fs::rename(tmp, out, ec);
        if (ec) {
            const std::string why = ec.message();
            if (!old.empty()) fs::rename(old, out, ec);
            fail("cannot rename {} to {}: {}", tmp.string(), out.string(), why);
        }
        if (!old.empty()) fs::remove_all(old, ec);
        result.bytes = done;
        report(true);
    } catch (const Cancelled&) {
        fs::remove_all(tmp, ec);
        throw;
    } catch (const Error& e) {
        fs::remove_all(tmp, ec);
        throw Error(fmt::format("{} ({} was left as it was; the partial output was removed)",
                                e.what(), out.string()));
    } catch (const std::exception& e) {
        fs::remove_all(tmp, ec);
        throw Error(fmt::format("writing {} failed: {} (the partial output was removed)",
                                out.string(), e.what()));
    }
    result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return result;
}

}  // namespace neural::synth
