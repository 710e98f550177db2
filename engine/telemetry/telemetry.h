// Engine telemetry: one record per generated token and one per request, published into
// lock-free rings that other threads (the GUI, the server's /metrics, `neural bench`) read while
// the engine runs. The engine thread is the only writer; readers never block it.
//
// Phases of a token (nanoseconds): cpu_kernel (the MoE / expert part on the CPU), gpu_wait,
// graph_submit and admission (0 on the CPU backend), sampling (choosing the token from the
// logits), other = wall - the rest, so the phases always sum to the wall time exactly.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

namespace neural::telemetry {

struct TokenRecord {
    std::uint64_t request = 0;  // RequestRecord::id of the request this token belongs to
    std::uint64_t index = 0;    // 1-based position of the generated token in its answer
    std::uint64_t wall_ns = 0;  // the forward pass that produced this token's logits + sampling
    std::uint64_t cpu_kernel_ns = 0;
    std::uint64_t gpu_wait_ns = 0;
    std::uint64_t graph_submit_ns = 0;
    std::uint64_t admission_ns = 0;
    std::uint64_t sampling_ns = 0;
    std::uint64_t other_ns = 0;
    std::uint64_t experts_hit = 0;     // (layer, expert) pairs computed from GPU-resident weights
    std::uint64_t experts_missed = 0;  // ... computed by the CPU from RAM (all of them on CPU)
    std::uint64_t experts_streamed =
        0;  // ... copied from the pinned store and computed on the GPU (--stream-misses)
    // Of experts_missed: split with the GPU, which computed their last neurons (--split-misses).
    std::uint64_t experts_split = 0;
    std::uint64_t admissions = 0;   // experts copied to the GPU during this token
    std::uint64_t cpu_bytes = 0;    // expert weight bytes the CPU read (MXFP4 blocks + scales)
    std::uint64_t page_faults = 0;  // process page faults (soft + hard) during the token
    // Of those, the major (hard) faults: pages read from disk because they were not in RAM
    // (POSIX ru_majflt; always 0 on Windows, which has no per-process count: see
    // platform/process_stats.h). Filled by the producer like page_faults (fault_counts()).
    std::uint64_t major_page_faults = 0;
    // Worker-team jobs of this token that the persistent team handed to the OpenMP reference team
    // (MoeCounters::team_fallbacks).
    std::uint64_t team_fallbacks = 0;
    // GPU time of the token (CUDA backend, BackendCounters::gpu_dense_ns ..): not a part of
    // wall_ns's split (the GPU runs beside the host); the bench's decode bounds use them.
    std::uint64_t gpu_dense_ns = 0;
    std::uint64_t gpu_experts_ns = 0;
    std::uint64_t gpu_experts_alone_ns = 0;
    std::uint64_t gpu_tail_ns = 0;
};

struct RequestRecord {
    std::uint64_t id = 0;  // 1, 2, ... per Telemetry object
    std::int64_t prompt_tokens = 0;
    std::int64_t cached_tokens = 0;
    double prompt_seconds = 0;
    double ttft_seconds = 0;         // request start -> first generated token
    std::int64_t decode_tokens = 0;  // generated tokens
    double decode_seconds = 0;       // first -> last generated token
    // The prompt pass: expert kernel time, bytes and page faults (decode tokens have their own).
    std::uint64_t prompt_cpu_kernel_ns = 0;
    std::uint64_t prompt_cpu_bytes = 0;
    std::uint64_t prompt_page_faults = 0;
    std::uint64_t prompt_major_page_faults = 0;
    bool cancelled = false;
};

// A ring of the last `capacity` records (a power of two). One producer: push() is wait-free.
// Any number of readers: read() copies record `index` (0-based, in push order) and returns
// nullopt when it was overwritten, is being written or was never written, so a reader never
// sees a torn record. Each slot carries a sequence number (odd while its words are written,
// 2 * (index + 1) once record `index` is complete); the payload is stored as relaxed atomic
// words, so concurrent reading is free of data races, not only of torn values.
template <typename T>
class Ring {
    static_assert(std::is_trivially_copyable_v<T>);
    static constexpr std::size_t kWords = (sizeof(T) + 7) / 8;

public:
    explicit Ring(std::size_t capacity = 4096) {
        std::size_t c = 1;
        while (c < capacity) c <<= 1;
        slots_ = std::make_unique<Slot[]>(c);
        mask_ = c - 1;
    }

