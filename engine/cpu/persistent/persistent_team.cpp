// The persistent worker team (library neural_cpu_persistent; C ABI in team_abi.h).
//
// The caller is worker 0; N-1 threads live as long as the team. A job is a sequence of phases;
// each phase is published as a new epoch in one 64-bit word `claim_` = epoch << 32 | next task.
// Every thread claims tasks with a compare-exchange that succeeds only while the epoch is
// unchanged and tasks remain, so a late worker can never run a task of a phase it did not read.
// Publishing first closes the old epoch (its task counter set past any task count, so no claim on
// it can succeed any more), then writes the phase descriptor (fn, ctx, n_tasks, fp control) with
// release stores, then opens the new epoch. A worker that read a descriptor newer than its claim
// word therefore finds the old epoch closed and its compare-exchange fails. (Without the closing
// step a worker holding the exhausted word of the old epoch would compare it with the next
// phase's larger task count and claim one of its tasks early: the task would run twice, or the
// caller's count of finished tasks would overshoot and it would wait forever, as a loaded
// machine under Wine showed.)
// A thread adds the number of tasks it finished to `done_` (release) when it finds no task left,
// one atomic per thread and phase rather than per task; the caller waits (acquire) until
// done_ == n_tasks before the next phase or before returning, so every store of every task is
// visible to it (tasks that used non-temporal stores fence them themselves). Jobs, configuration
// changes and shutdown hold one mutex, so they are serialized.
//
// Idle workers spin with `pause` for spin_us, then yield (std::this_thread::yield), then park
// after park_us without a job; the caller wakes parked workers only when some are parked. A
// parked worker waits on a condition variable whose predicate (the epoch moved on) is checked
// under its mutex, and the caller takes that mutex between publishing and notifying, so a wake-up
// cannot fall between a worker's check and its wait. (Not std::atomic::wait: libstdc++ 12 without
// futexes -- MinGW, i.e. the Windows build -- checks the value outside its mutex and notifies
// without it, GCC PR 106183, and lost that wake-up under load: a worker slept through the stop of
// shutdown() and join() hung.) Each worker installs the job's floating-point control word (MXCSR)
// before running its tasks.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "cpu/persistent/team_abi.h"
#include "cpu/persistent/fp_control.h"
#include "platform/thread_affinity.h"

#if NEURAL_FP_CONTROL_X86
#include <immintrin.h>  // _mm_pause
#endif

#if defined(_WIN32)
#define NEURAL_PERSISTENT_EXPORT extern "C" __declspec(dllexport)
#else
#define NEURAL_PERSISTENT_EXPORT extern "C" __attribute__((visibility("default")))
#endif

namespace neural::cpu::persistent {
namespace {

using Clock = std::chrono::steady_clock;

inline void cpu_relax() {
#if NEURAL_FP_CONTROL_X86
    _mm_pause();
#else
    std::this_thread::yield();
#endif
}

struct Config {
    int threads = 1;
    bool pin = false;
    int spin_us = 50;
    int park_us = 4000;
};

void set_error(char* error, size_t size, const char* message) {
    if (error != nullptr && size > 0) std::snprintf(error, size, "%s", message);
}

bool read_config(const neural_team_config* c, Config* out, char* error, size_t size) {
    if (c == nullptr || c->struct_size < sizeof(neural_team_config)) {
        set_error(error, size, "bad neural_team_config");
        return false;
    }
    if (c->threads < 1 || c->threads > 1024) {
        set_error(error, size, "thread count must be in [1, 1024]");
        return false;
    }
    out->threads = c->threads;
    out->pin = c->pin != 0;
    out->spin_us = std::max(0, c->spin_us);
    out->park_us = c->park_us;
    return true;
}

class Team;
// The team whose task the current thread is running (nested run() would deadlock).
thread_local const Team* t_running = nullptr;

class Team {
public:
    bool start(const Config& config, char* error, size_t size) {
        config_ = config;
        stop_.store(false, std::memory_order_relaxed);
        const auto epoch = static_cast<std::uint32_t>(claim_.load(std::memory_order_relaxed) >> 32);
        try {
            for (int w = 1; w < config.threads; ++w) {
                threads_.emplace_back([this, w, epoch] { worker_main(w, epoch); });
            }
        } catch (const std::exception& e) {
            shutdown();
            set_error(error, size, e.what());
            return false;
        }
        return true;
    }

    ~Team() {
        const std::lock_guard<std::mutex> lock(mutex_);
        shutdown();
    }

    int32_t size() const { return static_cast<int32_t>(threads_.size()) + 1; }
    uint64_t jobs() const { return jobs_.load(std::memory_order_relaxed); }

