// `neural fit`'s planner (runtime/fit.h) on made-up machines, and its GPU memory model against
// what the CUDA backend allocated on the accelerator machine (docs/BENCHMARKS.md: at
// --vram-budget 12 the 120b shape had core 2.96 GiB, K/V 1.13 GiB, 637 slots; 20b 2.28 / 0.75 /
// 723).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

std::uint64_t gib(double g) { return static_cast<std::uint64_t>(g * kGiB); }

// The plan at `context` positions within `budget` (GpuOptions' defaults otherwise; prefill_block
// 0: prompts token by token).
VramPlan plan_at(const ModelConfig& c, std::int64_t context, std::uint64_t budget,
                 int prefill_block = 2048, int kv_ring = -1, int prompt_rows = 0) {
    GpuOptions o;
    o.context = context;
    o.prefill_order = prefill_block > 0 ? "layer" : "token";
    o.prefill_block = prefill_block > 0 ? prefill_block : o.prefill_block;
    o.kv_ring = kv_ring;
    o.prompt_rows = prompt_rows;
    return plan_vram(c, o, budget);
}

std::uint64_t prefill_bytes(const VramPlan& p) {
    return p.bytes(VramUse::prefill_buffers) + p.bytes(VramUse::scratch_slots);
}

TEST(Fit, GpuMemoryModelMatchesWhatTheBackendAllocated) {
    // Whole-context K/V (--kv-ring 0), as the backend allocated before the ring existed.
    // Prompts token by token (no prefill buffers): what the backend allocated before GPU prefill.
    const VramPlan b120 = plan_at(shape("gpt-oss-120b"), 8192, gib(12), 0, 0);
    EXPECT_NEAR(b120.bytes(VramUse::core_weights) / kGiB, 2.96, 0.006);
    EXPECT_NEAR(b120.bytes(VramUse::kv_cache) / kGiB, 1.13, 0.006);
    EXPECT_EQ(prefill_bytes(b120), 0u);
    EXPECT_EQ(b120.pool_slots, 637);
    const VramPlan b20 = plan_at(shape("gpt-oss-20b"), 8192, gib(12), 0, 0);
    EXPECT_NEAR(b20.bytes(VramUse::core_weights) / kGiB, 2.28, 0.006);
    EXPECT_NEAR(b20.bytes(VramUse::kv_cache) / kGiB, 0.75, 0.006);
    EXPECT_EQ(b20.pool_slots, 723);
    // GPU prefill with the defaults (blocks of 2048, 4 scratch slots) at 8192 positions: the
    // prompt's rows, the block scratch and the scratch slots, 0.43 GiB at 120b.
    const VramPlan p120 = plan_at(shape("gpt-oss-120b"), 8192, gib(12), 2048, 0);
    EXPECT_NEAR(prefill_bytes(p120) / kGiB, 0.4285, 0.001);
    EXPECT_EQ(p120.pool_slots, 603);
    // The default K/V ring (auto: 2175 positions in the 18 sliding layers) at 8192 positions.
    const VramPlan r120 = plan_at(shape("gpt-oss-120b"), 8192, gib(12));
    EXPECT_EQ(p120.bytes(VramUse::kv_cache) - r120.bytes(VramUse::kv_cache),
              std::uint64_t{18} * 2 * (8192 - 2175) * 512 * 4);
    EXPECT_EQ(r120.pool_slots, 636);  // 603 without the ring
    EXPECT_EQ(plan_at(shape("gpt-oss-120b"), 16384, gib(12)).pool_slots, 569);
}

