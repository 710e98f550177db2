// Worker teams: every task runs once, phases are ordered, the caller's floating-point control
// state reaches every worker, unsupported jobs fall back (and are counted, in the team and in the
// model's telemetry), the persistent library's absence is reported clearly.
#include "cpu/team/worker_team.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cpu/persistent/team_abi.h"
#include "cpu/reference_model.h"
#include "cpu/store_moe.h"
#include "cpu/persistent/fp_control.h"
#include "neural/error.h"
#include "platform/shared_library.h"
#include "runtime/model.h"
#include "store/repack.h"
#include "support/fixtures.h"

namespace neural {
namespace {

using cpu::TeamPhase;
using cpu::WorkerTeam;

cpu::TeamOptions persistent_options(int threads) {
    cpu::TeamOptions o;
    o.persistent = true;
    o.threads = threads;
    o.library = NEURAL_KDLL_TEST_PATH;
    return o;
}

std::vector<std::unique_ptr<WorkerTeam>> all_teams(int threads) {
    std::vector<std::unique_ptr<WorkerTeam>> teams;
    teams.push_back(std::make_unique<cpu::ReferenceTeam>(threads));
    teams.push_back(cpu::PersistentTeam::load(persistent_options(threads)));
    return teams;
}

// Busy work long enough that other threads get to claim tasks too.
void spin_for(std::chrono::microseconds d) {
    const auto end = std::chrono::steady_clock::now() + d;
    while (std::chrono::steady_clock::now() < end) {
    }
}

struct CountCtx {
    std::vector<std::atomic<int>>* hits;
    std::vector<int>* first;
    std::vector<int>* second;
    std::atomic<int>* bad_worker;
    int size;
};

TEST(WorkerTeam, EveryTaskRunsOnceAndPhasesAreOrdered) {
    for (int threads : {1, 2, 3, 8}) {
        for (auto& team : all_teams(threads)) {
            EXPECT_EQ(team->size(), threads) << team->name();
            for (int n : {0, 1, 2, 7, 100, 1000}) {
                std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
                std::vector<int> first(static_cast<size_t>(n), 0),
                    second(static_cast<size_t>(n), -1);
                std::atomic<int> bad_worker{0};
                CountCtx ctx{&hits, &first, &second, &bad_worker, threads};
                const TeamPhase phases[2] = {
                    {n,
                     [](void* c, std::int64_t t, std::int32_t w) {
                         auto& x = *static_cast<CountCtx*>(c);
                         (*x.hits)[static_cast<size_t>(t)].fetch_add(1);
                         (*x.first)[static_cast<size_t>(t)] = static_cast<int>(t) * 3 + 1;
                         if (w < 0 || w >= x.size) x.bad_worker->fetch_add(1);
                     },
                     &ctx},
                    {n,
                     [](void* c, std::int64_t t, std::int32_t) {
                         auto& x = *static_cast<CountCtx*>(c);
                         // Reads another task's phase-1 result: visible only after a barrier.
                         const auto n = static_cast<std::int64_t>(x.first->size());
                         (*x.second)[static_cast<size_t>(t)] =
                             (*x.first)[static_cast<size_t>(n - 1 - t)];
                     },
                     &ctx}};
                for (int rep = 0; rep < 5; ++rep) {
                    team->run(phases);
                    for (int t = 0; t < n; ++t) {
                        ASSERT_EQ(second[static_cast<size_t>(t)], (n - 1 - t) * 3 + 1)
                            << team->name() << " threads=" << threads << " n=" << n;
                    }
                }
                for (int t = 0; t < n; ++t) ASSERT_EQ(hits[static_cast<size_t>(t)].load(), 5);
                EXPECT_EQ(bad_worker.load(), 0);
            }
            EXPECT_EQ(team->counters().fallbacks, 0u);
        }
    }
}

// Many short jobs whose phases grow (2 tasks, then 64): a worker that saw the end of a phase
// late must never claim a task of the next phase before the caller opened it. (If the caller
// wrote the next phase's task count before moving the epoch on, a worker holding the exhausted
// claim word of the old epoch would compare it with the new, larger count and claim "task 2" of
// the new phase early: that task would run twice or the caller's count would never match.)
TEST(WorkerTeam, LateWorkersNeverClaimAPhaseBeforeItOpens) {
    cpu::TeamOptions o = persistent_options(3);
    o.spin_us = 0;  // yield at once: more interleavings on a small machine
    o.park_us = -1;
    auto team = cpu::PersistentTeam::load(o);
    struct Ctx {
        std::vector<std::atomic<int>> hits;
    };
    Ctx small{std::vector<std::atomic<int>>(2)}, large{std::vector<std::atomic<int>>(64)};
    auto count = [](void* c, std::int64_t t, std::int32_t) {
        static_cast<Ctx*>(c)->hits[static_cast<size_t>(t)].fetch_add(1);
        spin_for(std::chrono::microseconds(1));  // long enough for the workers to take part
    };
    const TeamPhase phases[2] = {{2, count, &small}, {64, count, &large}};
    constexpr int kJobs = 5000;
    for (int job = 0; job < kJobs; ++job) team->run(phases);
    for (auto& h : small.hits) ASSERT_EQ(h.load(), kJobs);
    for (auto& h : large.hits) ASSERT_EQ(h.load(), kJobs);
}

struct FpCtx {
    std::vector<std::uint32_t>* control;
    std::vector<float>* value;
    std::vector<int>* worker;
};

void fp_task(void* c, std::int64_t t, std::int32_t w) {
    auto& x = *static_cast<FpCtx*>(c);
    spin_for(std::chrono::microseconds(300));
    (*x.control)[static_cast<size_t>(t)] = cpu::read_fp_control();
    // Depends on the rounding mode and on FTZ/DAZ: 1/3 rounds differently up/down, and
    // 1e-30 * 1e-10 is a denormal that FTZ flushes.
    volatile float one = 1.0f, three = 3.0f, tiny = 1e-30f, small = 1e-10f;
    (*x.value)[static_cast<size_t>(t)] = one / three + (tiny * small) * 1e30f;
    (*x.worker)[static_cast<size_t>(t)] = w;
}

TEST(WorkerTeam, CallerFloatingPointControlIsReproducedInWorkers) {
    const std::uint32_t saved = cpu::read_fp_control();
    const std::uint32_t modes[] = {
        saved,
        (saved & ~cpu::kFpRoundingBits) | 0x2000u,  // round down
        (saved & ~cpu::kFpRoundingBits) | 0x4000u,  // round up
        saved | cpu::kFpFlushToZero | cpu::kFpDenormalsAreZero,
    };
    for (auto& team : all_teams(3)) {
        for (std::uint32_t mode : modes) {
            const int n = 48;
            std::vector<std::uint32_t> control(n);
            std::vector<float> value(n);
            std::vector<int> worker(n);
            FpCtx ctx{&control, &value, &worker};
            cpu::write_fp_control(mode);
            volatile float one = 1.0f, three = 3.0f, tiny = 1e-30f, small = 1e-10f;
            const float want = one / three + (tiny * small) * 1e30f;
            team->run(TeamPhase{n, &fp_task, &ctx});
            cpu::write_fp_control(saved);
            bool other_worker = false;
            for (int t = 0; t < n; ++t) {
                EXPECT_EQ(control[static_cast<size_t>(t)], mode & ~cpu::kFpStatusBits)
                    << team->name();
                EXPECT_EQ(value[static_cast<size_t>(t)], want) << team->name() << " mode " << mode;
                other_worker = other_worker || worker[static_cast<size_t>(t)] != 0;
            }
            EXPECT_TRUE(other_worker) << team->name() << ": no task ran on a worker thread";
        }
    }
}

TEST(WorkerTeam, UnsupportedFloatingPointControlFallsBackAndIsCounted) {
    auto team = cpu::PersistentTeam::load(persistent_options(3));
    std::vector<std::atomic<int>> hits(20);
    const TeamPhase phase{
        20,
        [](void* c, std::int64_t t, std::int32_t) {
            (*static_cast<std::vector<std::atomic<int>>*>(c))[static_cast<size_t>(t)]++;
        },
        &hits};
    team->run(phase);
    EXPECT_EQ(team->counters().fallbacks, 0u);
    const std::uint64_t jobs = team->counters().jobs;
    // Unmask the denormal-operand exception (MXCSR bit 8): a worker could trap where the
    // caller cannot catch it, so the persistent team declines. The tasks do integer work only.
    const std::uint32_t saved = cpu::read_fp_control();
    cpu::write_fp_control(saved & ~0x0100u);
    team->run(phase);
    cpu::write_fp_control(saved);
    EXPECT_EQ(team->counters().fallbacks, 1u);
    EXPECT_EQ(team->counters().jobs, jobs);
    for (auto& h : hits) EXPECT_EQ(h.load(), 2);
}

struct NestedCtx {
    WorkerTeam* team;
    std::atomic<int> inner{0};
};

TEST(WorkerTeam, NestedRunFromATaskFallsBack) {
    auto team = cpu::PersistentTeam::load(persistent_options(2));
    NestedCtx ctx{team.get()};
    const TeamPhase outer{4,
                          [](void* c, std::int64_t, std::int32_t) {
                              auto& x = *static_cast<NestedCtx*>(c);
                              const TeamPhase inner{8,
                                                    [](void* c2, std::int64_t, std::int32_t) {
                                                        static_cast<NestedCtx*>(c2)->inner++;
                                                    },
                                                    c};
                              x.team->run(inner);
                          },
                          &ctx};
    team->run(outer);
    EXPECT_EQ(ctx.inner.load(), 32);
    EXPECT_EQ(team->counters().fallbacks, 4u);
    EXPECT_EQ(team->counters().jobs, 1u);
}

TEST(WorkerTeam, ConcurrentCallersAreSerialized) {
    auto team = cpu::PersistentTeam::load(persistent_options(3));
    std::atomic<long> total{0};
    std::vector<std::thread> callers;
    for (int c = 0; c < 4; ++c) {
        callers.emplace_back([&] {
            for (int rep = 0; rep < 200; ++rep) {
                const TeamPhase p{13,
                                  [](void* ctx, std::int64_t t, std::int32_t) {
                                      static_cast<std::atomic<long>*>(ctx)->fetch_add(t + 1);
                                  },
                                  &total};
                team->run(p);
            }
        });
    }
    for (auto& t : callers) t.join();
    EXPECT_EQ(total.load(), 4L * 200 * (13 * 14 / 2));
    EXPECT_EQ(team->counters().jobs, 800u);
    EXPECT_EQ(team->counters().fallbacks, 0u);
}

TEST(WorkerTeam, ParkedWorkersWakeForTheNextJob) {
    cpu::TeamOptions o = persistent_options(3);
    o.spin_us = 0;
    o.park_us = 0;  // park as soon as idle
    auto team = cpu::PersistentTeam::load(o);
    std::atomic<int> n{0};
    for (int rep = 0; rep < 50; ++rep) {
        team->run(TeamPhase{16,
                            [](void* c, std::int64_t, std::int32_t) {
                                static_cast<std::atomic<int>*>(c)->fetch_add(1);
                            },
                            &n});
        if (rep % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    EXPECT_EQ(n.load(), 800);
}

TEST(WorkerTeam, ConfigureRestartsWithANewSize) {
    auto team = cpu::PersistentTeam::load(persistent_options(2));
    EXPECT_EQ(team->size(), 2);
    for (int threads : {5, 1, 3}) {
        team->configure(threads, threads == 3);
        EXPECT_EQ(team->size(), threads);
        std::atomic<int> n{0};
        team->run(TeamPhase{100,
                            [](void* c, std::int64_t, std::int32_t) {
                                static_cast<std::atomic<int>*>(c)->fetch_add(1);
                            },
                            &n});
        EXPECT_EQ(n.load(), 100);
    }
    for (int i = 0; i < 20; ++i) auto t = cpu::PersistentTeam::load(persistent_options(4));
}

TEST(WorkerTeam, MissingLibraryIsAClearErrorOrAFallback) {
    cpu::TeamOptions o = persistent_options(2);
    o.library = "/nonexistent/dir/libneural_cpu_persistent.so";
    try {
        cpu::PersistentTeam::load(o);
        FAIL() << "loaded a missing library";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("/nonexistent/dir/libneural_cpu_persistent.so"), std::string::npos)
            << msg;
        EXPECT_NE(msg.find("not found"), std::string::npos) << msg;
    }
    std::string reason;
    auto team = cpu::make_worker_team(o, &reason);
    EXPECT_STREQ(team->name(), "reference");
    EXPECT_NE(reason.find("not found"), std::string::npos);
    // A file that is not a shared library: the loader's reason is passed on.
    o.library = NEURAL_TEST_SOURCE_FILE;
    EXPECT_THROW(cpu::PersistentTeam::load(o), Error);
    // The real one.
    team = cpu::make_worker_team(persistent_options(2), &reason);
    EXPECT_STREQ(team->name(), "persistent");
    EXPECT_TRUE(reason.empty());
}

TEST(WorkerTeam, LibraryRefusesAnotherAbiVersion) {
    SharedLibrary lib = SharedLibrary::open(NEURAL_KDLL_TEST_PATH);
    auto entry = reinterpret_cast<neural_team_entry_fn>(lib.symbol(NEURAL_TEAM_ENTRY));
    ASSERT_NE(entry, nullptr);
    EXPECT_EQ(entry(NEURAL_TEAM_ABI_VERSION + 1), nullptr);
    const neural_team_vtable* vt = entry(NEURAL_TEAM_ABI_VERSION);
    ASSERT_NE(vt, nullptr);
    EXPECT_EQ(vt->abi_version, NEURAL_TEAM_ABI_VERSION);
    neural_team_config bad{};
    bad.struct_size = sizeof bad;
    bad.threads = 0;
    char err[128] = {};
    EXPECT_EQ(vt->create(&bad, err, sizeof err), nullptr);
    EXPECT_GT(std::string(err).size(), 0u);
}

TEST(WorkerTeam, DefaultThreadsSuitAnEightCoreDesktop) {
    EXPECT_GE(cpu::default_team_threads(), 1);
    EXPECT_LE(cpu::default_team_threads(), 8);
}

TEST(WorkerTeam, StandInForAMissingLibraryCountsEveryJobAsAFallback) {
    cpu::TeamOptions o = persistent_options(2);
    o.library = "/nonexistent/dir/libneural_cpu_persistent.so";
    std::string reason;
    auto team = cpu::make_worker_team(o, &reason);
    ASSERT_STREQ(team->name(), "reference");
    std::atomic<int> ran{0};
    const TeamPhase phase{4,
                          [](void* ctx, std::int64_t, std::int32_t) {
                              static_cast<std::atomic<int>*>(ctx)->fetch_add(1);
                          },
                          &ran};
    for (int i = 0; i < 3; ++i) team->run(phase);
    EXPECT_EQ(ran.load(), 12);
    EXPECT_EQ(team->counters().jobs, 3u);
    EXPECT_EQ(team->counters().fallbacks, 3u);
    // A reference team that was asked for is no fallback.
    cpu::ReferenceTeam plain(2);
    plain.run(phase);
    EXPECT_EQ(plain.counters().fallbacks, 0u);
}

// Fallbacks of the expert kernels' team reach the model's telemetry (MoeCounters), from where
// `neural bench` and the server's /metrics report them.
class TeamFallbackTelemetry : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        tmp_ = new test::TempDir();
        store::RepackOptions o;
        o.checkpoint = test::tiny_model_dir();
        o.out = *tmp_ / "raw.nstore";
        o.threads = 2;
        store::repack(o);
    }
    static void TearDownTestSuite() { delete tmp_; }

