// Worker teams run a job (one or more phases of dynamically claimed tasks) on the calling
// thread plus N-1 helpers. Two implementations behind one interface:
//  - ReferenceTeam: OpenMP, one parallel region per run() (schedule(dynamic, 1) per phase).
//  - PersistentTeam: the separate library neural_cpu_persistent (persistent/team_abi.h),
//    loaded at run time: N-1 persistent threads that spin (then yield, then park) between
//    jobs, so a job costs no thread-team entry/exit. Jobs it cannot run fall back to a
//    ReferenceTeam and are counted.
// Both install the caller's floating-point control state (persistent/fp_control.h) in every thread
// for the job, so a task computes the same bits whichever thread claims it: results depend only
// on how tasks are defined, never on the thread count or the schedule.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

namespace neural::cpu {

// Tasks [0, n_tasks) run once each: fn(ctx, task, worker), worker in [0, team.size()),
// 0 = the calling thread. fn must not throw (it may run on a thread the caller cannot unwind
// into). Phase p + 1 starts after every task of phase p has returned, with its stores visible
// (a task that used non-temporal stores must fence them itself).
struct TeamPhase {
    std::int64_t n_tasks = 0;
    void (*fn)(void* ctx, std::int64_t task, std::int32_t worker) = nullptr;
    void* ctx = nullptr;
};

struct TeamCounters {
    std::uint64_t jobs = 0;       // run() calls this team executed itself
    std::uint64_t fallbacks = 0;  // run() calls it handed to its reference team (persistent)
};

class WorkerTeam {
public:
    virtual ~WorkerTeam() = default;
    virtual const char* name() const = 0;  // "reference" / "persistent"
    virtual int size() const = 0;          // threads including the caller
    // Runs the phases in order and returns when every task has finished. Jobs from several
    // threads are serialized by the persistent team; the reference team runs them concurrently
    // (each in its own OpenMP region).
    virtual void run(std::span<const TeamPhase> phases) = 0;
    void run(const TeamPhase& phase) { run(std::span<const TeamPhase>(&phase, 1)); }
    virtual TeamCounters counters() const = 0;
};

// min(available CPUs, 8): the reference study's 8-core desktop ran its kernel on 8 threads;
// more threads than memory channels can feed does not help a bandwidth-bound kernel.
int default_team_threads();

class ReferenceTeam final : public WorkerTeam {
public:
    // threads <= 0: default_team_threads(). Without OpenMP the team has one thread.
    // stands_in_for_persistent: the persistent team was asked for but could not be loaded
    // (make_worker_team), so every job this team runs is a fallback and counted as one.
    explicit ReferenceTeam(int threads = 0, bool stands_in_for_persistent = false);
    const char* name() const override { return "reference"; }
    int size() const override { return threads_; }
    using WorkerTeam::run;
    void run(std::span<const TeamPhase> phases) override;
    TeamCounters counters() const override;

private:
    int threads_;
    bool stands_in_ = false;
    std::atomic<std::uint64_t> jobs_{0};
};

struct TeamOptions {
    bool persistent = false;        // --kernel-persistent 1
    int threads = 0;                // <= 0: default_team_threads()
    bool pin = false;               // pin persistent worker w to logical CPU w
    std::filesystem::path library;  // --kdll; empty: $NEURAL_KDLL, then beside the executable
    int spin_us = 50;               // idle persistent workers spin this long, then yield ...
    int park_us = 4000;             // ... then park after this long without a job (< 0: never)
};

class PersistentTeam final : public WorkerTeam {
public:
    // The library file name for this platform (libneural_cpu_persistent.so /
    // neural_cpu_persistent.dll).
    static std::string library_file_name();
    // options.library, else $NEURAL_KDLL, else executable_dir() / library_file_name().
    static std::filesystem::path resolve_library(const TeamOptions& options);

    // Loads the library and starts the team. Throws neural::Error naming the path and the
    // reason (not found, not loadable, missing entry point, ABI mismatch, thread start failure).
    static std::unique_ptr<PersistentTeam> load(const TeamOptions& options);

    ~PersistentTeam() override;
    PersistentTeam(const PersistentTeam&) = delete;
    PersistentTeam& operator=(const PersistentTeam&) = delete;

    const char* name() const override { return "persistent"; }
    int size() const override;
    using WorkerTeam::run;
    void run(std::span<const TeamPhase> phases) override;
    TeamCounters counters() const override;

    // Restarts the workers with a new thread count / pinning (waits for a running job; must not
    // race with run() calls from other threads, which may be using the fallback team).
    void configure(int threads, bool pin);

private:
    struct Impl;
    explicit PersistentTeam(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// The persistent team when options.persistent and it loads; otherwise (or when loading fails)
// the reference team. `fallback_reason` (optional) receives why a requested persistent team
// was not used (empty when it was, or when it was not requested); such a stand-in reference
// team counts every job as a fallback.
std::unique_ptr<WorkerTeam> make_worker_team(const TeamOptions& options,
                                             std::string* fallback_reason = nullptr);

}  // namespace neural::cpu
