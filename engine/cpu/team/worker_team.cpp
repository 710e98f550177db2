#include "cpu/team/worker_team.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

#ifdef NEURAL_HAVE_OPENMP
#include <omp.h>
#endif

#include "cpu/persistent/team_abi.h"
#include "cpu/persistent/fp_control.h"
#include "neural/error.h"
#include "platform/shared_library.h"
#include "platform/thread_affinity.h"

namespace neural::cpu {

int default_team_threads() { return std::max(1, std::min(available_cpus(), 8)); }

// --- reference team (OpenMP) ----------------------------------------------------------------

ReferenceTeam::ReferenceTeam(int threads, bool stands_in_for_persistent)
    : stands_in_(stands_in_for_persistent) {
    threads_ = threads > 0 ? threads : default_team_threads();
#ifndef NEURAL_HAVE_OPENMP
    threads_ = 1;
#endif
}

TeamCounters ReferenceTeam::counters() const {
    TeamCounters c;
    c.jobs = jobs_.load(std::memory_order_relaxed);
    if (stands_in_) c.fallbacks = c.jobs;
    return c;
}

void ReferenceTeam::run(std::span<const TeamPhase> phases) {
    jobs_.fetch_add(1, std::memory_order_relaxed);
    std::int64_t max_tasks = 0;
    for (const TeamPhase& p : phases) max_tasks = std::max(max_tasks, p.n_tasks);
#ifdef NEURAL_HAVE_OPENMP
    if (threads_ > 1 && max_tasks > 1) {
        const std::uint32_t control = read_fp_control();
        const int nt = static_cast<int>(std::min<std::int64_t>(threads_, max_tasks));
        // One region for all phases; the implicit barrier of each `omp for` separates them
        // (and flushes, so a phase sees the previous one's stores).
#pragma omp parallel num_threads(nt)
        {
            const FpControlScope fp(control);
            const auto worker = static_cast<std::int32_t>(omp_get_thread_num());
            for (const TeamPhase& p : phases) {
#pragma omp for schedule(dynamic, 1)
                for (std::int64_t t = 0; t < p.n_tasks; ++t) p.fn(p.ctx, t, worker);
            }
        }
        return;
    }
#endif
    for (const TeamPhase& p : phases) {
        for (std::int64_t t = 0; t < p.n_tasks; ++t) p.fn(p.ctx, t, 0);
    }
}

// --- persistent team (the loaded library) ---------------------------------------------------

struct PersistentTeam::Impl {
    SharedLibrary library;
    const neural_team_vtable* vt = nullptr;
    void* team = nullptr;
    TeamOptions options;
    std::unique_ptr<ReferenceTeam> fallback;  // replaced only by configure()
    std::atomic<std::uint64_t> fallbacks{0};
};

std::string PersistentTeam::library_file_name() {
    return SharedLibrary::file_name("neural_cpu_persistent");
}

std::filesystem::path PersistentTeam::resolve_library(const TeamOptions& options) {
    if (!options.library.empty()) return options.library;
    if (const char* env = std::getenv("NEURAL_KDLL"); env != nullptr && *env != '\0') {
        return std::filesystem::path(env);
    }
    return executable_dir() / library_file_name();
}

namespace {

neural_team_config make_config(int threads, bool pin, const TeamOptions& o) {
    neural_team_config c{};
    c.struct_size = sizeof c;
    c.threads = threads;
    c.pin = pin ? 1 : 0;
    c.spin_us = o.spin_us;
    c.park_us = o.park_us;
    return c;
}

}  // namespace

std::unique_ptr<PersistentTeam> PersistentTeam::load(const TeamOptions& options) {
    const std::filesystem::path path = resolve_library(options);
    const int threads = options.threads > 0 ? options.threads : default_team_threads();
    auto impl = std::make_unique<Impl>();
    impl->options = options;
    impl->options.threads = threads;
    impl->fallback = std::make_unique<ReferenceTeam>(threads);
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
        fail("persistent worker team: {} not found (give its path with --kdll or NEURAL_KDLL)",
             path.string());
    }
    impl->library = SharedLibrary::open(path);
    auto entry = reinterpret_cast<neural_team_entry_fn>(impl->library.symbol(NEURAL_TEAM_ENTRY));
    if (entry == nullptr) {
        fail(
            "persistent worker team: {} does not export {} (not a neural_cpu_persistent library "
            "of this version)",
            path.string(), NEURAL_TEAM_ENTRY);
    }
    const neural_team_vtable* vt = entry(NEURAL_TEAM_ABI_VERSION);
    if (vt == nullptr || vt->abi_version != NEURAL_TEAM_ABI_VERSION ||
        vt->struct_size < sizeof(neural_team_vtable)) {
        fail("persistent worker team: {} does not support team ABI version {}", path.string(),
             NEURAL_TEAM_ABI_VERSION);
    }
    const neural_team_config config = make_config(threads, options.pin, options);
    char error[256] = {};
    void* team = vt->create(&config, error, sizeof error);
    if (team == nullptr) {
        fail("persistent worker team: cannot start {} threads: {}", threads, error);
    }
    impl->vt = vt;
    impl->team = team;
    return std::unique_ptr<PersistentTeam>(new PersistentTeam(std::move(impl)));
}