// The plan as rows: every allocation named once, 256-byte aligned, in the order the backend
// allocates them; the rows sum to the total, which the budget holds, and what is left beside the
// reserve is less than one slot.
TEST(Fit, VramPlanRowsSumToTheTotalWithinTheBudget) {
    for (const char* name : {"gpt-oss-120b", "gpt-oss-20b"}) {
        SCOPED_TRACE(name);
        const ModelConfig c = shape(name);
        for (const double budget : {6.0, 8.5, 12.0, 24.0}) {
            const VramPlan p = plan_vram(c, GpuOptions{}, gib(budget));
            EXPECT_TRUE(p.shortfall.empty()) << p.shortfall;
            std::uint64_t sum = 0;
            std::vector<std::string> names;
            for (const VramRow& r : p.rows) {
                EXPECT_GT(r.count, 0u) << r.name;
                EXPECT_EQ(r.each % kVramAlign, 0u) << r.name;
                sum += r.bytes();
                names.push_back(r.name);
            }
            std::sort(names.begin(), names.end());
            EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
            EXPECT_EQ(sum, p.total());
            EXPECT_LE(p.total(), gib(budget));
            EXPECT_EQ(p.bytes(VramUse::reserve), kVramReserve);
            if (p.pool_slots < c.num_layers * c.num_experts)
                EXPECT_LT(gib(budget) - p.total(), p.slot_bytes);
            else  // every expert has its slot: the rest stays free
                EXPECT_GT(gib(budget) - p.total(), p.slot_bytes);
            EXPECT_EQ(p.pool_slots, std::min<std::int64_t>(p.slots_for(gib(budget)),
                                                           c.num_layers * c.num_experts));
            ASSERT_NE(p.find("expert slot pool"), nullptr);
            EXPECT_EQ(p.find("expert slot pool")->bytes(),
                      static_cast<std::uint64_t>(p.pool_slots) * p.slot_bytes);
            EXPECT_EQ(p.slot_bytes, expert_slot_bytes(c));
            EXPECT_EQ(p.rows.back().use, VramUse::reserve);
            // Per layer: two norms, the K/V of every layer (K and V).
            EXPECT_EQ(p.find("layer norms")->count, 2u * static_cast<std::uint64_t>(c.num_layers));
            EXPECT_EQ(p.find("K/V cache")->count + p.find("K/V cache (sliding layers)")->count,
                      2u * static_cast<std::uint64_t>(c.num_layers));
        }
    }
}

// More budget never means fewer slots (a fixed context) nor a shorter auto context.
TEST(Fit, VramPlanIsMonotoneInTheBudget) {
    const ModelConfig c = shape("gpt-oss-120b");
    std::int64_t slots = 0, context = 0;
    for (double budget = 4; budget <= 40; budget += 0.25) {
        const VramPlan fixed = plan_at(c, 8192, gib(budget));
        EXPECT_GE(fixed.pool_slots, slots) << budget;
        slots = fixed.pool_slots;
        const VramPlan automatic = plan_vram(c, GpuOptions{}, gib(budget));
        EXPECT_GE(automatic.context, context) << budget;
        context = automatic.context;
    }
    EXPECT_EQ(context, 16384);
    // Never more slots than experts.
    const ModelConfig c20 = shape("gpt-oss-20b");
    EXPECT_EQ(plan_at(c20, 8192, gib(40)).pool_slots, c20.num_layers * c20.num_experts);
}

// The one margin rule: max(0.5 GiB, 5% of the card) stays free when --vram-budget is 0; an
// explicit budget is taken as it is, and more than is free is an error.
TEST(Fit, VramMarginIsTheSaferOfHalfAGibibyteAndFivePercent) {
    EXPECT_EQ(vram_margin(gib(4)), kVramMinMargin);
    EXPECT_EQ(vram_margin(gib(8)), kVramMinMargin);
    EXPECT_EQ(vram_margin(gib(12)), static_cast<std::uint64_t>(0.05 * gib(12)));
    EXPECT_EQ(vram_margin(gib(80)), static_cast<std::uint64_t>(0.05 * gib(80)));
    EXPECT_EQ(vram_margin(0), kVramMinMargin);
    const VramDevice card{"RTX 4070 SUPER", gib(11.4), gib(12)};
    const VramBudget b = vram_budget(GpuOptions{}, card);
    EXPECT_EQ(b.bytes, gib(11.4) - static_cast<std::uint64_t>(0.05 * gib(12)));
    EXPECT_NE(b.line.find("margin"), std::string::npos) << b.line;
    EXPECT_EQ(vram_budget(GpuOptions{}, {"small", gib(0.3), gib(2)}).bytes, 0u);
    GpuOptions o;
    o.vram_budget_gib = 10;
    EXPECT_EQ(vram_budget(o, card).bytes, gib(10));
    o.vram_budget_gib = 11.5;
    EXPECT_NE(test::error_of([&] { vram_budget(o, card); }).find("more than the 11.40 GiB free"),
              std::string::npos);
    // neural fit plans with the same rule.
    FitRequest r;
    r.config = shape("gpt-oss-120b");
    const FitPlan p = plan_fit(r, gaming_pc());
    EXPECT_NEAR(p.vram_budget_gib, 10.8, 0.011);  // in hundredths of a GiB, rounded down
    EXPECT_TRUE(has(p.reasons, "minus a 0.60 GiB margin")) << ::testing::PrintToString(p.reasons);
}