    std::size_t capacity() const { return mask_ + 1; }
    // Records pushed so far; the readable ones are [max(0, published - capacity), published).
    std::uint64_t published() const { return head_.load(std::memory_order_acquire); }

    void push(const T& record) {
        const std::uint64_t index = head_.load(std::memory_order_relaxed);
        Slot& s = slots_[index & mask_];
        std::array<std::uint64_t, kWords> words{};
        std::memcpy(words.data(), &record, sizeof(T));
        s.seq.store(2 * index + 1, std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_release);  // odd seq before any new word
        for (std::size_t i = 0; i < kWords; ++i)
            s.words[i].store(words[i], std::memory_order_relaxed);
        s.seq.store(2 * (index + 1), std::memory_order_release);
        head_.store(index + 1, std::memory_order_release);
    }

    std::optional<T> read(std::uint64_t index) const {
        const Slot& s = slots_[index & mask_];
        const std::uint64_t want = 2 * (index + 1);
        if (s.seq.load(std::memory_order_acquire) != want) return std::nullopt;
        std::array<std::uint64_t, kWords> words{};
        for (std::size_t i = 0; i < kWords; ++i)
            words[i] = s.words[i].load(std::memory_order_relaxed);
        std::atomic_thread_fence(std::memory_order_acquire);  // the words before the re-check
        if (s.seq.load(std::memory_order_relaxed) != want) return std::nullopt;
        T out;
        std::memcpy(static_cast<void*>(&out), words.data(), sizeof(T));
        return out;
    }

    // The readable records with index >= `from`, oldest first (records overwritten while
    // copying are skipped). `next` receives the index to pass next time.
    std::vector<T> since(std::uint64_t from, std::uint64_t* next = nullptr) const {
        const std::uint64_t end = published();
        const std::uint64_t oldest = end > capacity() ? end - capacity() : 0;
        std::vector<T> out;
        for (std::uint64_t i = from < oldest ? oldest : from; i < end; ++i) {
            if (auto r = read(i)) out.push_back(*r);
        }
        if (next != nullptr) *next = end;
        return out;
    }

private:
    struct alignas(64) Slot {
        std::atomic<std::uint64_t> seq{0};
        std::array<std::atomic<std::uint64_t>, kWords> words{};
    };
    std::unique_ptr<Slot[]> slots_;
    std::size_t mask_ = 0;
    alignas(64) std::atomic<std::uint64_t> head_{0};
};

// Running totals of the MoE part of the CPU forward pass, added by CpuModel (the engine thread)
// and read as before/after deltas around each forward call. Relaxed atomics: the counts are
// read from the same thread that adds them; other threads only ever see approximate totals.
struct MoeCounters {
    std::atomic<bool> enabled{true};
    std::atomic<std::uint64_t> ns{0};       // wall time inside CpuModel::moe's expert part
    std::atomic<std::uint64_t> bytes{0};    // expert weight bytes read
    std::atomic<std::uint64_t> experts{0};  // (layer, expert) pairs computed
    // Expert-kernel jobs (one per kernel call on a worker team) that ran on the OpenMP reference
    // team although the persistent team was asked for: jobs it does not support (a floating-point
    // state with an unmasked exception, a nested call) and, when its library did not load, every
    // job. Added by cpu::StoreMoe whether or not `enabled` (it costs nothing to count).
    std::atomic<std::uint64_t> team_fallbacks{0};
    // The screened lm_head (docs/KERNELS.md "Screened lm_head"): tokens whose logits came from
    // it, the rows it computed exactly for them, and of those tokens the ones where it ran the
    // whole head after all (nothing useful proved). Counted whether or not `enabled`.
    std::atomic<std::uint64_t> screened_tokens{0};
    std::atomic<std::uint64_t> screened_exact_rows{0};
    std::atomic<std::uint64_t> screened_full{0};