    int32_t configure(const Config& config, char* error, size_t size) {
        const std::lock_guard<std::mutex> lock(mutex_);
        shutdown();
        return start(config, error, size) ? 0 : 1;
    }

    int32_t run(const neural_team_phase* phases, int32_t n_phases, uint32_t control) {
        if (t_running == this) return NEURAL_TEAM_UNSUPPORTED;
        if (!fp_control_supported(control)) return NEURAL_TEAM_UNSUPPORTED;
        for (int32_t p = 0; p < n_phases; ++p) {
            if (phases[p].n_tasks < 0 || phases[p].n_tasks >= INT64_C(0xFFFFFFFF)) {
                return NEURAL_TEAM_UNSUPPORTED;
            }
        }
        const std::lock_guard<std::mutex> lock(mutex_);
        // The caller's own control word is `control` already (it was read on this thread).
        t_running = this;
        for (int32_t p = 0; p < n_phases; ++p) {
            const neural_team_phase& ph = phases[p];
            if (ph.n_tasks == 0) continue;
            if (ph.n_tasks == 1 || threads_.empty()) {
                // Not worth waking anyone; the caller runs the phase alone.
                for (int64_t t = 0; t < ph.n_tasks; ++t) ph.fn(ph.ctx, t, 0);
                continue;
            }
            run_phase(ph, control);
        }
        t_running = nullptr;
        jobs_.fetch_add(1, std::memory_order_relaxed);
        return NEURAL_TEAM_OK;
    }

private:
    void publish(int64_t n_tasks, neural_team_task_fn fn, void* ctx, uint32_t control) {
        // Close the current epoch before touching the descriptor (see the top of this file).
        const uint64_t epoch = claim_.load(std::memory_order_relaxed) >> 32;
        claim_.store((epoch << 32) | kClosed, std::memory_order_seq_cst);
        n_tasks_.store(n_tasks, std::memory_order_release);
        fn_.store(fn, std::memory_order_release);
        ctx_.store(ctx, std::memory_order_release);
        control_.store(control, std::memory_order_release);
        done_.store(0, std::memory_order_relaxed);
        claim_.store(((epoch + 1) & 0xFFFFFFFFu) << 32, std::memory_order_seq_cst);
        // A worker counts itself in sleepers_ (seq_cst) before it checks the epoch, and this
        // store precedes the load below: either it sees the new epoch or we see it and wake it.
        if (sleepers_.load(std::memory_order_seq_cst) > 0) wake_all();
    }

    void wake_all() {
        { const std::lock_guard<std::mutex> lock(park_mutex_); }  // orders us after its check
        park_cv_.notify_all();
    }

    void run_phase(const neural_team_phase& ph, uint32_t control) {
        publish(ph.n_tasks, ph.fn, ph.ctx, control);
        const uint64_t c = claim_.load(std::memory_order_acquire);
        claim_tasks(c, ph.fn, ph.ctx, ph.n_tasks, 0);
        // Wait for the tasks other threads claimed.
        const Clock::time_point start = Clock::now();
        for (unsigned spins = 0; done_.load(std::memory_order_acquire) != ph.n_tasks; ++spins) {
            if ((spins & 63u) != 63u) {
                cpu_relax();
            } else if (Clock::now() - start >= std::chrono::microseconds(config_.spin_us)) {
                std::this_thread::yield();
            }
        }
    }

    // Claims and runs tasks of the epoch in `c` until none are left or the epoch moved on, then
    // adds the tasks it ran to done_ at once: one contended atomic per task (the claim) instead
    // of two. The count still reaches n_tasks only after every task has returned.
    void claim_tasks(uint64_t c, neural_team_task_fn fn, void* ctx, int64_t n, int32_t worker) {
        const uint64_t epoch = c >> 32;
        int64_t finished = 0;
        while ((c >> 32) == epoch && static_cast<int64_t>(c & 0xFFFFFFFFu) < n) {
            if (claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel,
                                             std::memory_order_acquire)) {
                fn(ctx, static_cast<int64_t>(c & 0xFFFFFFFFu), worker);
                ++finished;
                ++c;  // the likely next value; a failed exchange reloads it
            }
        }
        if (finished > 0) done_.fetch_add(finished, std::memory_order_release);
    }