// A budget too small for the rows is a shortfall naming the budget and the first row that does
// not fit (the backend fails with it before allocating anything); options the plan cannot size
// are errors naming the flag.
TEST(Fit, VramPlanNamesWhatDoesNotFit) {
    const ModelConfig c = shape("gpt-oss-120b");
    const VramPlan tiny = plan_vram(c, GpuOptions{}, gib(1));
    EXPECT_NE(tiny.shortfall.find("VRAM budget of 1.00 GiB"), std::string::npos) << tiny.shortfall;
    EXPECT_NE(tiny.shortfall.find("--vram-budget"), std::string::npos);
    EXPECT_EQ(tiny.pool_slots, 0);
    EXPECT_NE(test::error_of([&] { tiny.require_fits(); }).find("VRAM budget"), std::string::npos);
    // An asked-for pool larger than what is left: the pool is the row that does not fit.
    GpuOptions pool;
    pool.context = 8192;
    pool.pool_slots = 2000;
    const VramPlan big = plan_vram(c, pool, gib(12));
    EXPECT_NE(big.shortfall.find("expert slot pool"), std::string::npos) << big.shortfall;
    pool.pool_slots = 100;
    EXPECT_TRUE(plan_vram(c, pool, gib(12)).shortfall.empty());
    EXPECT_EQ(plan_vram(c, pool, gib(12)).pool_slots, 100);
    GpuOptions bad;
    bad.prefill_block = 0;
    EXPECT_NE(test::error_of([&] { plan_vram(c, bad, gib(12)); }).find("--prefill-block"),
              std::string::npos);
    bad = GpuOptions{};
    bad.scratch_slots = 0;
    EXPECT_NE(test::error_of([&] { plan_vram(c, bad, gib(12)); }).find("--scratch"),
              std::string::npos);
    bad = GpuOptions{};
    bad.kv_ring = 100;
    EXPECT_NE(test::error_of([&] { plan_vram(c, bad, gib(12)); }).find("--kv-ring"),
              std::string::npos);
}

