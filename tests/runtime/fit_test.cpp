// `neural fit`'s planner (runtime/fit.h) on made-up machines, and its GPU memory model against
// what the CUDA backend allocated on the accelerator machine (docs/BENCHMARKS.md: at
// --vram-budget 12 the 120b shape had core 2.96 GiB, K/V 1.13 GiB, 637 slots; 20b 2.28 / 0.75 /
// 723).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "runtime/fit.h"
#include "runtime/options.h"
#include "support/fixtures.h"
#include "synth/synth.h"

namespace neural {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

ModelConfig shape(const char* name) {
    synth::Options o;
    o.shape = synth::shape_named(name);
    return ModelConfig::from_json(nlohmann::json::parse(synth::make_plan(o).config_json), name);
}

MachineInfo gaming_pc(double vram_free_gib = 11.4, double ram_gb = 64) {
    MachineInfo m;
    m.ram_total = static_cast<std::uint64_t>(ram_gb * 1e9);
    m.ram_available = m.ram_total / 2;
    m.cpus = 16;
    m.avx512 = m.avx2 = true;
    m.gpu = MachineInfo::Gpu{"RTX 4070 SUPER", static_cast<std::uint64_t>(12 * kGiB),
                             static_cast<std::uint64_t>(vram_free_gib * kGiB)};
    return m;
}

// A plan request for an existing store of the shape's experts.
FitRequest store_request(const char* shape_name, const char* kind, std::uint64_t bytes) {
    FitRequest r;
    r.config = shape(shape_name);
    r.store_kind = kind;
    r.store_bytes = bytes;
    return r;
}

bool has(const std::vector<std::string>& lines, const std::string& text) {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

TEST(Fit, GpuMemoryModelMatchesWhatTheBackendAllocated) {
    // Whole-context K/V (--kv-ring 0), as the backend allocated before the ring existed.
    // Prompts token by token (no prefill buffers): what the backend allocated before GPU prefill.
    const GpuMemoryLayout b120 = gpu_memory_layout(shape("gpt-oss-120b"), 8192, 0, 4, 0);
    EXPECT_NEAR(b120.core_bytes / kGiB, 2.96, 0.006);
    EXPECT_NEAR(b120.kv_bytes / kGiB, 1.13, 0.006);
    EXPECT_EQ(b120.prefill_bytes, 0u);
    EXPECT_EQ(b120.slots_for(static_cast<std::uint64_t>(12 * kGiB)), 637);
    const GpuMemoryLayout b20 = gpu_memory_layout(shape("gpt-oss-20b"), 8192, 0, 4, 0);
    EXPECT_NEAR(b20.core_bytes / kGiB, 2.28, 0.006);
    EXPECT_NEAR(b20.kv_bytes / kGiB, 0.75, 0.006);
    EXPECT_EQ(b20.slots_for(static_cast<std::uint64_t>(12 * kGiB)), 723);
    // GPU prefill with the defaults (blocks of 2048, 4 scratch slots) at 8192 positions: the
    // prompt's rows, the block scratch and the scratch slots, 0.43 GiB at 120b.
    const GpuMemoryLayout p120 = gpu_memory_layout(shape("gpt-oss-120b"), 8192, 2048, 4, 0);
    EXPECT_NEAR(p120.prefill_bytes / kGiB, 0.4285, 0.001);
    EXPECT_EQ(p120.slots_for(static_cast<std::uint64_t>(12 * kGiB)), 603);
    // The default K/V ring (auto: 2175 positions in the 18 sliding layers) at 8192 positions.
    const GpuMemoryLayout r120 = gpu_memory_layout(shape("gpt-oss-120b"), 8192);
    EXPECT_EQ(p120.kv_bytes - r120.kv_bytes, std::uint64_t{18} * 2 * (8192 - 2175) * 512 * 4);
    EXPECT_EQ(r120.slots_for(static_cast<std::uint64_t>(12 * kGiB)), 636);  // 603 without the ring
    EXPECT_EQ(gpu_memory_layout(shape("gpt-oss-120b"), 16384)
                  .slots_for(static_cast<std::uint64_t>(12 * kGiB)),
              569);
}

// --prompt-rows: auto keeps the whole context's prompt rows where they cost at most 2% of the
// experts' bytes (120b), else 4,096 rows (20b), whose VRAM goes to the expert slots.
TEST(Fit, PromptRowsAreTheWholeContextUnlessTheyCostMoreThanTwoPercentOfTheExperts) {
    const ModelConfig c20 = shape("gpt-oss-20b"), c120 = shape("gpt-oss-120b");
    EXPECT_EQ(prompt_rows(c120, 16384), 16384);
    EXPECT_EQ(prompt_rows(c20, 16384), kPromptChunkRows);
    EXPECT_EQ(prompt_rows(c20, 2048), 2048);  // never more than the context
    EXPECT_EQ(prompt_rows(c20, 16384, 100), 100);
    EXPECT_EQ(prompt_rows(c120, 16384, 100), 100);
    EXPECT_EQ(prompt_rows(c20, 50, 100), 50);
    const auto budget = static_cast<std::uint64_t>(12 * kGiB);
    const GpuMemoryLayout whole = gpu_memory_layout(c20, 16384, 2048, 4, -1, 16384);
    const GpuMemoryLayout chunks = gpu_memory_layout(c20, 16384);
    EXPECT_EQ(whole.prefill_bytes - chunks.prefill_bytes,
              std::uint64_t{3} * 4 * (16384 - 4096) * 2880);
    std::printf(
        "gpt-oss-20b at 12 GiB, 16,384 positions: %lld slots with whole prompts, %lld "
        "with chunks of 4,096\n",
        static_cast<long long>(whole.slots_for(budget)),
        static_cast<long long>(chunks.slots_for(budget)));
    EXPECT_EQ(whole.slots_for(budget), 658);
    EXPECT_EQ(chunks.slots_for(budget), 691);
    EXPECT_EQ(gpu_memory_layout(c120, 16384).prefill_bytes,
              gpu_memory_layout(c120, 16384, 2048, 4, -1, 16384).prefill_bytes);
    EXPECT_EQ(prefill_pinned_bytes(c20, 16384, false, 16384) - prefill_pinned_bytes(c20, 16384),
              std::uint64_t{4} * (16384 - 4096) * 2880);
    // auto_context sees the same rows: the 20b keeps 16,384 positions with more slots beside.
    EXPECT_EQ(auto_context(c20, budget).context, 16384);
    // neural fit explains the choice in one line.
    FitRequest r20;
    r20.config = c20;
    const FitPlan p20 = plan_fit(r20, gaming_pc());
    EXPECT_TRUE(has(p20.reasons, "prompt rows 4096: longer prompts run in chunks of 4096 tokens"))
        << ::testing::PrintToString(p20.reasons);
    FitRequest r120;
    r120.config = c120;
    const FitPlan p120 = plan_fit(r120, gaming_pc());
    EXPECT_TRUE(has(p120.reasons, "a prompt of the whole context runs at once"))
        << ::testing::PrintToString(p120.reasons);
}

// --kv-ring: the sliding layers (half of gpt-oss's) keep a ring instead of the whole context.
TEST(Fit, KvRingShrinksTheSlidingLayersKvAndIsChecked) {
    const ModelConfig c = shape("gpt-oss-120b");
    const GpuMemoryLayout full = gpu_memory_layout(c, 16384, 2048, 4, 0);
    const GpuMemoryLayout ring = gpu_memory_layout(c, 16384, 2048, 4, 2176);
    // 18 sliding layers x K and V x (16384 - 2176) positions x 512 floats.
    EXPECT_EQ(full.kv_bytes - ring.kv_bytes, std::uint64_t{18} * 2 * (16384 - 2176) * 512 * 4);
    EXPECT_GT(ring.slots_for(static_cast<std::uint64_t>(12 * kGiB)),
              full.slots_for(static_cast<std::uint64_t>(12 * kGiB)));
    EXPECT_EQ(kv_ring_positions(c, 16384, 2176, 2048), 2176);
    EXPECT_EQ(kv_ring_positions(c, 16384, 0, 2048), 0);
    EXPECT_EQ(kv_ring_positions(c, 2000, 2176, 2048), 0);  // not smaller than the context: no ring
    EXPECT_EQ(kv_ring_positions(c, 16384, 128, 0), 128);   // token by token: the window suffices
    const std::string err = test::error_of([&] { kv_ring_positions(c, 16384, 2000, 2048); });
    EXPECT_NE(err.find("at least 2175"), std::string::npos) << err;
    EXPECT_NE(test::error_of([&] { kv_ring_positions(c, 16384, -2, 2048); }).find("--kv-ring"),
              std::string::npos);
    // auto (the default): the smallest ring, none where it would not be smaller than the context.
    EXPECT_EQ(kv_ring_positions(c, 16384, -1, 2048), 2175);
    EXPECT_EQ(kv_ring_positions(c, 16384, -1, 0), 128);
    EXPECT_EQ(kv_ring_positions(c, 2048, -1, 2048), 0);
    EXPECT_EQ(gpu_memory_layout(c, 16384).kv_bytes,
              gpu_memory_layout(c, 16384, 2048, 4, 2175).kv_bytes);
}

TEST(Fit, TwelveGigabyteCardAndSixtyFourGigabytesRunThe120bHybrid) {
    FitRequest r;
    r.config = shape("gpt-oss-120b");
    const FitPlan p = plan_fit(r, gaming_pc());
    EXPECT_TRUE(p.fits) << (p.warnings.empty() ? "" : p.warnings[0]);
    EXPECT_EQ(p.backend, "cuda");
    EXPECT_NEAR(p.vram_budget_gib, 11.4 - 0.6, 0.011);  // 5% of 12 GiB margin
    EXPECT_GT(p.pool_slots, 400);
    EXPECT_LE(p.pool_gib, p.vram_budget_gib);
    EXPECT_EQ(p.context, 16384);  // auto: 16,384 fits beside enough slots on a 12 GiB card
    EXPECT_TRUE(
        has(p.reasons, "context 16384 positions of K/V on the GPU (auto: 16384 fit beside"));
    EXPECT_EQ(p.threads, 8);
    EXPECT_EQ(p.kernel, "avx512");
    EXPECT_TRUE(p.kernel_persistent);
    EXPECT_LT(p.ram_needed_gb, 64);
    // The pinned prompt buffers count: 40 records (8 staging threads + 32 early) of 13.2 MB and the
    // prompt's rows, about 0.65 GB at 8192 positions.
    const double pinned_gb = static_cast<double>(prefill_pinned_bytes(r.config, 8192)) / 1e9;
    EXPECT_GT(pinned_gb, 0.6);
    EXPECT_LT(pinned_gb, 0.7);
    EXPECT_TRUE(has(p.reasons, "pinned prompt buffers"));
    // --release-resident only with a store the flags can name (the plan has none here).
    EXPECT_FALSE(p.release_resident);
    FitRequest with_store = r;
    with_store.store_kind = "raw";
    const FitPlan ps = plan_fit(with_store, gaming_pc());
    EXPECT_TRUE(ps.release_resident);
    EXPECT_FALSE(ps.store_pinned);  // 61 GB: more than half of 64 GB (--pin-store auto)
    const auto fs = ps.flags();
    EXPECT_NE(std::find(fs.begin(), fs.end(), "--release-resident"), fs.end());
    EXPECT_TRUE(ps.to_json()["release_resident"].get<bool>());
    // 1 GiB of K/V checkpoints fits beside the experts on a 64 GB PC, and is counted.
    EXPECT_EQ(p.kv_checkpoints_gib, 1.0);
    EXPECT_TRUE(has(p.reasons, "K/V checkpoints 1 GiB"));
    const auto pf = p.flags();
    EXPECT_NE(std::find(pf.begin(), pf.end(), "--kv-checkpoints"), pf.end());
    EXPECT_EQ(p.to_json()["kv_checkpoints_gib"].get<double>(), 1.0);
    FitRequest tight = r;  // RAM that only just holds the experts: no checkpoints
    tight.ram_budget_gib = (p.ram_needed_gb - 1.0737) * 1e9 / 1073741824.0 + 0.5;
    const FitPlan pt = plan_fit(tight, gaming_pc());
    EXPECT_TRUE(pt.fits) << (pt.warnings.empty() ? "" : pt.warnings[0]);
    EXPECT_EQ(pt.kv_checkpoints_gib, 0.0);
    EXPECT_TRUE(has(pt.reasons, "no K/V checkpoints"));
    EXPECT_NEAR(pt.ram_needed_gb, p.ram_needed_gb - 1.0737, 0.01);
    const auto f = p.flags();
    EXPECT_NE(std::find(f.begin(), f.end(), "--pool-slots"), f.end());
    EXPECT_GE(p.reasons.size(), 6u);
    const auto j = p.to_json();
    EXPECT_EQ(j["backend"], "cuda");
    EXPECT_EQ(j["pool_slots"], p.pool_slots);
}

TEST(Fit, TooLittleRamSaysHowMuchMoreAndPrefersAPackedStore) {
    FitRequest r;
    r.config = shape("gpt-oss-120b");
    const FitPlan p = plan_fit(r, gaming_pc(11.4, 32));
    EXPECT_FALSE(p.fits);
    EXPECT_EQ(p.store_format, "packed");
    EXPECT_TRUE(has(p.warnings, "GB more RAM")) << p.warnings.size();
    // The same machine with the 20b shape fits.
    r.config = shape("gpt-oss-20b");
    EXPECT_TRUE(plan_fit(r, gaming_pc(11.4, 32)).fits);
}

TEST(Fit, RamBudgetEmulatesASmallerPc) {
    FitRequest r;
    r.config = shape("gpt-oss-120b");
    r.ram_budget_gib = 30;
    MachineInfo big = gaming_pc(11.4, 256);
    const FitPlan small = plan_fit(r, big);
    EXPECT_FALSE(small.fits);
    EXPECT_TRUE(has(small.reasons, "(--ram-budget)"));
    r.ram_budget_gib = 0;
    EXPECT_TRUE(plan_fit(r, big).fits);
}

TEST(Fit, NoGpuPlansTheCpuBackendAndSaysWhy) {
    FitRequest r;
    r.config = shape("gpt-oss-20b");
    MachineInfo m = gaming_pc();
    m.gpu.reset();
    m.gpu_why = "no CUDA device found";
    const FitPlan p = plan_fit(r, m);
    EXPECT_EQ(p.backend, "cpu");
    // The fast path's many short jobs want the spinning team from 4 CPUs on, not on 2.
    EXPECT_EQ(p.kernel_persistent, m.cpus >= options::kPersistentTeamMinCpus);
    MachineInfo two = m;
    two.cpus = 2;
    EXPECT_FALSE(plan_fit(r, two).kernel_persistent);
    EXPECT_TRUE(has(p.reasons, "no CUDA device found"));
    EXPECT_EQ(p.flags()[1], "cpu");
}

TEST(Fit, ACardTooSmallForTheCoreFallsBackToTheCpuWithAWarning) {
    FitRequest r;
    r.config = shape("gpt-oss-120b");
    const FitPlan p = plan_fit(r, gaming_pc(2.0));
    EXPECT_EQ(p.backend, "cpu");
    EXPECT_TRUE(has(p.warnings, "planning for the CPU backend"));
}

TEST(Fit, AVramCapShrinksTheContextBeforeTheSlots) {
    FitRequest r;
    r.config = shape("gpt-oss-120b");
    r.vram_budget_gib = 5.0;
    MachineInfo m = gaming_pc(22, 64);
    m.gpu->total_bytes = static_cast<std::uint64_t>(24 * kGiB);
    const FitPlan p = plan_fit(r, m);
    EXPECT_EQ(p.backend, "cuda");
    EXPECT_DOUBLE_EQ(p.vram_budget_gib, 5.0);
    EXPECT_LT(p.context, 8192);
    EXPECT_TRUE(has(p.warnings, "context reduced"));
    EXPECT_GT(p.pool_slots, 0);
    EXPECT_TRUE(has(p.reasons, "--vram-budget 5.00"));
}

// --pin-store auto pins gpt-oss-20b's raw store (~10 GB) on a 64 GB PC: the whole store stays
// in RAM, so the plan counts the experts in VRAM too and does not plan --release-resident; a
// packed store is never pinned.
TEST(Fit, APinnedStoreStaysInRamWhole) {
    const FitRequest r = store_request("gpt-oss-20b", "raw", 10'154'446'848ull);
    const FitPlan p = plan_fit(r, gaming_pc());
    ASSERT_EQ(p.backend, "cuda");
    EXPECT_TRUE(p.store_pinned);
    EXPECT_FALSE(p.release_resident);
    EXPECT_TRUE(has(p.reasons, "store pinned (--pin-store auto)"));
    EXPECT_TRUE(p.to_json()["store_pinned"].get<bool>());
    const auto f = p.flags();
    EXPECT_EQ(std::find(f.begin(), f.end(), "--release-resident"), f.end());
    // The whole 10.2 GB counts, and the staging rings (40 records of 13.2 MB) do not.
    const double rings_gb = static_cast<double>(prefill_pinned_bytes(r.config, p.context) -
                                                prefill_pinned_bytes(r.config, p.context, true)) /
                            1e9;
    EXPECT_NEAR(rings_gb, 40 * 13.2e6 / 1e9, 0.05);
    const double buffers_gb =
        0.5 + static_cast<double>(prefill_pinned_bytes(r.config, p.context, true)) / 1e9;
    const double checkpoints_gb = p.kv_checkpoints_gib * 1073741824.0 / 1e9;
    EXPECT_NEAR(p.ram_needed_gb, 10.154446848 + buffers_gb + 4.0 + checkpoints_gb, 0.001);
    const FitPlan pp =
        plan_fit(store_request("gpt-oss-20b", "packed", 9'900'000'000ull), gaming_pc());
    EXPECT_FALSE(pp.store_pinned);
    EXPECT_TRUE(pp.release_resident);
    EXPECT_LT(pp.ram_needed_gb, p.ram_needed_gb);
    // A 16 GB PC: 10.2 GB is more than half, not pinned.
    EXPECT_FALSE(plan_fit(r, gaming_pc(11.4, 16)).store_pinned);
}

TEST(Fit, ExistingStoreDecidesTheFormat) {
    const FitPlan p =
        plan_fit(store_request("gpt-oss-20b", "packed", 9'900'000'000ull), gaming_pc());
    EXPECT_EQ(p.store_format, "packed");
    EXPECT_TRUE(has(p.reasons, "existing packed store"));
}

// --context auto (runtime/fit.h auto_context): 16,384 where it leaves enough slots, else the
// largest multiple of 1024 that does, never below 2048; an asked-for pool must fit beside it.
TEST(Fit, AutoContextIs16kWhereItFitsElseTheLargestThatDoes) {
    const ModelConfig c = shape("gpt-oss-120b");
    const auto budget = [](double gib) { return static_cast<std::uint64_t>(gib * kGiB); };
    ContextChoice cc = auto_context(c, budget(10.8));
    EXPECT_EQ(cc.wanted, 16384);
    EXPECT_EQ(cc.context, 16384);
    EXPECT_GE(gpu_memory_layout(c, 16384).slots_for(budget(10.8)), cc.min_slots);
    EXPECT_NE(cc.line.find("auto: 16384 fit beside at least"), std::string::npos) << cc.line;
    // A budget where 16,384 leaves too few slots: the largest multiple of 1024 that leaves them.
    const GpuMemoryLayout at16k = gpu_memory_layout(c, 16384);
    const std::uint64_t tight =
        at16k.fixed_bytes() + static_cast<std::uint64_t>(cc.min_slots - 1) * at16k.slot_bytes;
    cc = auto_context(c, tight);
    EXPECT_LT(cc.context, 16384);
    EXPECT_EQ(cc.context % 1024, 0);
    EXPECT_GE(gpu_memory_layout(c, cc.context).slots_for(tight), cc.min_slots);
    EXPECT_LT(gpu_memory_layout(c, cc.context + 1024).slots_for(tight), cc.min_slots);
    EXPECT_NE(cc.line.find("would not leave"), std::string::npos) << cc.line;
    // Nothing fits: the floor.
    EXPECT_EQ(auto_context(c, budget(1)).context, kMinAutoContext);
    // An explicit pool (--pool-slots / --pool): the context leaves exactly that much.
    const auto pool = static_cast<std::int64_t>(200 * at16k.slot_bytes);
    cc = auto_context(c, at16k.fixed_bytes() + static_cast<std::uint64_t>(pool), 2048, 4, -1, pool);
    EXPECT_EQ(cc.context, 16384);
    cc = auto_context(c, at16k.fixed_bytes() + static_cast<std::uint64_t>(pool) - 1, 2048, 4, -1,
                      pool);
    EXPECT_EQ(cc.context, 15360);
    // A model with a shorter maximum: that maximum.
    ModelConfig shortctx = c;
    shortctx.max_position_embeddings = 4096;
    EXPECT_EQ(auto_context(shortctx, budget(10.8)).context, 4096);
}

// With MachineInfo's bandwidth probes the plan explains the load-time choices: the thread count
// where RAM bandwidth stops growing, pinning, and the share --stream-misses auto will stream.
TEST(Fit, ProbesChooseThreadsAndExplainPinningAndStreaming) {
    MachineInfo m = gaming_pc();
    m.ram_read = {{4, 40}, {8, 60}, {16, 61}};
    m.pinned_h2d_gb_s = 24;
    m.pageable_h2d_gb_s = 10;
    FitRequest r;
    r.config = shape("gpt-oss-20b");
    FitPlan p = plan_fit(r, m);
    EXPECT_EQ(p.threads, 8);
    EXPECT_TRUE(has(p.reasons, "threads 8: RAM read bandwidth stops growing")) << p.reasons[0];
    ASSERT_TRUE(p.store_pinned);
    EXPECT_NEAR(p.stream_share, 24.0 / 84.0, 1e-9);
    EXPECT_TRUE(has(p.reasons,
                    "streams 29% of misses over PCIe: copies 24 GB/s, CPU team 60 GB/s "
                    "(--stream-misses auto)"));
    EXPECT_EQ(p.to_json()["stream_share"].get<double>(), p.stream_share);
    // Threads are flags (--threads 8); pinning and streaming stay auto: no flags for them.
    const auto f = p.flags();
    EXPECT_EQ(std::find(f.begin(), f.end(), "--stream-misses"), f.end());
    EXPECT_EQ(std::find(f.begin(), f.end(), "--pin-store"), f.end());
    // Bandwidth that still grows to all 16 CPUs: 16 threads.
    m.ram_read = {{4, 30}, {8, 55}, {16, 90}};
    EXPECT_EQ(plan_fit(r, m).threads, 16);
    // Pageable copies as fast as pinned: no pinning, so nothing streams.
    m.pageable_h2d_gb_s = 23;
    p = plan_fit(r, m);
    EXPECT_FALSE(p.store_pinned);
    EXPECT_EQ(p.stream_share, 0);
    EXPECT_TRUE(has(p.reasons, "not materially faster"));
    EXPECT_TRUE(has(p.reasons, "misses not streamed: the store is not pinned"));
    // No probes: the 8-thread rule and no share, as before.
    p = plan_fit(r, gaming_pc());
    EXPECT_EQ(p.threads, 8);
    EXPECT_EQ(p.stream_share, 0);
    EXPECT_TRUE(has(p.reasons, "misses not streamed: the copy or RAM bandwidth was not measured"));
}

// `neural fit` never turns a lossy setting on (options::Arithmetic): the plan's flags, on every
// kind of machine it plans for (GPU hybrid with and without a store, too small a card, CPU only,
// a few CPUs, too little RAM), carry no lossy value, and read back as such.
TEST(Fit, PlansNeverTurnALossySettingOn) {
    std::vector<std::pair<FitRequest, MachineInfo>> cases;
    for (const char* name : {"gpt-oss-20b", "gpt-oss-120b"}) {
        FitRequest r;
        r.config = shape(name);
        cases.push_back({r, gaming_pc()});
        cases.push_back({r, gaming_pc(2.0)});
        cases.push_back({r, gaming_pc(11.4, 16)});
        MachineInfo cpu = gaming_pc();
        cpu.gpu.reset();
        cases.push_back({r, cpu});
        cpu.cpus = 2;
        cpu.avx512 = false;
        cases.push_back({r, cpu});
        cases.push_back({store_request(name, "packed", 9'900'000'000ull), gaming_pc()});
        cases.push_back({store_request(name, "raw", 13'000'000'000ull), gaming_pc()});
    }
    for (const auto& [request, machine] : cases) {
        const FitPlan p = plan_fit(request, machine);
        std::vector<std::string> flags = p.flags();
        std::string line;
        for (const std::string& f : flags) line += f + " ";
        const options::Settings settings = options::take_flags(flags);
        EXPECT_TRUE(options::lossy_settings(settings).empty()) << line;
        EXPECT_TRUE(options::lossy_settings(options::to_settings(p.load_options(), true)).empty())
            << line;
    }
}

}  // namespace
}  // namespace neural
