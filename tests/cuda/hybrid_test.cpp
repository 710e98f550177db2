// The hybrid CUDA backend end to end on the tiny fixture: golden logits within bf16 tolerance,
// frozen residency bit-identical across runs and CPU thread counts, adaptive residency admitting
// experts and agreeing with the CPU backend, sequence switching, the chat session, and clear
// errors. Skips with the reason where no GPU is usable.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "bench/bench.h"
#include "cuda/hybrid/vram_plan.h"
#include "cuda/device.h"
#include "neural/error.h"
#include "platform/system_info.h"
#include "runtime/model.h"
#include "runtime/routing_stats.h"
#include "runtime/session.h"
#include "store/ranking.h"
#include "store/repack.h"
#include "support/damaged_store.h"
#include "support/fixtures.h"

namespace neural {
namespace {

using nlohmann::json;

#define SKIP_WITHOUT_GPU()                                                         \
    do {                                                                           \
        std::string why_;                                                          \
        if (cuda::list_devices(&why_).empty()) GTEST_SKIP() << "no GPU: " << why_; \
    } while (0)

// The tiny fixture repacked into a raw expert store at `out`.
void repack_tiny_store(const std::filesystem::path& out) {
    store::RepackOptions ro;
    ro.checkpoint = test::tiny_model_dir();
    ro.out = out;
    store::repack(ro);
}

LoadOptions cuda_options(int pool_slots, int refresh_every = 0) {
    LoadOptions o;
    o.backend = "cuda";
    o.gpu.pool_slots = pool_slots;
    o.gpu.refresh_every = refresh_every;
    o.gpu.context = 512;
    // No learned statistics: they would carry one test's routing into the next test's slots
    // (the tests of runtime/routing_stats.h set a file of their own).
    o.routing_stats = "off";
    return o;
}

std::vector<float> all_logits(Model& m, const std::vector<TokenId>& ids) {
    KvCache cache = m.new_cache();
    ForwardOptions fo;
    fo.all_logits = true;
    return m.forward(ids, cache, fo);
}

// Every position's logits through the decode path: one forward call per token.
std::vector<float> decode_logits(Model& m, const std::vector<TokenId>& ids) {
    KvCache cache = m.new_cache();
    std::vector<float> out;
    for (const TokenId id : ids) {
        const auto l = m.forward(std::span<const TokenId>(&id, 1), cache);
        out.insert(out.end(), l.begin(), l.end());
    }
    return out;
}

using LogitsOf = std::vector<float> (*)(Model&, const std::vector<TokenId>&);

// Golden check of a bf16 core (docs/MODEL.md "What the tests check"): top-8 and probe logits
// within 5e-2, argmax equal where the reference margin exceeds 0.2 (looser bounds for a
// deliberately less exact path).
void expect_golden(Model& m, double tol = 5e-2, double margin = 0.2,
                   LogitsOf logits_of = all_logits) {
    const json golden = test::read_json(test::tiny_model_dir() / "golden.json");
    const auto probes = golden["probe_ids"].get<std::vector<int>>();
    const auto V = static_cast<std::size_t>(m.config().vocab_size);
    double worst = 0;
    for (const auto& [name, ref] : golden["prompts"].items()) {
        SCOPED_TRACE(name);
        const auto ids = ref["ids"].get<std::vector<TokenId>>();
        const auto logits = logits_of(m, ids);
        for (std::size_t t = 0; t < ids.size(); ++t) {
            const float* l = logits.data() + t * V;
            const auto top = ref["top8_ids"][t].get<std::vector<int>>();
            const auto top_l = ref["top8_logits"][t].get<std::vector<double>>();
            for (std::size_t i = 0; i < top.size(); ++i) {
                worst = std::max(worst, std::fabs(l[top[i]] - top_l[i]));
                EXPECT_NEAR(l[top[i]], top_l[i], tol) << "position " << t;
            }
            const auto probe_l = ref["probe_logits"][t].get<std::vector<double>>();
            for (std::size_t i = 0; i < probes.size(); ++i) {
                EXPECT_NEAR(l[probes[i]], probe_l[i], tol) << "probe " << probes[i];
            }
            if (top_l[0] - top_l[1] > margin) {
                const auto argmax = static_cast<int>(std::max_element(l, l + V) - l);
                EXPECT_EQ(argmax, ref["argmax"][t].get<int>()) << "position " << t;
            }
        }
    }
    std::printf("max |logit - golden| over top-8 = %.3g\n", worst);
}

// The argmax after every position of `ids` (all logits from `logits_of`), then 16 greedy tokens
// decoded after the whole prompt.
std::vector<TokenId> choices(Model& m, const std::vector<TokenId>& ids, LogitsOf logits_of) {
    const auto V = static_cast<std::size_t>(m.config().vocab_size);
    const std::vector<float> logits = logits_of(m, ids);
    std::vector<TokenId> out;
    for (std::size_t t = 0; t < ids.size(); ++t) {
        const float* l = logits.data() + t * V;
        out.push_back(static_cast<TokenId>(std::max_element(l, l + V) - l));
    }
    KvCache cache = m.new_cache();
    std::vector<float> last = m.forward(ids, cache);
    for (int k = 0; k < 16; ++k) {
        const TokenId next =
            static_cast<TokenId>(std::max_element(last.begin(), last.end()) - last.begin());
        out.push_back(next);
        last = m.forward(std::span<const TokenId>(&next, 1), cache);
    }
    return out;
}

// The CUDA backend at its defaults (with and without a store) picks the fp32 CPU reference
// path's token at every position, through prompts and token by token, and continues every golden
// prompt with the same 16 greedy tokens (docs/USER_GUIDE.md "What each setting does to the
// answers").
TEST(CudaHybrid, DefaultPathChoosesTheReferenceTokens) {
    SKIP_WITHOUT_GPU();
    LoadOptions ref_options;
    ref_options.kernel = "reference";
    const auto reference = Model::load(test::tiny_model_dir(), ref_options);
    test::TempDir dir;
    repack_tiny_store(dir / "experts.nstore");
    LoadOptions plain;
    plain.backend = "cuda";
    plain.routing_stats = "off";
    LoadOptions with_store = plain;
    with_store.store = dir / "experts.nstore";
    const json golden = test::read_json(test::tiny_model_dir() / "golden.json");
    for (const LoadOptions& o : {plain, with_store}) {
        SCOPED_TRACE(o.store.empty() ? "checkpoint" : "store");
        const auto m = Model::load(test::tiny_model_dir(), o);
        ASSERT_STREQ(m->backend_name(), "cuda");
        for (const auto& [name, ref] : golden["prompts"].items()) {
            SCOPED_TRACE(name);
            const auto ids = ref["ids"].get<std::vector<TokenId>>();
            EXPECT_EQ(choices(*m, ids, all_logits), choices(*reference, ids, all_logits));
            EXPECT_EQ(choices(*m, ids, decode_logits), choices(*reference, ids, decode_logits));
        }
    }
}

TEST(CudaHybrid, GoldenWithHalfTheExpertsResident) {
    SKIP_WITHOUT_GPU();
    auto m = Model::load(test::tiny_model_dir(), cuda_options(16));
    EXPECT_STREQ(m->backend_name(), "cuda");
    expect_golden(*m);
}

TEST(CudaHybrid, GoldenWithNoSlotsAndWithEveryExpertResident) {
    SKIP_WITHOUT_GPU();
    expect_golden(*Model::load(test::tiny_model_dir(), cuda_options(0)));
    expect_golden(*Model::load(test::tiny_model_dir(), cuda_options(1000)));
}

TEST(CudaHybrid, FrozenResidencyIsBitIdenticalAcrossRunsAndThreadCounts) {
    SKIP_WITHOUT_GPU();
    test::TempDir tmp;
    {
        std::ofstream r(tmp / "ranking.json");
        r << R"({"layers": [[5,1,7,0,3,9,2,4],[0,0,1,1,2,2,3,3],[9,8,7,6,5,4,3,2],[1,2,3,4,5,6,7,8]]})";
    }
    const json golden = test::read_json(test::tiny_model_dir() / "golden.json");
    const auto ids = golden["prompts"].begin().value()["ids"].get<std::vector<TokenId>>();
    std::vector<float> first;
    // OpenMP team with 1 and 3 threads, the persistent team with 3: the same bits.
    for (const auto& [threads, persistent] :
         {std::pair{1, false}, std::pair{3, false}, std::pair{3, true}}) {
        SCOPED_TRACE(testing::Message() << threads << " threads, persistent " << persistent);
        LoadOptions o = cuda_options(12, 0);
        o.gpu.ranking = tmp / "ranking.json";
        o.threads = threads;
        o.kernel_persistent = persistent;
        o.kdll = NEURAL_KDLL_TEST_PATH;
        auto m = Model::load(test::tiny_model_dir(), o);
        const auto a = all_logits(*m, ids);
        const auto b = all_logits(*m, ids);
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "two runs differ";
        if (first.empty()) first = a;
        ASSERT_EQ(std::memcmp(first.data(), a.data(), a.size() * 4), 0)
            << "thread count changed bits";
    }
}

// The learned expert statistics fill the static slots as a --ranking of the same weights does:
// with the same statistics file and frozen residency, two loads give the same bits, and the
// same bits as the explicit ranking.
TEST(CudaHybrid, LearnedStatisticsGiveTheSameFrozenResidencyAtEveryLoad) {
    SKIP_WITHOUT_GPU();
    test::TempDir tmp;
    const Ranking weights = {{5, 1, 7, 0, 3, 9, 2, 4},
                             {0, 0, 1, 1, 2, 2, 3, 3},
                             {9, 8, 7, 6, 5, 4, 3, 2},
                             {1, 2, 3, 4, 5, 6, 7, 8}};
    save_ranking(tmp / "ranking.json", weights, 100, "test");
    RoutingStatsData d;
    {
        LoadOptions off;
        off.routing_stats = "off";
        auto cpu = Model::load(test::tiny_model_dir(), off);
        d.model = routing_model_id(cpu->checkpoint(), cpu->config());
    }
    d.layers = weights;
    d.tokens = 100;
    d.updated = 1796154191;
    const json golden = test::read_json(test::tiny_model_dir() / "golden.json");
    const auto ids = golden["prompts"].begin().value()["ids"].get<std::vector<TokenId>>();
    auto run = [&](bool learned) {
        // The file as it was (a load learns and saves at unload).
        save_routing_stats(tmp / "stats.json", d);
        LoadOptions o = cuda_options(12, 0);
        o.routing_stats = (tmp / "stats.json").string();
        if (!learned) {
            o.gpu.ranking = tmp / "ranking.json";
            o.routing_stats = "off";
        }
        auto m = Model::load(test::tiny_model_dir(), o);
        EXPECT_EQ(m->learned_ranking(), learned ? weights : Ranking{});
        return all_logits(*m, ids);
    };
    const auto a = run(true), b = run(true), ranked = run(false);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "two loads differ";
    ASSERT_EQ(std::memcmp(a.data(), ranked.data(), a.size() * 4), 0)
        << "the learned statistics placed other experts than the same ranking";
}

TEST(CudaHybrid, AdaptiveResidencyAdmitsExpertsAndAgreesWithTheCpuBackend) {
    SKIP_WITHOUT_GPU();
    test::TempDir tmp;
    repack_tiny_store(tmp / "tiny.nstore");
    for (const char* kind : {"raw store", "checkpoint"}) {
        SCOPED_TRACE(kind);
        LoadOptions o = cuda_options(10, 1);
        o.gpu.static_fraction = 0.2;
        if (std::string(kind) == "raw store") o.store = tmp / "tiny.nstore";
        auto gpu = Model::load(test::tiny_model_dir(), o);
        auto cpu = Model::load(test::tiny_model_dir());
        KvCache gc = gpu->new_cache(), cc = cpu->new_cache();
        std::vector<TokenId> prompt = {200006, 17360, 200008, 1};
        auto gl = gpu->forward(prompt, gc);
        auto cl = cpu->forward(prompt, cc);
        const auto V = static_cast<std::size_t>(cpu->config().vocab_size);
        for (int step = 0; step < 24; ++step) {
            for (std::size_t i = 0; i < V; i += 97)
                ASSERT_NEAR(gl[i], cl[i], 5e-2) << "step " << step;
            const TokenId next =
                static_cast<TokenId>(std::max_element(cl.begin(), cl.end()) - cl.begin());
            gl = gpu->forward(std::span<const TokenId>(&next, 1), gc);
            cl = cpu->forward(std::span<const TokenId>(&next, 1), cc);
        }
        EXPECT_GT(gpu->backend_counters().admissions.load(), 0u) << "no expert was admitted";
        EXPECT_GT(gpu->backend_counters().experts_hit.load(), 0u);
    }
}

TEST(CudaHybrid, SwitchingSequencesNeverUsesForeignKv) {
    SKIP_WITHOUT_GPU();
    // K/V is reused only for positions whose tokens match (kept in place, or from a checkpoint);
    // b's K/V must never serve a. Position 5's logits are compared with a from-scratch run; a
    // reused position may have been computed by the token path instead of prefill (or the other
    // way round), so the comparison allows their difference (2.3e-4 measured), not foreign K/V's.
    for (const double gib : {1.0, 0.0}) {
        SCOPED_TRACE(testing::Message() << "checkpoints " << gib << " GiB");
        LoadOptions o = cuda_options(16);
        o.gpu.kv_checkpoint_gib = gib;
        auto m = Model::load(test::tiny_model_dir(), o);
        const std::vector<TokenId> a = {200006, 17360, 200008, 1, 2, 3}, b = {5, 6, 7, 8};
        const auto want = all_logits(*m, a);
        const auto V = static_cast<std::size_t>(m->config().vocab_size);
        const auto expect_row5 = [&](const std::vector<float>& got) {
            for (std::size_t i = 0; i < V; ++i) ASSERT_NEAR(got[i], want[5 * V + i], 1e-3) << i;
        };
        KvCache ca = m->new_cache(), cb = m->new_cache();
        m->forward(std::span<const TokenId>(a.data(), 3), ca);
        m->forward(b, cb);  // the GPU now holds b's K/V
        expect_row5(m->forward(std::span<const TokenId>(a.data() + 3, 3), ca));
        // Truncation (edit / regenerate) re-uses the prefix that is still valid.
        ca.truncate(4);
        expect_row5(m->forward(std::span<const TokenId>(a.data() + 4, 2), ca));
        // A different continuation after truncation is computed, not taken from the old one.
        ca.truncate(4);
        const std::vector<TokenId> other = {9, 9};
        const auto diverged = m->forward(other, ca);
        std::vector<TokenId> a2(a.begin(), a.begin() + 4);
        a2.insert(a2.end(), other.begin(), other.end());
        const auto want2 = all_logits(*m, a2);
        for (std::size_t i = 0; i < V; ++i) ASSERT_NEAR(diverged[i], want2[5 * V + i], 1e-3) << i;
    }
}

TEST(CudaHybrid, ChatSessionRunsAndRecordsGpuTelemetry) {
    SKIP_WITHOUT_GPU();
    auto m = Model::load(test::tiny_model_dir(), cuda_options(16, 2));
    ChatSession s(*m);
    s.add_user("Hello there");
    TurnOptions t;
    t.max_tokens = 12;
    t.sampling.temperature = 0;
    const TurnResult r = s.respond(t);
    EXPECT_GT(r.stats.generated_tokens, 0);
    const auto tokens = m->telemetry().tokens().since(0);
    ASSERT_FALSE(tokens.empty());
    std::uint64_t hits = 0, waits = 0;
    for (const auto& rec : tokens) {
        hits += rec.experts_hit;
        waits += rec.gpu_wait_ns;
    }
    EXPECT_GT(hits, 0u);
    EXPECT_GT(waits, 0u);
}

TEST(CudaHybrid, ClearErrorsForBudgetAndContext) {
    SKIP_WITHOUT_GPU();
    LoadOptions tiny_budget = cuda_options(0);
    tiny_budget.gpu.vram_budget_gib = 0.01;
    EXPECT_NE(test::error_of([&] {
                  Model::load(test::tiny_model_dir(), tiny_budget);
              }).find("VRAM budget"),
              std::string::npos);
    LoadOptions short_ctx = cuda_options(4);
    short_ctx.gpu.context = 8;
    auto m = Model::load(test::tiny_model_dir(), short_ctx);
    KvCache c = m->new_cache();
    const std::vector<TokenId> ids(9, 1);
    EXPECT_NE(test::error_of([&] { m->forward(ids, c); }).find("--context"), std::string::npos);
    EXPECT_EQ(c.size(), 0);
}

// The backend allocates exactly its VRAM plan (cuda/hybrid/vram_plan.h): every row as often and
// as large as planned, byte for byte, nothing else, for budgets, contexts and option sets that
// change the rows (auto context and pool, an asked-for pool, token-by-token prompts, block-major
// prefill with two scratch slots, grouped GEMM, one expert stream, no K/V ring, no streaming).
TEST(CudaHybrid, AllocationsAreTheVramPlanByteForByte) {
    SKIP_WITHOUT_GPU();
    struct Case {
        double budget_gib;
        std::int64_t context;
        int pool_slots;
        const char* order;
        int scratch = 4;
        bool grouped = false;
        int streams = 2;
        int ring = -1;
        int stream_misses = -1;
    };
    const std::vector<Case> cases = {
        {1.0, 512, -1, "layer"},
        {0.75, 0, -1, "layer"},
        {1.5, 300, 4, "token"},
        {1.0, 2048, -1, "block", 2, true, 1, 0, 0},
        {0.5, 1024, 8, "layer", 1, false, 2, -1, 1},
    };
    for (const Case& k : cases) {
        SCOPED_TRACE(fmt::format("budget {} GiB, context {}, pool {}, {}", k.budget_gib, k.context,
                                 k.pool_slots, k.order));
        LoadOptions o = cuda_options(k.pool_slots);
        o.gpu.vram_budget_gib = k.budget_gib;
        o.gpu.context = k.context;
        o.gpu.prefill_order = k.order;
        o.gpu.scratch_slots = k.scratch;
        o.gpu.grouped_gemm = k.grouped;
        o.gpu.expert_streams = k.streams;
        o.gpu.kv_ring = k.ring;
        o.gpu.stream_misses = k.stream_misses;
        auto m = Model::load(test::tiny_model_dir(), o);
        const auto budget = static_cast<std::uint64_t>(k.budget_gib * 1024.0 * 1024.0 * 1024.0);
        const VramPlan plan = plan_vram(m->config(), o.gpu, budget);
        ASSERT_TRUE(plan.shortfall.empty()) << plan.shortfall;
        std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> planned, made;
        for (const VramRow& r : plan.rows) {
            if (r.allocated()) planned[r.name] = {r.count, r.bytes()};
        }
        std::uint64_t total = 0;
        for (const DeviceAllocation& a : m->device_allocations()) {
            made[a.name] = {a.count, a.bytes};
            total += a.bytes;
        }
        EXPECT_EQ(made, planned);
        EXPECT_EQ(total, plan.allocated());
        EXPECT_LE(plan.total(), budget);
        EXPECT_EQ(m->context_length(), plan.context);
        EXPECT_NE(m->describe_backend().find(fmt::format("{} expert slots", plan.pool_slots)),
                  std::string::npos)
            << m->describe_backend();
        if (k.pool_slots >= 0) {
            EXPECT_EQ(plan.pool_slots, k.pool_slots);
        }
        // And the model still computes: one prompt through the allocated buffers.
        KvCache cache = m->new_cache();
        const std::vector<TokenId> ids = {1, 2, 3, 4, 5, 6, 7, 8};
        EXPECT_EQ(m->forward(ids, cache).size(), static_cast<std::size_t>(m->config().vocab_size));
    }
}

// ---- prefill (whole prompts on the GPU) -------------------------------------------------

// A ~50-token prompt: the golden prompts one after another.
std::vector<TokenId> long_prompt() {
    const json golden = test::read_json(test::tiny_model_dir() / "golden.json");
    std::vector<TokenId> ids;
    for (const auto& [name, ref] : golden["prompts"].items()) {
        for (TokenId t : ref["ids"].get<std::vector<TokenId>>()) ids.push_back(t);
    }
    while (ids.size() < 50) ids.push_back(static_cast<TokenId>(1000 + ids.size()));
    return ids;
}

LoadOptions prefill_options(int pool_slots, const std::string& order, int block, int cpu_tokens) {
    LoadOptions o = cuda_options(pool_slots, 0);
    o.gpu.prefill_order = order;
    o.gpu.prefill_block = block;
    o.gpu.prefill_cpu_tokens = cpu_tokens;
    return o;
}

TEST(CudaHybrid, PrefillMatchesTheTokenByTokenPathAtEveryPosition) {
    SKIP_WITHOUT_GPU();
    const auto ids = long_prompt();
    auto tok = Model::load(test::tiny_model_dir(), prefill_options(1000, "token", 2048, 0));
    auto pre = Model::load(test::tiny_model_dir(), prefill_options(1000, "layer", 2048, 0));
    const auto a = all_logits(*tok, ids), b = all_logits(*pre, ids);
    const auto V = static_cast<std::size_t>(tok->config().vocab_size);
    double worst = 0;
    std::size_t worst_at = 0;
    for (std::size_t t = 0; t < ids.size(); ++t) {
        double d = 0;
        for (std::size_t i = 0; i < V; ++i)
            d = std::max(d, static_cast<double>(std::fabs(a[t * V + i] - b[t * V + i])));
        std::printf("position %zu: max |prefill - token| = %.3g\n", t, d);
        if (d > worst) worst = d, worst_at = t;
    }
    EXPECT_LT(worst, 5e-2) << "at position " << worst_at;
}

TEST(CudaHybrid, GoldenTokenByTokenReferencePath) {
    SKIP_WITHOUT_GPU();
    expect_golden(*Model::load(test::tiny_model_dir(), prefill_options(16, "token", 2048, 16)));
}

// --fused-decode 1 (the default: 4 launches before a layer's routing, cuda/decode_fused.h)
// against the reference graphs of one kernel per step (--fused-decode 0), through the decode path
// token by token, with the whole context and with a 31-position K/V ring on the sliding layers:
// both golden within the usual tolerance, the two close (the fused kernels use the one-step
// kernels' device functions, so the same bits are expected: printed), two runs of the fused
// graphs the same bits (their counters are back at zero after every launch).
TEST(CudaHybrid, FusedDecodeGraphsMatchTheOneKernelPerStepGraphs) {
    SKIP_WITHOUT_GPU();
    const auto ids = long_prompt();
    for (const int kv_ring : {0, 31}) {
        SCOPED_TRACE(testing::Message() << "kv_ring " << kv_ring);
        LoadOptions o = cuda_options(16);
        o.gpu.prefill_block = 16;  // a ring of 31 = window 16 + block 16 - 1
        o.gpu.kv_ring = kv_ring;
        o.gpu.fused_decode = false;
        auto ref = Model::load(test::tiny_model_dir(), o);
        o.gpu.fused_decode = true;
        auto fused = Model::load(test::tiny_model_dir(), o);
        expect_golden(*ref, 5e-2, 0.2, decode_logits);
        expect_golden(*fused, 5e-2, 0.2, decode_logits);
        const auto a = decode_logits(*fused, ids), b = decode_logits(*ref, ids);
        ASSERT_EQ(a.size(), b.size());
        double worst = 0;
        for (std::size_t i = 0; i < a.size(); ++i)
            worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
        std::printf(
            "fused vs one kernel per step: %s, max |difference| %.3g\n",
            std::memcmp(a.data(), b.data(), a.size() * 4) == 0 ? "the same bits" : "different bits",
            worst);
        EXPECT_LT(worst, 2e-2);
        const auto c = decode_logits(*fused, ids);
        ASSERT_EQ(std::memcmp(a.data(), c.data(), a.size() * 4), 0) << "two runs differ";
    }
}

TEST(CudaHybrid, GoldenWithBlockMajorPrefillAndTheCpuPath) {
    SKIP_WITHOUT_GPU();
    // Blocks of 3 tokens: every expert has few tokens per block, so non-resident ones run on the
    // CPU's multi-token kernel.
    auto m = Model::load(test::tiny_model_dir(), prefill_options(16, "block", 3, 16));
    expect_golden(*m);
    EXPECT_GT(m->backend_counters().prefill_cpu_groups.load(), 0u);
}

// Every prompt expert on the GPU (no CPU path): bf16 hi + lo halves (the default) within the
// golden 5e-2; fp16 operands (--prefill-fp16 1) measured 1.02 off on the fixture (its rounding
// tips near-tied router choices in the random tiny model, docs/CUDA.md "Numerics"): checked
// within 1.5, with the argmax where the reference margin exceeds 1.5. The fp16 kernels' own
// exactness is CudaPrefillKernels.ExpertGemmMatches* (against fp16-rounded operands, 1e-3).
TEST(CudaHybrid, GoldenWithHiLoAndWithFp16PromptExperts) {
    SKIP_WITHOUT_GPU();
    for (const bool fp16 : {false, true}) {
        SCOPED_TRACE(fp16 ? "fp16" : "bf16 hi + lo");
        LoadOptions o = prefill_options(16, "layer", 2048, 0);
        o.gpu.prefill_fp16 = fp16;
        auto m = Model::load(test::tiny_model_dir(), o);
        EXPECT_NE(m->describe_backend().find(fp16 ? "fp16 experts" : "bf16 hi + lo experts"),
                  std::string::npos)
            << m->describe_backend();
        if (fp16) {
            expect_golden(*m, 1.5, 1.5);
        } else {
            expect_golden(*m);
        }
        EXPECT_GT(m->backend_counters().prefill_staged.load() +
                      m->backend_counters().prefill_resident.load(),
                  0u);
        EXPECT_EQ(m->backend_counters().prefill_cpu_groups.load(), 0u);
    }
}

TEST(CudaHybrid, PrefillOrdersBlocksStagingAndResidencyAreBitIdentical) {
    SKIP_WITHOUT_GPU();
    const auto ids = long_prompt();
    std::vector<float> first;
    struct Case {
        const char* name;
        int pool;
        const char* order;
        int block;
        int scratch;
        int streams = 2;
        int rows = 0;  // --prompt-rows: chunks of that many positions (0: the whole prompt)
    };
    // Frozen residency, CPU path off (it would take different groups in different orders). One
    // expert stream (each expert's two launches one after the other) against two (gate_ups beside
    // the previous downs, alternating act rows), with experts of more rows than a block (4 blocks
    // of 16: up to 4 launches per expert) and staged through 1 or 3 scratch slots.
    const Case cases[] = {
        {"layer-major, 4 blocks, half resident", 16, "layer", 16, 4},
        {"layer-major, 4 blocks, half resident, one expert stream", 16, "layer", 16, 4, 1},
        {"block-major, 4 blocks, half resident", 16, "block", 16, 4},
        {"layer-major, 1 block, half resident", 16, "layer", 2048, 4},
        {"block-major, 7 blocks, all staged, 1 scratch slot", 0, "block", 8, 1},
        {"block-major, 7 blocks, all staged, 1 scratch slot, one stream", 0, "block", 8, 1, 1},
        {"layer-major, all staged, 3 scratch slots", 0, "layer", 2048, 3},
        {"layer-major, all staged, 3 scratch slots, one stream", 0, "layer", 2048, 3, 1},
        {"layer-major, all resident", 1000, "layer", 2048, 4},
        {"layer-major, chunks of 16 rows of 2 blocks, half resident", 16, "layer", 8, 4, 2, 16},
        {"layer-major, chunks of 13 rows (a block cut at each chunk's end)", 16, "layer", 2048, 4,
         2, 13},
        {"block-major, chunks of 24 rows, all staged, 1 scratch slot", 0, "block", 8, 1, 2, 24}};
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        LoadOptions o = prefill_options(c.pool, c.order, c.block, 0);
        o.gpu.scratch_slots = c.scratch;
        o.gpu.expert_streams = c.streams;
        o.gpu.prompt_rows = c.rows;
        auto m = Model::load(test::tiny_model_dir(), o);
        const auto got = all_logits(*m, ids);
        const auto& bc = m->backend_counters();
        EXPECT_EQ(bc.prefill_tokens.load(), ids.size());
        EXPECT_EQ(bc.prefill_chunks.load(),
                  c.rows > 0 ? (ids.size() + static_cast<std::size_t>(c.rows) - 1) /
                                   static_cast<std::size_t>(c.rows)
                             : 1u);
        if (c.pool == 0) {
            EXPECT_GT(bc.prefill_staged.load(), 0u);
        }
        if (c.pool == 1000) {
            EXPECT_EQ(bc.prefill_staged.load(), 0u);
        }
        EXPECT_EQ(bc.prefill_cpu_groups.load(), 0u);
        if (first.empty()) first = got;
        ASSERT_EQ(got.size(), first.size());
        ASSERT_EQ(std::memcmp(got.data(), first.data(), got.size() * 4), 0);
    }
}

// Grouped GEMM (--grouped-gemm): a one-block prompt of 1,100 tokens gives the same bits with and
// without it: half resident (groups cut by the staged experts between them, 4 or 1 scratch
// slots), all resident, and all staged (staged experts are never grouped: no group at all); it
// groups only within its guard (a 600-token prompt launches no group).
TEST(CudaHybrid, GroupedGemmIsBitIdenticalAndOnlyForOneBlockOf1024To4096Tokens) {
    SKIP_WITHOUT_GPU();
    std::vector<TokenId> ids;
    const auto base = long_prompt();
    while (ids.size() < 1100)
        ids.push_back(base[ids.size() % base.size()] +
                      static_cast<TokenId>(ids.size() / base.size()));
    const std::vector<TokenId> short_ids(ids.begin(), ids.begin() + 600);
    struct Case {
        int pool, scratch;
    };
    for (const Case c : {Case{16, 4}, Case{16, 1}, Case{1000, 4}, Case{0, 3}}) {
        SCOPED_TRACE(testing::Message() << c.pool << " slots, " << c.scratch << " scratch slots");
        LoadOptions o = prefill_options(c.pool, "layer", 2048, 0);
        o.gpu.context = 2048;
        o.gpu.scratch_slots = c.scratch;
        auto plain = Model::load(test::tiny_model_dir(), o);
        o.gpu.grouped_gemm = true;
        auto grouped = Model::load(test::tiny_model_dir(), o);
        EXPECT_NE(grouped->describe_backend().find("grouped GEMM"), std::string::npos);
        // The last row's logits (every row's K/V feeds it; all rows would be 0.9 GB).
        const auto last = [](Model& m, const std::vector<TokenId>& t) {
            KvCache cache = m.new_cache();
            return m.forward(t, cache);
        };
        const auto want = last(*plain, ids);
        const auto got = last(*grouped, ids);
        ASSERT_EQ(got.size(), want.size());
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
        const auto& bc = grouped->backend_counters();
        if (c.pool > 0) {
            EXPECT_GT(bc.prefill_grouped.load(), 0u);
        } else {
            EXPECT_EQ(bc.prefill_grouped.load(), 0u);
        }
        EXPECT_EQ(plain->backend_counters().prefill_grouped.load(), 0u);
        if (c.pool == 0) {
            EXPECT_GT(bc.prefill_staged.load(), 0u);
        }
        const auto groups = bc.prefill_grouped.load();
        const auto short_want = last(*plain, short_ids);
        const auto short_got = last(*grouped, short_ids);
        ASSERT_EQ(std::memcmp(short_got.data(), short_want.data(), short_got.size() * 4), 0);
        EXPECT_EQ(bc.prefill_grouped.load(), groups) << "a 600-token prompt is outside the guard";
    }
}

// Early staging (--prefill-early) changes when records are copied, not what is computed: the
// same bits as without it for any number of early buffers (layer-major, blocks of 16, nothing
// resident, CPU path off); the first block's routing does stage records early, never more than
// were staged in all.
TEST(CudaHybrid, EarlyStagingFromTheFirstBlockIsBitIdentical) {
    SKIP_WITHOUT_GPU();
    const auto ids = long_prompt();
    std::vector<float> first;
    for (int early : {0, 1, 3, 64}) {
        SCOPED_TRACE(testing::Message() << "--prefill-early " << early);
        LoadOptions o = prefill_options(0, "layer", 16, 0);
        o.gpu.prefill_early = early;
        o.gpu.scratch_slots = 2;
        auto m = Model::load(test::tiny_model_dir(), o);
        const auto got = all_logits(*m, ids);
        const auto& bc = m->backend_counters();
        if (early == 0) {
            EXPECT_EQ(bc.prefill_early.load(), 0u);
        } else {
            EXPECT_GT(bc.prefill_early.load(), 0u);
            // at most `early` per layer
            EXPECT_LE(bc.prefill_early.load(),
                      static_cast<std::uint64_t>(early) *
                          static_cast<std::uint64_t>(m->config().num_layers));
        }
        EXPECT_LE(bc.prefill_early.load(), bc.prefill_staged.load());
        if (first.empty()) first = got;
        ASSERT_EQ(got.size(), first.size());
        ASSERT_EQ(std::memcmp(got.data(), first.data(), got.size() * 4), 0);
    }
    // One block: nothing to overlap, nothing early.
    LoadOptions one = prefill_options(0, "layer", 2048, 0);
    one.gpu.prefill_early = 64;
    auto m = Model::load(test::tiny_model_dir(), one);
    (void)all_logits(*m, ids);
    EXPECT_EQ(m->backend_counters().prefill_early.load(), 0u);
    EXPECT_GT(m->backend_counters().prefill_staged.load(), 0u);
}

// --pin-store: with the raw store's mapping registered with CUDA, staged experts are copied
// straight from it (no staging threads, nothing staged early) with the same bits as through the
// staging rings: layer-major over blocks of 16 (where the rings stage early), block-major, and
// one block; half the experts resident (frozen: static slots), CPU path off. The pinned backend
// says so, and --release-resident then gives nothing back (the static slots' records stay).
TEST(CudaHybrid, PinnedStoreStagesFromTheMappingWithTheSameBits) {
    SKIP_WITHOUT_GPU();
    test::TempDir tmp;
    repack_tiny_store(tmp / "tiny.nstore");
    const auto ids = long_prompt();
    struct Case {
        const char* order;
        int block;
    };
    for (const Case c : {Case{"layer", 16}, Case{"block", 16}, Case{"layer", 2048}}) {
        SCOPED_TRACE(testing::Message() << c.order << "-major, blocks of " << c.block);
        LoadOptions o = prefill_options(16, c.order, c.block, 0);
        o.store = tmp / "tiny.nstore";
        o.release_resident = true;
        o.gpu.scratch_slots = 2;
        o.gpu.pin_store = "0";
        auto staged = Model::load(test::tiny_model_dir(), o);
        o.gpu.pin_store = "1";
        auto pinned = Model::load(test::tiny_model_dir(), o);
        EXPECT_FALSE(staged->store_pin().pinned);
        EXPECT_NE(staged->describe_backend().find("store not pinned: --pin-store 0"),
                  std::string::npos)
            << staged->describe_backend();
        ASSERT_TRUE(pinned->store_pin().pinned) << pinned->describe_backend();
        EXPECT_GE(pinned->store_pin().seconds, 0.0);
        EXPECT_NE(pinned->describe_backend().find("store pinned ("), std::string::npos)
            << pinned->describe_backend();
        EXPECT_TRUE(pinned->store()->pinned());
        EXPECT_GT(staged->telemetry().ram.released_records.load(), 0u);
        EXPECT_EQ(pinned->telemetry().ram.released_records.load(), 0u);

        const auto want = all_logits(*staged, ids);
        const auto got = all_logits(*pinned, ids);
        ASSERT_EQ(got.size(), want.size());
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
        const auto& sb = staged->backend_counters();
        const auto& pb = pinned->backend_counters();
        EXPECT_GT(pb.prefill_staged.load(), 0u);
        EXPECT_EQ(pb.prefill_staged.load(), sb.prefill_staged.load());
        EXPECT_EQ(pb.prefill_early.load(), 0u);
        EXPECT_EQ(pb.prefill_staging_ns.load(), 0u);
        if (std::string(c.order) == "layer" && c.block == 16) {
            EXPECT_GT(sb.prefill_early.load(), 0u);
        }
    }
    // auto pins the tiny store (far below half of any machine's RAM) unless the RAM is unknown.
    LoadOptions a = prefill_options(16, "layer", 16, 0);
    a.store = tmp / "tiny.nstore";
    auto m = Model::load(test::tiny_model_dir(), a);
    EXPECT_EQ(m->store_pin().pinned, system_memory().total_bytes > 0) << m->describe_backend();
}

// --stream-misses 1 with a pinned store: half of each decode layer's misses (whole experts, and
// the last neurons of one for an odd count: --split-misses) are copied to the GPU and computed
// there. Through the decode path (token by token): golden within the usual tolerance, two runs
// the same bits, something streamed; unpinned, it says why and streams nothing.
TEST(CudaHybrid, StreamedMissesMatchGoldenAndAreDeterministic) {
    SKIP_WITHOUT_GPU();
    test::TempDir tmp;
    repack_tiny_store(tmp / "tiny.nstore");
    LoadOptions o = cuda_options(4, 0);  // frozen, 4 slots: most choices miss
    o.store = tmp / "tiny.nstore";
    o.gpu.pin_store = "1";
    o.gpu.stream_misses = 1;
    auto m = Model::load(test::tiny_model_dir(), o);
    ASSERT_TRUE(m->store_pin().pinned) << m->describe_backend();
    EXPECT_NE(m->describe_backend().find("streams 50% of misses over PCIe: --stream-misses 1"),
              std::string::npos)
        << m->describe_backend();
    expect_golden(*m, 5e-2, 0.2, decode_logits);
    EXPECT_GT(m->backend_counters().experts_streamed.load(), 0u);
    const json golden = test::read_json(test::tiny_model_dir() / "golden.json");
    const auto ids = golden["prompts"].begin().value()["ids"].get<std::vector<TokenId>>();
    const auto a = decode_logits(*m, ids);
    const auto b = decode_logits(*m, ids);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "two runs differ";
    // The same model with every miss on the CPU: close, not necessarily the same bits.
    o.gpu.pin_store = "0";
    auto cpu_misses = Model::load(test::tiny_model_dir(), o);
    EXPECT_NE(cpu_misses->describe_backend().find("misses not streamed: the store is not pinned"),
              std::string::npos)
        << cpu_misses->describe_backend();
    const auto c = decode_logits(*cpu_misses, ids);
    ASSERT_EQ(c.size(), a.size());
    for (std::size_t i = 0; i < a.size(); i += 13) ASSERT_NEAR(a[i], c[i], 2e-2) << i;
    EXPECT_EQ(cpu_misses->backend_counters().experts_streamed.load(), 0u);
    o.gpu.stream_misses = 2;
    EXPECT_THROW(Model::load(test::tiny_model_dir(), o), std::exception);
}

// --split-misses (the default): a layer's share is met within the layer, one miss computed
// partly by the CPU (its first neurons, ExpertRecordView::slice) and partly by the GPU (its last,
// copied as a record of that many neurons). The tiny model (I = 96: 3 blocks) at a fixed share
// of half splits a one-miss layer 1 : 2 blocks. Golden within the usual tolerance, two runs the
// same bits, splits counted; close to whole misses only (--split-misses 0), which splits none.
TEST(CudaHybrid, SplitMissesMatchGoldenAndWholeMisses) {
    SKIP_WITHOUT_GPU();
    test::TempDir tmp;
    repack_tiny_store(tmp / "tiny.nstore");
    LoadOptions o = cuda_options(4, 0);  // frozen, 4 slots: most choices miss
    o.store = tmp / "tiny.nstore";
    o.gpu.pin_store = "1";
    o.gpu.stream_misses = 1;
    for (double share : {0.5, 0.3}) {
        o.gpu.stream_share = share;
        o.gpu.split_misses = true;
        auto split = Model::load(test::tiny_model_dir(), o);
        ASSERT_TRUE(split->store_pin().pinned) << split->describe_backend();
        expect_golden(*split, 5e-2, 0.2, decode_logits);
        EXPECT_GT(split->backend_counters().experts_split.load(), 0u) << share;
        const auto ids = long_prompt();
        const auto a = decode_logits(*split, ids), b = decode_logits(*split, ids);
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "two runs differ";
        o.gpu.split_misses = false;
        auto whole = Model::load(test::tiny_model_dir(), o);
        const auto c = decode_logits(*whole, ids);
        EXPECT_EQ(whole->backend_counters().experts_split.load(), 0u);
        ASSERT_EQ(c.size(), a.size());
        for (std::size_t i = 0; i < a.size(); i += 13) ASSERT_NEAR(a[i], c[i], 2e-2) << i;
    }
}

// --stream-misses auto (the default) with a pinned store: the load-time probes choose the share
// (the description says which and from what numbers) and decode stays within golden's tolerance;
// a fixed --stream-share gives the same bits run to run; --stream-misses 0 streams nothing.
TEST(CudaHybrid, StreamedMissesAutoChoosesAShareFromTheProbes) {
    SKIP_WITHOUT_GPU();
    test::TempDir tmp;
    repack_tiny_store(tmp / "tiny.nstore");
    LoadOptions o = cuda_options(4, 0);
    o.store = tmp / "tiny.nstore";
    o.gpu.pin_store = "1";
    auto m = Model::load(test::tiny_model_dir(), o);
    ASSERT_TRUE(m->store_pin().pinned) << m->describe_backend();
    const std::string d = m->describe_backend();
    EXPECT_TRUE(d.find("streams ") != std::string::npos ||
                d.find("misses not streamed: the balance share") != std::string::npos)
        << d;
    EXPECT_NE(d.find("CPU team"), std::string::npos) << d;  // the probe's numbers
    expect_golden(*m, 5e-2, 0.2, decode_logits);
    o.gpu.stream_share = 0.3;
    auto fixed = Model::load(test::tiny_model_dir(), o);
    EXPECT_NE(fixed->describe_backend().find("streams 30% of misses over PCIe: --stream-share"),
              std::string::npos)
        << fixed->describe_backend();
    const auto ids = long_prompt();
    const auto a = decode_logits(*fixed, ids), b = decode_logits(*fixed, ids);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "two runs differ";
    EXPECT_GT(fixed->backend_counters().experts_streamed.load(), 0u);
    o.gpu.stream_misses = 0;
    auto off = Model::load(test::tiny_model_dir(), o);
    decode_logits(*off, ids);
    EXPECT_EQ(off->backend_counters().experts_streamed.load(), 0u);
    o.gpu.stream_misses = -1;
    o.gpu.stream_share = 1.5;
    EXPECT_THROW(Model::load(test::tiny_model_dir(), o), std::exception);
}

// After a prompt on the GPU, its most-used experts fill the free adaptive slots before decode
// starts (--prompt-admit): admissions are counted right after the prompt, and decoding the
// prompt's own tokens again hits more than without (whose slots keep their placeholders until
// decode misses replace them); frozen residency admits nothing and keeps its bits.
TEST(CudaHybrid, TheFirstPromptFillsTheAdaptiveSlots) {
    SKIP_WITHOUT_GPU();
    test::TempDir tmp;
    repack_tiny_store(tmp / "tiny.nstore");
    const auto ids = long_prompt();
    struct Run {
        std::uint64_t admitted_by_prompt = 0, hits = 0;
        std::vector<float> logits;
    };
    const auto run = [&](int prompt_admit, int refresh_every) {
        LoadOptions o = prefill_options(12, "layer", 2048, 0);
        o.gpu.refresh_every = refresh_every;
        o.gpu.static_fraction = 0.25;
        o.gpu.prompt_admit = prompt_admit;
        o.store = tmp / "tiny.nstore";
        // Every run a fresh install: statistics learned by the runs before would change the
        // frozen placement between the two frozen runs compared below.
        o.routing_stats = "off";
        auto m = Model::load(test::tiny_model_dir(), o);
        KvCache cache = m->new_cache();
        Run r;
        auto logits = m->forward(ids, cache);
        // Counted when the copies are issued: `admissions` grows only once they landed, which
        // may be after forward() returned.
        r.admitted_by_prompt = m->backend_counters().prompt_admissions.load();
        const auto hits0 = m->backend_counters().experts_hit.load();
        // Decode the prompt's own first tokens again: their routing is close to the prompt's, so
        // the slots the prompt filled should serve them (the pool starts with placeholders
        // either way: a fresh load).
        for (int step = 0; step < 8; ++step) {
            const TokenId next = ids[static_cast<std::size_t>(step)];
            logits = m->forward(std::span<const TokenId>(&next, 1), cache);
            r.logits.insert(r.logits.end(), logits.begin(), logits.end());
        }
        r.hits = m->backend_counters().experts_hit.load() - hits0;
        return r;
    };
    const Run with = run(32, 8), without = run(0, 8);
    EXPECT_GT(with.admitted_by_prompt, 0u);
    EXPECT_EQ(without.admitted_by_prompt, 0u);
    EXPECT_GT(with.hits, without.hits) << "hits over 8 decode steps";
    // Frozen: no admissions after the prompt; the same bits with and without --prompt-admit.
    const Run frozen_a = run(32, 0), frozen_b = run(0, 0);
    EXPECT_EQ(frozen_a.admitted_by_prompt, 0u);
    ASSERT_EQ(frozen_a.logits.size(), frozen_b.logits.size());
    EXPECT_EQ(
        std::memcmp(frozen_a.logits.data(), frozen_b.logits.data(), frozen_a.logits.size() * 4), 0);
}

// --context auto: 16,384 positions where the budget leaves enough slots (the tiny model's maximum
// is smaller: its maximum), reported as the model's context length.
TEST(CudaHybrid, AutoContextAndTheReportedContextLength) {
    SKIP_WITHOUT_GPU();
    LoadOptions o = cuda_options(4, 0);
    o.gpu.context = 0;
    auto m = Model::load(test::tiny_model_dir(), o);
    const std::int64_t want = std::min<std::int64_t>(m->config().max_position_embeddings, 16384);
    EXPECT_EQ(m->context_length(), want) << m->describe_backend();
    o.gpu.context = 512;
    EXPECT_EQ(Model::load(test::tiny_model_dir(), o)->context_length(), 512);
}

// --kv-ring: the tiny model's sliding layers (window 16) keep a ring of 31 positions (blocks of
// 16); a 60-token prompt, decode after it, a short edit (kept in place) and a long one (the ring
// lost the window: re-processed) give the same bits as with the whole context.
TEST(CudaHybrid, KvRingGivesTheSameBitsAsTheWholeContext) {
    SKIP_WITHOUT_GPU();
    auto ids = long_prompt();
    while (ids.size() < 60) ids.push_back(static_cast<TokenId>(2000 + ids.size()));
    LoadOptions o = prefill_options(16, "layer", 16, 0);  // CPU path off: it depends on the blocks
    auto full = Model::load(test::tiny_model_dir(), o);
    o.gpu.kv_ring = 31;
    auto ring = Model::load(test::tiny_model_dir(), o);
    EXPECT_NE(ring->describe_backend().find("a ring of 31"), std::string::npos)
        << ring->describe_backend();
    const auto same = [&](const std::vector<float>& a, const std::vector<float>& b,
                          const char* what) {
        ASSERT_EQ(a.size(), b.size()) << what;
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << what;
    };
    same(all_logits(*full, ids), all_logits(*ring, ids), "prompt");
    KvCache cf = full->new_cache(), cr = ring->new_cache();
    same(full->forward(ids, cf), ring->forward(ids, cr), "prompt, last row");
    for (int t = 0; t < 8; ++t) {  // decode, token by token
        const std::vector<TokenId> next = {static_cast<TokenId>(300 + t)};
        same(full->forward(next, cf), ring->forward(next, cr), "decode");
    }
    // The prompt is the fixture's 305 tokens, so after 8 decoded tokens both truncations go back
    // further than the 31-position ring reaches: both re-process (an edit kept in place with a
    // ring is not covered here).
    for (const std::int64_t keep : {60, 20}) {
        SCOPED_TRACE(testing::Message() << "truncated to " << keep);
        cf.truncate(keep);
        cr.truncate(keep);
        const std::vector<TokenId> edit = {7, 8, 9};
        same(full->forward(edit, cf), ring->forward(edit, cr), "after the edit");
        const std::vector<TokenId> one = {10};
        same(full->forward(one, cf), ring->forward(one, cr), "decode after the edit");
    }
    // Too small a ring is a clear error at load.
    o.gpu.kv_ring = 20;
    EXPECT_NE(test::error_of([&] { Model::load(test::tiny_model_dir(), o); }).find("at least 31"),
              std::string::npos);
}

// Ring checkpoints: with a 31-position ring (window 16, blocks of 16) a conversation (the fixture's
// prompts, n positions, then 8 decoded tokens) is switched away from and comes back: its
// checkpoint keeps every position of the full layers and the rings' last 31, it is restored (not
// re-processed), and the continuation is the same bits as on a model with the whole context that
// never switched. A request sharing only its first 40 positions cannot be restored from a ring
// (the window before position 40 is gone): it is computed from scratch, with the same bits as
// from scratch without a ring.
TEST(CudaHybrid, KvRingCheckpointsRestoreAConversationThatComesBack) {
    SKIP_WITHOUT_GPU();
    const auto a = long_prompt();
    const auto n = static_cast<std::uint64_t>(a.size());
    ASSERT_GT(n, 100u);  // much longer than the ring
    const std::vector<TokenId> b = {9,  8,  7,  6,  5,  4,  3,  2,  1,  11,
                                    12, 13, 14, 15, 16, 17, 18, 19, 20, 21};
    const std::vector<TokenId> more = {41, 42, 43};
    LoadOptions o = prefill_options(16, "layer", 16, 0);
    o.gpu.kv_ring = 0;
    auto ref = Model::load(test::tiny_model_dir(), o);
    const auto V = static_cast<std::size_t>(ref->config().vocab_size);
    // The reference conversation: the prompt, 8 decoded tokens, then 3 more tokens.
    KvCache rc = ref->new_cache();
    ref->forward(a, rc);
    for (int t = 0; t < 8; ++t)
        ref->forward(std::vector<TokenId>{static_cast<TokenId>(300 + t)}, rc);
    const auto want = ref->forward(more, rc);
    const auto want_again = ref->forward(std::vector<TokenId>{50}, rc);

    o.gpu.kv_ring = 31;
    o.gpu.kv_checkpoint_gib = 0.5;
    auto m = Model::load(test::tiny_model_dir(), o);
    EXPECT_NE(m->describe_backend().find("a ring of 31"), std::string::npos)
        << m->describe_backend();
    const auto& bc = m->backend_counters();
    const auto trace = [&](const char* step) {
        std::printf("%-28s saved %llu restored %llu reused %llu reprocessed %llu\n", step,
                    static_cast<unsigned long long>(bc.kv_saved.load()),
                    static_cast<unsigned long long>(bc.kv_restored.load()),
                    static_cast<unsigned long long>(bc.kv_reused.load()),
                    static_cast<unsigned long long>(bc.kv_reprocessed.load()));
    };
    trace("loaded");
    KvCache ca = m->new_cache(), cb = m->new_cache();
    m->forward(a, ca);
    trace("a");
    for (int t = 0; t < 8; ++t) m->forward(std::vector<TokenId>{static_cast<TokenId>(300 + t)}, ca);
    trace("a decoded");
    const auto saved0 = bc.kv_saved.load();
    m->forward(b, cb);  // a (n + 8 positions) is checkpointed: its rings hold the last 31
    trace("b");
    EXPECT_EQ(bc.kv_saved.load() - saved0, n + 8);
    const auto restored_b = bc.kv_restored.load(), reprocessed_b = bc.kv_reprocessed.load();
    const auto got = m->forward(more, ca);  // b is checkpointed, a restored
    trace("a comes back");
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(std::memcmp(got.data(), want.data(), V * 4), 0)
        << "restoring from the ring checkpoint changed the bits";
    EXPECT_EQ(bc.kv_restored.load() - restored_b, n + 8);
    EXPECT_EQ(bc.kv_reprocessed.load() - reprocessed_b, 0u);

    // A request sharing a's first 40 positions: neither in place (the rings moved on) nor from a's
    // checkpoint (too short a prefix for its ring part): from scratch.
    std::vector<TokenId> d(a.begin(), a.begin() + 40);
    d.insert(d.end(), {66, 67});
    const auto restored0 = bc.kv_restored.load(), reused0 = bc.kv_reused.load();
    KvCache cd = m->new_cache(), rd = ref->new_cache();
    const auto got_d = m->forward(d, cd);
    trace("d");
    const auto want_d = ref->forward(d, rd);
    ASSERT_EQ(std::memcmp(got_d.data(), want_d.data(), V * 4), 0)
        << "a from-scratch request changed its bits";
    EXPECT_EQ(bc.kv_restored.load(), restored0);
    EXPECT_EQ(bc.kv_reused.load(), reused0);
    // And a once more, from its checkpoint of n + 11 positions.
    const auto again = m->forward(std::vector<TokenId>{50}, ca);
    trace("a again");
    ASSERT_EQ(std::memcmp(again.data(), want_again.data(), V * 4), 0);
    EXPECT_EQ(bc.kv_restored.load(), restored0 + n + 11);
}

TEST(CudaHybrid, PrefillAgreesWithTheCpuBackendAndDecodeContinuesFromIt) {
    SKIP_WITHOUT_GPU();
    const auto ids = long_prompt();
    auto cpu = Model::load(test::tiny_model_dir());
    const auto V = static_cast<std::size_t>(cpu->config().vocab_size);
    for (const char* order : {"layer", "block"}) {
        SCOPED_TRACE(order);
        auto gpu = Model::load(test::tiny_model_dir(), prefill_options(12, order, 8, 16));
        KvCache gc = gpu->new_cache(), cc = cpu->new_cache();
        auto gl = gpu->forward(ids, gc);
        auto cl = cpu->forward(ids, cc);
        for (int step = 0; step < 8; ++step) {
            for (std::size_t i = 0; i < V; i += 97)
                ASSERT_NEAR(gl[i], cl[i], 5e-2) << "step " << step;
            const TokenId next =
                static_cast<TokenId>(std::max_element(cl.begin(), cl.end()) - cl.begin());
            gl = gpu->forward(std::span<const TokenId>(&next, 1), gc);
            cl = cpu->forward(std::span<const TokenId>(&next, 1), cc);
        }
        EXPECT_EQ(gc.size(), cc.size());
    }
}

TEST(CudaHybrid, CancelledPrefillLeavesTheCacheAndTheBackendUsable) {
    SKIP_WITHOUT_GPU();
    auto m = Model::load(test::tiny_model_dir(), prefill_options(0, "layer", 2048, 0));
    const auto ids = long_prompt();
    const auto want = all_logits(*m, ids);
    KvCache c = m->new_cache();
    std::atomic<bool> cancel{true};
    ForwardOptions fo;
    fo.cancel = &cancel;
    EXPECT_THROW(m->forward(ids, c, fo), Cancelled);
    EXPECT_EQ(c.size(), 0);
    const auto again = all_logits(*m, ids);
    ASSERT_EQ(std::memcmp(again.data(), want.data(), want.size() * 4), 0);
}

void cancel_long_prompt_and_continue(bool fused);

// A cancel that arrives while the GPU runs a long prompt (from another thread, as the server's
// disconnect does): the call returns within a liveness bound, the cache keeps the prefix it
// had, and continuing from it gives the bits a fresh sequence gives.
TEST(CudaHybrid, CancelDuringALongPromptReturnsAndTheNextTurnIsUnchanged) {
    SKIP_WITHOUT_GPU();
    for (const bool fused : {true, false}) {
        SCOPED_TRACE(fused ? "fused decode graphs" : "one kernel per step");
        cancel_long_prompt_and_continue(fused);
    }
}

void cancel_long_prompt_and_continue(bool fused) {
    using Clock = std::chrono::steady_clock;
    LoadOptions o = prefill_options(0, "layer", 256, 0);
    o.gpu.fused_decode = fused;
    o.gpu.context = 16384;
    // Without the K/V ring the cancelled prompt's rows lie after the kept prefix, so the next
    // turn continues from it; with a ring they may have overwritten its window and the next
    // turn starts over (ring_keeps in engine/cuda/hybrid/sequence.cpp), batched differently.
    o.gpu.kv_ring = 0;
    auto m = Model::load(test::tiny_model_dir(), o);
    std::vector<TokenId> prompt(16000);
    for (std::size_t i = 0; i < prompt.size(); ++i) {
        prompt[i] = static_cast<TokenId>((i * 7919 + 13) % 199998);
    }
    const std::vector<TokenId> prefix(prompt.begin(), prompt.begin() + 8);
    const std::vector<TokenId> rest(prompt.begin() + 8, prompt.end());
    const std::vector<TokenId> next = {prompt[8], prompt[9], prompt[10]};
    KvCache c = m->new_cache();
    m->forward(prefix, c, {});
    ASSERT_EQ(c.size(), 8);
    std::atomic<bool> cancel{false};
    ForwardOptions fo;
    fo.cancel = &cancel;
    Clock::time_point cancelled_at{};
    std::thread canceller([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        cancelled_at = Clock::now();
        cancel.store(true);
    });
    bool was_cancelled = false;
    try {
        m->forward(rest, c, fo);
    } catch (const Cancelled&) {
        was_cancelled = true;
    }
    const auto returned = Clock::now();
    canceller.join();
    if (!was_cancelled) {
        std::printf("the prompt finished within 20 ms: nothing to cancel\n");
        return;
    }
    EXPECT_LT(std::chrono::duration<double>(returned - cancelled_at).count(), 1.5);
    EXPECT_EQ(c.size(), 8);
    ForwardOptions all;
    all.all_logits = true;
    const auto got = m->forward(next, c, all);
    KvCache fresh = m->new_cache();
    m->forward(prefix, fresh, {});
    const auto want = m->forward(next, fresh, all);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0);
}