    static std::unique_ptr<Model> load(const std::string& kdll) {
        LoadOptions o;
        o.store = *tmp_ / "raw.nstore";
        o.kernel = "scalar";
        o.dense = "reference";  // only the expert kernels' jobs on the team: the counts below
        o.kernel_persistent = true;
        o.kdll = kdll;
        o.threads = 2;
        return Model::load(test::tiny_model_dir(), o);
    }
    // One prefill of a few tokens; returns the telemetry's fallback count it added.
    static std::uint64_t forward(Model& m) {
        const std::uint64_t before = m.telemetry().moe.snapshot().team_fallbacks;
        KvCache cache = m.new_cache();
        const std::vector<TokenId> tokens = {200006, 1428, 200008, 13225, 0};
        m.cpu().forward(tokens, cache);
        return m.telemetry().moe.snapshot().team_fallbacks - before;
    }
    static test::TempDir* tmp_;
};
test::TempDir* TeamFallbackTelemetry::tmp_ = nullptr;

TEST_F(TeamFallbackTelemetry, SupportedJobsAreNotCounted) {
    auto m = load(NEURAL_KDLL_TEST_PATH);
    ASSERT_NE(m->cpu().store_moe(), nullptr);
    const cpu::WorkerTeam& team = m->cpu().store_moe()->team();
    ASSERT_STREQ(team.name(), "persistent");
    EXPECT_EQ(forward(*m), 0u);
    EXPECT_GT(team.counters().jobs, 0u);
    EXPECT_EQ(team.counters().fallbacks, 0u);
}

TEST_F(TeamFallbackTelemetry, UnsupportedFloatingPointStateIsCounted) {
#if !NEURAL_FP_CONTROL_X86
    GTEST_SKIP() << "the unsupported state is an x86 MXCSR value";
#else
    auto m = load(NEURAL_KDLL_TEST_PATH);
    const cpu::WorkerTeam& team = m->cpu().store_moe()->team();
    const std::uint64_t jobs_before = team.counters().jobs;
    // Divide-by-zero unmasked: the persistent team refuses the state (a trap in a worker could
    // not reach the caller), the reference team runs the jobs; nothing here divides by zero.
    const std::uint32_t saved = cpu::read_fp_control();
    cpu::write_fp_control(saved & ~0x0200u);
    const std::uint64_t counted = forward(*m);
    cpu::write_fp_control(saved);
    EXPECT_GT(counted, 0u);
    EXPECT_EQ(counted, team.counters().fallbacks);
    EXPECT_EQ(team.counters().jobs, jobs_before);  // none ran on the persistent team
    EXPECT_EQ(forward(*m), 0u);                    // the caller's state is supported again
#endif
}

TEST_F(TeamFallbackTelemetry, LibraryThatDidNotLoadCountsEveryJob) {
    auto m = load("/nonexistent/dir/neural_cpu_persistent.dll");
    const cpu::WorkerTeam& team = m->cpu().store_moe()->team();
    EXPECT_STREQ(team.name(), "reference");
    const std::uint64_t counted = forward(*m);
    EXPECT_GT(counted, 0u);
    EXPECT_EQ(counted, team.counters().jobs);
    EXPECT_EQ(counted, team.counters().fallbacks);
}

}  // namespace
}  // namespace neural