// The rows follow the options: no prefill rows token by token, the streamed misses' row only
// where they may stream, the second act rows and grouped GEMM's down rows in the QKV rows at
// gpt-oss's shapes.
TEST(Fit, VramPlanRowsFollowTheOptions) {
    const ModelConfig c = shape("gpt-oss-20b");
    GpuOptions o;
    o.context = 4096;
    const VramPlan layer = plan_vram(c, o, gib(12));
    EXPECT_TRUE(layer.gpu_prefill);
    EXPECT_NE(layer.find("streamed misses"), nullptr);
    EXPECT_EQ(layer.find("prefill second expert activations"), nullptr);  // in the QKV rows
    EXPECT_EQ(layer.find("prefill scratch slots")->bytes(), 4 * layer.slot_bytes);
    o.stream_misses = 0;
    EXPECT_EQ(plan_vram(c, o, gib(12)).find("streamed misses"), nullptr);
    o.stream_misses = -1;
    o.scratch_slots = 1;
    EXPECT_EQ(plan_vram(c, o, gib(12)).find("streamed misses"), nullptr);
    o.scratch_slots = 4;
    o.prefill_order = "token";
    const VramPlan token = plan_vram(c, o, gib(12));
    EXPECT_FALSE(token.gpu_prefill);
    EXPECT_EQ(prefill_bytes(token), 0u);
    EXPECT_EQ(token.find("streamed misses"), nullptr);
    EXPECT_GT(token.pool_slots, layer.pool_slots);
    // A shape whose QKV rows are narrower than the intermediate: its own second act rows.
    ModelConfig narrow = c;
    narrow.intermediate_size = 8192;
    o.prefill_order = "layer";
    EXPECT_NE(plan_vram(narrow, o, gib(40)).find("prefill second expert activations"), nullptr);
    o.expert_streams = 1;
    EXPECT_EQ(plan_vram(narrow, o, gib(40)).find("prefill second expert activations"), nullptr);
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
    const auto budget = gib(12);
    const VramPlan whole = plan_at(c20, 16384, budget, 2048, -1, 16384);
    const VramPlan chunks = plan_at(c20, 16384, budget);
    EXPECT_EQ(chunks.prompt_rows, kPromptChunkRows);
    EXPECT_EQ(prefill_bytes(whole) - prefill_bytes(chunks),
              std::uint64_t{3} * 4 * (16384 - 4096) * 2880);
    std::printf(
        "gpt-oss-20b at 12 GiB, 16,384 positions: %lld slots with whole prompts, %lld "
        "with chunks of 4,096\n",
        static_cast<long long>(whole.pool_slots), static_cast<long long>(chunks.pool_slots));
    EXPECT_EQ(whole.pool_slots, 658);
    EXPECT_EQ(chunks.pool_slots, 691);
    EXPECT_EQ(prefill_bytes(plan_at(c120, 16384, budget)),
              prefill_bytes(plan_at(c120, 16384, budget, 2048, -1, 16384)));
    EXPECT_EQ(prefill_pinned_bytes(c20, 16384, false, 16384) - prefill_pinned_bytes(c20, 16384),
              std::uint64_t{4} * (16384 - 4096) * 2880);
    // auto_context sees the same rows: the 20b keeps 16,384 positions with more slots beside.
    EXPECT_EQ(auto_context(c20, GpuOptions{}, budget).context, 16384);
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
    const VramPlan full = plan_at(c, 16384, gib(12), 2048, 0);
    const VramPlan ring = plan_at(c, 16384, gib(12), 2048, 2176);
    // 18 sliding layers x K and V x (16384 - 2176) positions x 512 floats.
    EXPECT_EQ(full.bytes(VramUse::kv_cache) - ring.bytes(VramUse::kv_cache),
              std::uint64_t{18} * 2 * (16384 - 2176) * 512 * 4);
    EXPECT_EQ(ring.kv_ring, 2176);
    EXPECT_GT(ring.pool_slots, full.pool_slots);
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
    EXPECT_EQ(plan_at(c, 16384, gib(12)).bytes(VramUse::kv_cache),
              plan_at(c, 16384, gib(12), 2048, 2175).bytes(VramUse::kv_cache));
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
    const GpuOptions d;
    ContextChoice cc = auto_context(c, d, gib(10.8));
    EXPECT_EQ(cc.wanted, 16384);
    EXPECT_EQ(cc.context, 16384);
    EXPECT_GE(plan_at(c, 16384, gib(10.8)).pool_slots, cc.min_slots);
    EXPECT_NE(cc.line.find("auto: 16384 fit beside at least"), std::string::npos) << cc.line;
    EXPECT_EQ(plan_vram(c, d, gib(10.8)).context_line, cc.line);
    // A budget where 16,384 leaves too few slots: the largest multiple of 1024 that leaves them.
    const VramPlan at16k = plan_at(c, 16384, gib(10.8));
    const std::uint64_t tight = at16k.fixed_bytes() + kVramReserve +
                                static_cast<std::uint64_t>(cc.min_slots - 1) * at16k.slot_bytes;
    cc = auto_context(c, d, tight);
    EXPECT_LT(cc.context, 16384);
    EXPECT_EQ(cc.context % 1024, 0);
    EXPECT_GE(plan_at(c, cc.context, tight).pool_slots, cc.min_slots);
    EXPECT_LT(plan_at(c, cc.context + 1024, tight).pool_slots, cc.min_slots);
    EXPECT_NE(cc.line.find("would not leave"), std::string::npos) << cc.line;
    EXPECT_EQ(plan_vram(c, d, tight).context, cc.context);
    // Nothing fits: the floor.
    EXPECT_EQ(auto_context(c, d, gib(1)).context, kMinAutoContext);
    // An explicit pool (--pool-slots / --pool): the context leaves exactly that much.
    GpuOptions pool;
    pool.pool_slots = 200;
    const std::uint64_t pool_bytes = 200 * at16k.slot_bytes;
    cc = auto_context(c, pool, at16k.fixed_bytes() + kVramReserve + pool_bytes);
    EXPECT_EQ(cc.context, 16384);
    cc = auto_context(c, pool, at16k.fixed_bytes() + kVramReserve + pool_bytes - 1);
    EXPECT_EQ(cc.context, 15360);
    // A model with a shorter maximum: that maximum.
    ModelConfig shortctx = c;
    shortctx.max_position_embeddings = 4096;
    EXPECT_EQ(auto_context(shortctx, d, gib(10.8)).context, 4096);
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