// A damaged store record is an error naming it on the GPU path too (uploaded to a slot at load,
// or staged for a prompt), never an answer.
TEST(CudaHybrid, ADamagedStoreRecordIsAnErrorNamingIt) {
    SKIP_WITHOUT_GPU();
    test::TempDir dir;
    const auto store = dir.path() / "tiny.nstore";
    repack_tiny_store(store);
    test::zero_store_record(store, 1, 2);
    for (int slots : {0, 1000}) {
        SCOPED_TRACE(slots);
        LoadOptions o = prefill_options(slots, "layer", 2048, 0);
        o.store = store;
        std::string msg;
        try {
            auto m = Model::load(test::tiny_model_dir(), o);
            KvCache c = m->new_cache();
            (void)m->forward(long_prompt(), c, {});
            for (int i = 0; i < 16; ++i) {
                const std::vector<TokenId> one = {static_cast<TokenId>(1000 + i)};
                (void)m->forward(one, c, {});
            }
        } catch (const Error& e) {
            msg = e.what();
        }
        EXPECT_NE(msg.find("record layer 1 expert 2 fails its checksum"), std::string::npos) << msg;
    }
}

TEST(CudaHybrid, KvCheckpointsRestoreSwitchedSequencesAndSharedPrefixesAreNotReprocessed) {
    SKIP_WITHOUT_GPU();
    const auto a = long_prompt();  // 58 tokens
    const std::vector<TokenId> b = {9, 8, 7, 6, 5, 4};
    // Reference: a in two parts on a model that never switches.
    auto ref = Model::load(test::tiny_model_dir(), prefill_options(16, "layer", 2048, 0));
    const auto V = static_cast<std::size_t>(ref->config().vocab_size);
    KvCache rc = ref->new_cache();
    ref->forward(std::span<const TokenId>(a.data(), 40), rc);
    const auto want = ref->forward(std::span<const TokenId>(a.data() + 40, a.size() - 40), rc);
    // c shares a's first 45 tokens, d its first 50.
    std::vector<TokenId> c(a.begin(), a.begin() + 45), d(a.begin(), a.begin() + 50);
    c.push_back(77);
    d.insert(d.end(), {66, 67});
    // From scratch (all logits: nothing is skipped), the last row.
    const auto last_logits = [&](const std::vector<TokenId>& ids) {
        const auto all = all_logits(*ref, ids);
        return std::vector<float>(all.end() - static_cast<std::ptrdiff_t>(V), all.end());
    };
    const auto want_c = last_logits(c), want_d = last_logits(d);
    const auto near = [&](const std::vector<float>& x, const std::vector<float>& y) {
        double worst = 0;
        for (std::size_t i = 0; i < V; ++i)
            worst = std::max(worst, static_cast<double>(std::fabs(x[i] - y[i])));
        return worst;
    };

    for (const double gib : {0.5, 0.0}) {
        SCOPED_TRACE(testing::Message() << "checkpoints " << gib << " GiB");
        LoadOptions o = prefill_options(16, "layer", 2048, 0);
        o.gpu.kv_checkpoint_gib = gib;
        auto m = Model::load(test::tiny_model_dir(), o);
        const auto& bc = m->backend_counters();
        // Switch away and back: a's 40 positions come back from the checkpoint (or are
        // re-processed without checkpoints), with the same bits either way.
        KvCache ca = m->new_cache(), cb = m->new_cache();
        m->forward(std::span<const TokenId>(a.data(), 40), ca);
        m->forward(b, cb);
        const auto got = m->forward(std::span<const TokenId>(a.data() + 40, a.size() - 40), ca);
        ASSERT_EQ(std::memcmp(got.data(), want.data(), V * 4), 0)
            << "switching back changed the bits";
        if (gib > 0) {
            EXPECT_EQ(bc.kv_saved.load(), 40u + b.size());  // a, then b when a came back
            EXPECT_EQ(bc.kv_restored.load(), 40u);
            EXPECT_EQ(bc.kv_reprocessed.load(), 0u);
        } else {
            EXPECT_EQ(bc.kv_saved.load(), 0u);
            EXPECT_EQ(bc.kv_restored.load(), 0u);
            EXPECT_EQ(bc.kv_reprocessed.load(), 40u);
        }
        // A new request sharing a's first 45 tokens while a is on the GPU: kept in place, only
        // the last token is computed (without checkpoints: computed from scratch).
        const auto reused0 = bc.kv_reused.load();
        KvCache cc = m->new_cache();
        const auto got_c = m->forward(c, cc);
        EXPECT_EQ(bc.kv_reused.load() - reused0, gib > 0 ? 45u : 0u);
        EXPECT_EQ(cc.size(), static_cast<std::int64_t>(c.size()));
        EXPECT_LT(near(got_c, want_c), 1e-3);
        // Another one sharing a's first 50: only 45 are on the GPU (c's), 50 in a's checkpoint.
        const auto restored0 = bc.kv_restored.load();
        const auto reused1 = bc.kv_reused.load();
        KvCache cd = m->new_cache();
        const auto got_d = m->forward(d, cd);
        EXPECT_EQ(bc.kv_restored.load() - restored0, gib > 0 ? 50u : 0u);
        EXPECT_EQ(bc.kv_reused.load() - reused1, 0u);
        EXPECT_LT(near(got_d, want_d), 1e-3);
        // Whole-prompt logits are never skipped.
        KvCache ce = m->new_cache();
        ForwardOptions fo;
        fo.all_logits = true;
        EXPECT_EQ(m->forward(d, ce, fo).size(), d.size() * V);
    }
}