    struct Snapshot {
        std::uint64_t ns = 0, bytes = 0, experts = 0;
        std::uint64_t team_fallbacks = 0;
    };
    Snapshot snapshot() const {
        return {ns.load(std::memory_order_relaxed), bytes.load(std::memory_order_relaxed),
                experts.load(std::memory_order_relaxed),
                team_fallbacks.load(std::memory_order_relaxed)};
    }
};

// RAM residency of the expert store (LoadOptions warmup_ram_seconds, lock_ram_bytes,
// release_resident; docs/USER_GUIDE.md "RAM residency"): written by the model's warm-up thread
// and by ExpertStore::release_expert (any thread), read by the surfaces. Relaxed atomics.
struct RamCounters {
    enum State : std::uint32_t { kOff = 0, kRunning = 1, kDone = 2, kTimeBound = 3, kStopped = 4 };
    std::atomic<std::uint32_t> warmup_state{kOff};      // kDone: every record in order was reached
    std::atomic<std::uint64_t> warmup_records{0};       // records warmed so far (hot first)
    std::atomic<std::uint64_t> warmup_bytes{0};         // their bytes
    std::atomic<std::uint64_t> warmup_pages_loaded{0};  // pages that were not resident before
    std::atomic<std::uint64_t> warmup_ns{0};            // time spent so far
    std::atomic<std::uint64_t> locked_records{0};       // --lock-ram: records locked in RAM
    std::atomic<std::uint64_t> locked_bytes{0};
    std::atomic<std::uint64_t> released_records{0};  // --release-resident: records given back
    std::atomic<std::uint64_t> released_bytes{0};
};

// Page faults so far (soft + hard, and hard), for the producer's before/after deltas of
// TokenRecord::page_faults / major_page_faults (platform/process_stats.h).
struct FaultCounts {
    std::uint64_t total = 0;
    std::uint64_t major = 0;
};
FaultCounts fault_counts();

// Mean major page faults per record over `records` (0 for none): the number the surfaces
// show as "major faults per token".
double major_faults_per_token(const std::vector<TokenRecord>& records);

// One per loaded model: the rings and the MoE counters. enabled = false makes ChatSession skip
// recording (and CpuModel skip timing), for overhead measurements.
class Telemetry {
public:
    explicit Telemetry(std::size_t token_capacity = 1 << 16, std::size_t request_capacity = 1024)
        : tokens_(token_capacity), requests_(request_capacity) {}

    void set_enabled(bool on) { moe.enabled.store(on, std::memory_order_relaxed); }
    bool enabled() const { return moe.enabled.load(std::memory_order_relaxed); }

    Ring<TokenRecord>& tokens() { return tokens_; }
    const Ring<TokenRecord>& tokens() const { return tokens_; }
    Ring<RequestRecord>& requests() { return requests_; }
    const Ring<RequestRecord>& requests() const { return requests_; }
    // The id for the next request (single producer: the engine thread).
    std::uint64_t next_request_id() { return ++last_request_; }

    MoeCounters moe;
    RamCounters ram;

private:
    Ring<TokenRecord> tokens_;
    Ring<RequestRecord> requests_;
    std::uint64_t last_request_ = 0;
};

// other_ns = wall - (the named phases), clamped at 0 (timer granularity), so the phases add up.
void finish_phases(TokenRecord& r);

}  // namespace neural::telemetry