    // Spins, yields, then parks until the epoch differs from `seen`; returns the claim word.
    uint64_t wait_for_epoch(uint64_t seen) {
        uint64_t c = claim_.load(std::memory_order_acquire);
        if ((c >> 32) != seen) return c;
        const Clock::time_point start = Clock::now();
        const auto spin = std::chrono::microseconds(config_.spin_us);
        const auto park = std::chrono::microseconds(config_.park_us);
        for (unsigned i = 1;; ++i) {
            if ((i & 63u) == 0) {
                const auto idle = Clock::now() - start;
                if (config_.park_us >= 0 && idle >= park) break;
                if (idle >= spin) std::this_thread::yield();
            } else {
                cpu_relax();
            }
            c = claim_.load(std::memory_order_acquire);
            if ((c >> 32) != seen) return c;
        }
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        {
            std::unique_lock<std::mutex> lock(park_mutex_);
            park_cv_.wait(lock, [&] {
                c = claim_.load(std::memory_order_seq_cst);
                return (c >> 32) != seen;
            });
        }
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
        return c;
    }

    void worker_main(int worker, uint32_t epoch) {
        if (config_.pin) pin_current_thread(worker);
        uint32_t installed = read_fp_control();
        uint64_t seen = epoch;
        for (;;) {
            const uint64_t c = wait_for_epoch(seen);
            seen = c >> 32;
            if (stop_.load(std::memory_order_acquire)) return;
            const int64_t n = n_tasks_.load(std::memory_order_acquire);
            const neural_team_task_fn fn = fn_.load(std::memory_order_acquire);
            void* ctx = ctx_.load(std::memory_order_acquire);
            const uint32_t control = control_.load(std::memory_order_acquire);
            if (fn == nullptr) continue;
            if (control != installed) {
                write_fp_control(control);
                installed = control;
            }
            t_running = this;
            claim_tasks(c, fn, ctx, n, worker);
            t_running = nullptr;
        }
    }

    // Stops and joins the workers (caller holds mutex_ or is the destructor).
    void shutdown() {
        if (threads_.empty()) return;
        stop_.store(true, std::memory_order_release);
        publish(0, nullptr, nullptr, 0);
        wake_all();
        for (std::thread& t : threads_) t.join();
        threads_.clear();
        stop_.store(false, std::memory_order_relaxed);
    }

    // Task counter of a closed epoch: above any task count (run() refuses n >= 0xFFFFFFFF).
    static constexpr uint64_t kClosed = 0xFFFFFFFFu;

    std::mutex mutex_;
    Config config_;
    std::vector<std::thread> threads_;
    alignas(64) std::atomic<uint64_t> claim_{0};
    alignas(64) std::atomic<int64_t> done_{0};
    alignas(64) std::atomic<int64_t> n_tasks_{0};
    std::atomic<neural_team_task_fn> fn_{nullptr};
    std::atomic<void*> ctx_{nullptr};
    std::atomic<uint32_t> control_{0};
    std::atomic<bool> stop_{false};
    alignas(64) std::atomic<int> sleepers_{0};
    std::mutex park_mutex_;  // parked workers wait on park_cv_ under it
    std::condition_variable park_cv_;
    std::atomic<uint64_t> jobs_{0};
};

void* team_create(const neural_team_config* config, char* error, size_t error_size) {
    Config c;
    if (!read_config(config, &c, error, error_size)) return nullptr;
    try {
        auto* team = new Team();
        if (!team->start(c, error, error_size)) {
            delete team;
            return nullptr;
        }
        return team;
    } catch (const std::exception& e) {
        set_error(error, error_size, e.what());
        return nullptr;
    }
}

void team_destroy(void* team) { delete static_cast<Team*>(team); }

int32_t team_size(void* team) { return static_cast<Team*>(team)->size(); }

int32_t team_run(void* team, const neural_team_phase* phases, int32_t n_phases,
                 uint32_t fp_control) {
    return static_cast<Team*>(team)->run(phases, n_phases, fp_control);
}

int32_t team_configure(void* team, const neural_team_config* config, char* error,
                       size_t error_size) {
    Config c;
    if (!read_config(config, &c, error, error_size)) return 1;
    return static_cast<Team*>(team)->configure(c, error, error_size);
}

uint64_t team_jobs(void* team) { return static_cast<Team*>(team)->jobs(); }

}  // namespace
}  // namespace neural::cpu::persistent

NEURAL_PERSISTENT_EXPORT const neural_team_vtable* neural_cpu_persistent_team_v1(
    uint32_t abi_version) {
    namespace p = neural::cpu::persistent;
    static const neural_team_vtable vtable = {NEURAL_TEAM_ABI_VERSION,
                                              sizeof(neural_team_vtable),
                                              p::team_create,
                                              p::team_destroy,
                                              p::team_size,
                                              p::team_run,
                                              p::team_configure,
                                              p::team_jobs};
    return abi_version == NEURAL_TEAM_ABI_VERSION ? &vtable : nullptr;
}