TEST(CudaHybrid, BadPrefillOptionsAreClearErrors) {
    SKIP_WITHOUT_GPU();
    EXPECT_NE(test::error_of([] {
                  Model::load(test::tiny_model_dir(), prefill_options(4, "sideways", 8, 0));
              }).find("--prefill-order"),
              std::string::npos);
    EXPECT_NE(test::error_of([] {
                  Model::load(test::tiny_model_dir(), prefill_options(4, "layer", 8, 17));
              }).find("--prefill-cpu-tokens"),
              std::string::npos);
    LoadOptions pin = prefill_options(4, "layer", 8, 0);
    pin.gpu.pin_store = "yes";
    EXPECT_NE(test::error_of([&] {
                  Model::load(test::tiny_model_dir(), pin);
              }).find("--pin-store \"yes\""),
              std::string::npos);
    LoadOptions streams = prefill_options(4, "layer", 8, 0);
    streams.gpu.expert_streams = 3;
    EXPECT_NE(test::error_of([&] {
                  Model::load(test::tiny_model_dir(), streams);
              }).find("--expert-streams must be 1 or 2"),
              std::string::npos);
}

// `neural bench --workload decode` on the GPU backend reports the GPU's own time per token and
// the decode bounds made of it.
TEST(CudaHybrid, BenchReportsGpuTimesAndDecodeBounds) {
    SKIP_WITHOUT_GPU();
    bench::BenchOptions o;
    o.model = test::tiny_model_dir();
    o.workloads = {"decode"};
    o.decode_tokens = 12;
    o.probe_bytes = std::size_t{4} << 20;
    o.profiles = {bench::Profile{"gpu", bench::Json::object(), cuda_options(8)}};
    const bench::Json report = bench::run_bench(o);
    const bench::Json& w = report["runs"][0]["workloads"]["decode"];
    ASSERT_GT(w["token_records"].get<std::uint64_t>(), 0u) << w.dump();
    const bench::Json& g = w["gpu_ms_per_token"];
    ASSERT_TRUE(g.is_object()) << "graphs without timing events on this device? " << w.dump();
    EXPECT_GT(g["dense"].get<double>(), 0.0);
    EXPECT_GT(g["tail"].get<double>(), 0.0);
    EXPECT_GE(g["experts"].get<double>(), g["experts_alone"].get<double>());
    // The GPU's time is a part of the token's wall time (the host waits for the tail).
    EXPECT_LT(g["dense"].get<double>() + g["tail"].get<double>(),
              w["phase_ms_per_token"]["wall"].get<double>());
    const bench::Json& b = w["bounds"];
    ASSERT_TRUE(b.is_object());
    EXPECT_LE(b["overlap_ms"].get<double>(), b["chain_ms"].get<double>() + 1e-9);
    EXPECT_GE(b["wall_over_chain"].get<double>(), 1.0);
    EXPECT_NE(bench::format_report(report).find("Decode bounds"), std::string::npos);
}