PersistentTeam::PersistentTeam(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

PersistentTeam::~PersistentTeam() {
    if (impl_ && impl_->team != nullptr) impl_->vt->destroy(impl_->team);
}

int PersistentTeam::size() const { return impl_->vt->size(impl_->team); }

TeamCounters PersistentTeam::counters() const {
    TeamCounters c;
    c.jobs = impl_->vt->jobs(impl_->team);
    c.fallbacks = impl_->fallbacks.load(std::memory_order_relaxed);
    return c;
}

void PersistentTeam::run(std::span<const TeamPhase> phases) {
    static_assert(sizeof(TeamPhase) == sizeof(neural_team_phase));
    neural_team_phase local[8];
    std::vector<neural_team_phase> heap;
    neural_team_phase* p = local;
    if (phases.size() > std::size(local)) {
        heap.resize(phases.size());
        p = heap.data();
    }
    for (size_t i = 0; i < phases.size(); ++i) {
        p[i].n_tasks = phases[i].n_tasks;
        p[i].fn = phases[i].fn;
        p[i].ctx = phases[i].ctx;
    }
    const std::uint32_t control = read_fp_control();
    const int32_t rc =
        impl_->vt->run(impl_->team, p, static_cast<std::int32_t>(phases.size()), control);
    if (rc == NEURAL_TEAM_OK) return;
    impl_->fallbacks.fetch_add(1, std::memory_order_relaxed);
    impl_->fallback->run(phases);
}

void PersistentTeam::configure(int threads, bool pin) {
    if (threads <= 0) threads = default_team_threads();
    const neural_team_config config = make_config(threads, pin, impl_->options);
    char error[256] = {};
    if (impl_->vt->configure(impl_->team, &config, error, sizeof error) != 0) {
        fail("persistent worker team: cannot restart with {} threads: {}", threads, error);
    }
    impl_->options.threads = threads;
    impl_->options.pin = pin;
    impl_->fallback = std::make_unique<ReferenceTeam>(threads);
}

std::unique_ptr<WorkerTeam> make_worker_team(const TeamOptions& options,
                                             std::string* fallback_reason) {
    if (fallback_reason != nullptr) fallback_reason->clear();
    if (options.persistent) {
        try {
            return PersistentTeam::load(options);
        } catch (const Error& e) {
            if (fallback_reason != nullptr) *fallback_reason = e.what();
            return std::make_unique<ReferenceTeam>(options.threads, true);
        }
    }
    return std::make_unique<ReferenceTeam>(options.threads);
}

}  // namespace neural::cpu