// `neural bench --workload prompt` on the GPU backend reports the prefill's split: every prompt
// token through the GPU prefill, the parts of its time, and where each (layer, expert) ran.
TEST(CudaHybrid, BenchReportsThePrefillSplit) {
    SKIP_WITHOUT_GPU();
    bench::BenchOptions o;
    o.model = test::tiny_model_dir();
    o.workloads = {"prompt"};
    o.prompt_sizes = {120};
    o.probe_bytes = std::size_t{4} << 20;
    LoadOptions load = cuda_options(8);
    load.gpu.prefill_cpu_tokens = 4;  // the tiny model's 8 experts: some staged, some on the CPU
    o.profiles = {bench::Profile{"gpu", bench::Json::object(), load}};
    const bench::Json report = bench::run_bench(o);
    const bench::Json& w = report["runs"][0]["workloads"]["prompt_120"];
    ASSERT_TRUE(w["prefill"].is_object()) << w.dump();
    const bench::Json& f = w["prefill"];
    EXPECT_EQ(f["tokens"].get<std::int64_t>(),
              w["requests"][0]["prompt_tokens"].get<std::int64_t>());
    EXPECT_GT(f["seconds"].get<double>(), 0.0);
    EXPECT_LE(f["host_launch_seconds"].get<double>() + f["routing_sync_seconds"].get<double>() +
                  f["staging_wait_seconds"].get<double>(),
              f["seconds"].get<double>());
    // 4 layers x 8 experts, each used by some of 120 tokens x 4 choices: all 32 groups ran somewhere.
    EXPECT_EQ(f["experts_staged"].get<std::uint64_t>() +
                  f["experts_from_slots"].get<std::uint64_t>() +
                  f["experts_on_cpu"].get<std::uint64_t>(),
              32u);
    EXPECT_EQ(f["staged_bytes"].get<std::uint64_t>() %
                  std::max<std::uint64_t>(1, f["experts_staged"].get<std::uint64_t>()),
              0u);
    EXPECT_NE(bench::format_report(report).find("GPU prefill"), std::string::npos);
    // No store: nothing to pin (tests of --pin-store: PinnedStoreStagesFromTheMappingWithTheSameBits).
    EXPECT_EQ(report["runs"][0]["store_pinned"], false);
    EXPECT_EQ(report["runs"][0]["store_pin_s"], 0.0);
}

}  // namespace
}  // namespace neural
