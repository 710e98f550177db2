#include "bench/bench.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cpu/ram_probe.h"
#include "cpu/team/worker_team.h"
#include "runtime/options.h"
#include "support/fixtures.h"

namespace neural::bench {
namespace {

using test::error_of;

// Small sizes: the whole suite stays a few seconds on two cores.
BenchOptions tiny_options() {
    BenchOptions o;
    o.model = test::tiny_model_dir();
    o.decode_tokens = 4;
    o.prompt_sizes = {40, 120};
    o.max_tokens = 3;
    o.probe_bytes = std::size_t{4} << 20;
    return o;
}

void write_replay(const test::TempDir& dir) {
    const std::string first =
        R"({"model":"m","messages":[{"role":"system","content":"Be brief."},)"
        R"({"role":"user","content":"int main() { return 0; } -- what does this do?"}],)"
        R"("max_tokens":512,"temperature":0,"reasoning_effort":"low"})";
    const std::string second =
        R"({"model":"m","messages":[{"role":"system","content":"Be brief."},)"
        R"({"role":"user","content":"int main() { return 0; } -- what does this do?"},)"
        R"({"role":"assistant","content":"It exits with status 0."},)"
        R"({"role":"user","content":"And with return 1?"}],)"
        R"("max_tokens":512,"temperature":0,"reasoning_effort":"low"})";
    test::write_file(dir / "01_context.json", first);
    test::write_file(dir / "02_followup.json", second);
}

void expect_workload_schema(const Json& w) {
    for (const char* key : {"requests", "timed_tokens", "timed_seconds", "decode_tok_s",
                            "prompt_seconds", "ttft_seconds", "token_records", "phase_ms_per_token",
                            "experts_hit", "experts_missed", "hit_rate", "admissions", "cpu_bytes",
                            "cpu_gb_s", "page_faults", "prompt_cpu_kernel_seconds",
                            "prompt_cpu_bytes", "prompt_cpu_gb_s", "prompt_page_faults"}) {
        EXPECT_TRUE(w.contains(key)) << key;
    }
    for (const char* phase :
         {"wall", "cpu_kernel", "gpu_wait", "graph_submit", "admission", "sampling", "other"}) {
        EXPECT_TRUE(w["phase_ms_per_token"].contains(phase)) << phase;
    }
    std::int64_t timed = 0;
    for (const auto& r : w["requests"]) {
        timed += std::max<std::int64_t>(r["decode_tokens"].get<std::int64_t>() - 1, 0);
    }
    EXPECT_EQ(w["timed_tokens"].get<std::int64_t>(), timed);
    EXPECT_EQ(w["token_records"].get<std::int64_t>(), timed);
    EXPECT_DOUBLE_EQ(w["hit_rate"].get<double>(), 0.0);  // CPU only: every expert is a miss
}

TEST(BenchOrder, MirroredPairs) {
    const auto order = run_order(4, true);
    std::vector<int> profiles;
    for (const auto& [pair, p] : order) profiles.push_back(p);
    EXPECT_EQ(profiles, (std::vector<int>{0, 1, 1, 0, 0, 1, 1, 0}));
    EXPECT_EQ(order[2].first, 1);
    EXPECT_EQ(run_order(3, false).size(), 3u);
}

TEST(BenchReport, AllWorkloadsOnTheTinyFixture) {
    test::TempDir dir;
    write_replay(dir);
    BenchOptions o = tiny_options();
    o.workloads = {"decode", "prompt", "replay"};
    o.workload_dir = dir.path();
    const Json report = run_bench(o);
    EXPECT_EQ(report["schema"], "neural-bench");
    EXPECT_EQ(report["version"], 1);
    for (const char* key : {"cpu", "logical_cpus", "build_type", "gpus", "cuda_build"}) {
        EXPECT_TRUE(report["machine"].contains(key)) << key;
    }
    EXPECT_GT(report["probes"]["ram_read"]["gb_s"].get<double>(), 0.0);
    EXPECT_TRUE(report["probes"].contains("pinned_h2d"));
    ASSERT_EQ(report["runs"].size(), 1u);
    // The CPU backend pins no store (--pin-store is the GPU backend's).
    EXPECT_EQ(report["runs"][0]["store_pinned"], false);
    EXPECT_EQ(report["runs"][0]["store_pin_s"], 0.0);
    const Json& w = report["runs"][0]["workloads"];
    for (const char* name : {"decode", "prompt_40", "prompt_120", "replay"}) {
        ASSERT_TRUE(w.contains(name)) << name;
        expect_workload_schema(w[name]);
    }
    EXPECT_EQ(w["decode"]["requests"][0]["cached_tokens"], 0);
    // The CPU backend has no GPU times, so no decode bounds.
    EXPECT_TRUE(w["decode"]["gpu_ms_per_token"].is_null());
    EXPECT_TRUE(w["decode"]["bounds"].is_null());
    // Greedy decode on the CPU backend: every token's logits from the screened lm_head, with
    // the rows it computed exactly per token (docs/KERNELS.md "Screened lm_head").
    const Json& screen = w["decode"]["lm_head_screen"];
    EXPECT_EQ(screen["tokens"], w["decode"]["requests"][0]["decode_tokens"]);
    ASSERT_TRUE(screen["exact_rows_per_token"].is_number());
    EXPECT_GT(screen["exact_rows_per_token"].get<double>(), 0.0);
    // Prompt sizes are hit to within a few tokens (the cut is re-tokenized).
    EXPECT_NEAR(w["prompt_120"]["requests"][0]["prompt_tokens"].get<double>(), 120, 4);
    EXPECT_EQ(w["prompt_120"]["requests"][0]["decode_tokens"], 1);
    // Replay: the follow-up reuses the cached context.
    ASSERT_EQ(w["replay"]["requests"].size(), 2u);
    EXPECT_GT(w["replay"]["requests"][1]["cached_tokens"].get<int>(), 20);
    EXPECT_LE(w["replay"]["requests"][0]["decode_tokens"].get<int>(), 3);
    EXPECT_GT(w["decode"]["cpu_bytes"].get<std::uint64_t>(), 0u);
    EXPECT_TRUE(report["summary"]["default"].contains("decode"));
    EXPECT_FALSE(report.contains("pairs"));
    EXPECT_NE(format_report(report).find("decode"), std::string::npos);
}

// --temperature: the decode is sampled (seed 0), the report says at what, and the sampling phase
// is timed; the same seed gives the same tokens; a bad temperature is refused by the sampler.
TEST(BenchReport, DecodeSampledAtATemperature) {
    BenchOptions o = tiny_options();
    o.decode_tokens = 6;
    o.probes = false;
    o.decode_temperature = 1.0f;
    const Json a = run_bench(o);
    EXPECT_DOUBLE_EQ(a["options"]["decode_temperature"].get<double>(), 1.0);
    const Json& w = a["runs"][0]["workloads"]["decode"];
    expect_workload_schema(w);
    EXPECT_GT(w["phase_ms_per_token"]["sampling"].get<double>(), 0.0);
    const Json b = run_bench(o);
    EXPECT_EQ(b["runs"][0]["workloads"]["decode"]["requests"][0]["decode_tokens"],
              w["requests"][0]["decode_tokens"]);
    o.decode_temperature = -1.0f;
    EXPECT_NE(error_of([&] { run_bench(o); }).find("temperature"), std::string::npos);
}

TEST(BenchReport, AbRunsMirroredWithRatios) {
    test::TempDir dir;
    test::write_file(dir / "a.json", R"({"kernel": "reference"})");
    test::write_file(dir / "b.json", R"({"threads": 1})");
    BenchOptions o = tiny_options();
    o.probes = false;
    o.repeat = 2;
    o.ab = true;
    o.profiles = {load_profile(dir / "a.json", {}), load_profile(dir / "b.json", {})};
    const Json report = run_bench(o);
    std::vector<std::string> names;
    for (const auto& r : report["runs"]) names.push_back(r["profile"]);
    EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "b", "a"}));
    ASSERT_EQ(report["pairs"].size(), 2u);
    EXPECT_EQ(report["pairs"][0]["order"], "AB");
    EXPECT_EQ(report["pairs"][1]["order"], "BA");
    for (int p = 0; p < 2; ++p) {
        const Json& runs = report["runs"];
        const Json& a = runs[p == 0 ? 0 : 3]["workloads"]["decode"];
        const Json& b = runs[p == 0 ? 1 : 2]["workloads"]["decode"];
        const Json& ratio = report["pairs"][static_cast<std::size_t>(p)]["ratios"]["decode"];
        if (a["decode_tok_s"].is_number() && b["decode_tok_s"].is_number()) {
            EXPECT_NEAR(ratio["decode_tok_s_b_over_a"].get<double>(),
                        b["decode_tok_s"].get<double>() / a["decode_tok_s"].get<double>(), 1e-9);
        }
        EXPECT_NEAR(ratio["prompt_seconds_b_over_a"].get<double>(),
                    b["prompt_seconds"].get<double>() / a["prompt_seconds"].get<double>(), 1e-9);
    }
    EXPECT_EQ(report["summary"]["a"]["decode"]["runs"], 2);
    ASSERT_TRUE(report.contains("ratio_summary"));
    EXPECT_EQ(report["ratio_summary"]["decode"]["prompt_seconds_b_over_a"]["n"], 2);
}

// Cancel before any answer: bench::Cancelled (a neural::Error), no progress past the start.
TEST(BenchCancel, BeforeTheFirstAnswerThrowsCancelled) {
    BenchOptions o = tiny_options();
    o.probes = false;
    int calls = 0;
    o.cancel = [&] { return ++calls >= 2; };  // the first run's check passes, its workload's not
    std::vector<double> fractions;
    o.on_progress = [&](double f, const std::string&) { fractions.push_back(f); };
    bool cancelled = false;
    try {
        run_bench(o);
    } catch (const Cancelled&) {
        cancelled = true;
    }
    EXPECT_TRUE(cancelled);
    EXPECT_EQ(calls, 2);
    for (double f : fractions) EXPECT_EQ(f, 0.0);  // only the model load reported
    // A neural::Error for callers that catch those.
    o.cancel = [] { return true; };
    EXPECT_THROW(run_bench(o), Error);
}

// Cancel while an answer streams: the answer stops early (well before its 200 tokens), the
// call throws, and a new run_bench afterwards works.
TEST(BenchCancel, MidAnswerStopsTheAnswerAndLeavesTheEngineUsable) {
    BenchOptions o = tiny_options();
    o.probes = false;
    o.decode_tokens = 200;
    o.repeat = 2;
    o.ab = true;
    o.profiles = {Profile{"a", Json::object(), LoadOptions{}},
                  Profile{"b", Json::object(), LoadOptions{}}};
    int calls = 0;
    o.cancel = [&] { return ++calls >= 8; };  // 3 checks before the turn, then streamed tokens
    int answers = 0;
    o.on_progress = [&](double f, const std::string&) {
        if (f > 0) ++answers;
    };
    EXPECT_THROW(run_bench(o), Cancelled);
    EXPECT_EQ(answers, 0);
    EXPECT_EQ(calls, 8);  // polled no more once it said yes

    o.cancel = {};
    o.decode_tokens = 3;
    o.repeat = 1;
    const Json report = run_bench(o);
    EXPECT_EQ(report["runs"].size(), 2u);
}

// Cancel through the flag the forward pass watches (BenchOptions::cancel_flag): set as the first
// turn starts while the callback itself never says yes, it still stops the turn early and the
// call throws. Without the flag reaching the forward pass the answer ran to its end (and a
// long prompt pass with it) before the callback was asked again.
TEST(BenchCancel, TheCancelFlagStopsTheTurnInFlight) {
    BenchOptions o = tiny_options();
    o.probes = false;
    o.decode_tokens = 50;
    std::atomic<bool> flag{false};
    o.cancel_flag = &flag;
    int calls = 0;
    o.cancel = [&] {
        if (++calls >= 3) flag.store(true);  // the run's, the workload's, then the turn's check
        return false;
    };
    EXPECT_THROW(run_bench(o), Cancelled);
    EXPECT_LT(calls, 3 + 10);  // a few streamed tokens at most, not the 50 asked for
}

// The progress fraction counts answers of all runs and ends at 1.
TEST(BenchProgress, FractionGrowsToOne) {
    test::TempDir dir;
    write_replay(dir);
    BenchOptions o = tiny_options();
    o.probes = false;
    o.workloads = {"decode", "prompt", "replay"};
    o.workload_dir = dir.path();
    o.repeat = 2;
    std::vector<double> fractions;
    o.on_progress = [&](double f, const std::string&) { fractions.push_back(f); };
    run_bench(o);
    ASSERT_FALSE(fractions.empty());
    EXPECT_TRUE(std::is_sorted(fractions.begin(), fractions.end()));
    EXPECT_DOUBLE_EQ(fractions.back(), 1.0);
    // 2 runs x (decode + 2 prompt sizes + 2 replay files) = 10 answers: 1/10 after the first.
    EXPECT_NE(std::find(fractions.begin(), fractions.end(), 0.1), fractions.end());
}

// VRAM safety: with one model at a time (forced here; automatic for a non-CPU backend) the
// other profile's model is released and reloaded whenever the profile changes.
TEST(BenchModels, OneModelAtATimeReloadsOnEveryProfileChange) {
    BenchOptions o = tiny_options();
    o.probes = false;
    o.decode_tokens = 2;
    o.repeat = 2;
    o.ab = true;
    o.profiles = {Profile{"a", Json::object(), LoadOptions{}},
                  Profile{"b", Json::object(), LoadOptions{}}};
    EXPECT_FALSE(one_model_at_a_time(o));
    auto loads = [&](const BenchOptions& opts) {
        const Json report = run_bench(opts);
        std::vector<bool> v;
        for (const auto& r : report["runs"]) v.push_back(r["model_loaded"].get<bool>());
        EXPECT_EQ(report["options"]["one_model_at_a_time"].get<bool>(), one_model_at_a_time(opts));
        return v;
    };
    EXPECT_EQ(loads(o), (std::vector<bool>{true, true, false, false}));  // A B B A: both kept
    o.one_model_at_a_time = true;
    EXPECT_EQ(loads(o), (std::vector<bool>{true, true, false, true}));  // A reloaded after B

    BenchOptions gpu = tiny_options();
    gpu.profiles = {Profile{"a", Json::object(), LoadOptions{}},
                    Profile{"b", Json::object(), LoadOptions{}}};
    gpu.profiles[1].load.backend = "cuda";
    EXPECT_TRUE(one_model_at_a_time(gpu));
    gpu.profiles[1].load.backend = "auto";
    EXPECT_TRUE(one_model_at_a_time(gpu));
}

// Page faults of the first answer and of the follow-ups separately; together they are all of
// the workload's faults (decode tokens + prompt passes).
TEST(BenchReport, PageFaultsSplitFirstAnswerAndFollowUps) {
    test::TempDir dir;
    write_replay(dir);
    BenchOptions o = tiny_options();
    o.probes = false;
    o.workloads = {"decode", "replay"};
    o.workload_dir = dir.path();
    const Json report = run_bench(o);
    for (const char* name : {"decode", "replay"}) {
        const Json& w = report["runs"][0]["workloads"][name];
        EXPECT_EQ(
            w["first_answer_page_faults"].get<std::uint64_t>() +
                w["follow_up_page_faults"].get<std::uint64_t>(),
            w["page_faults"].get<std::uint64_t>() + w["prompt_page_faults"].get<std::uint64_t>())
            << name;
        EXPECT_TRUE(w["first_answer_page_faults_per_token"].is_number()) << name;
        EXPECT_EQ(w["first_answer_major_page_faults"].get<std::uint64_t>() +
                      w["follow_up_major_page_faults"].get<std::uint64_t>(),
                  w["major_page_faults"].get<std::uint64_t>() +
                      w["prompt_major_page_faults"].get<std::uint64_t>())
            << name;
        EXPECT_LE(w["first_answer_major_page_faults"].get<std::uint64_t>(),
                  w["first_answer_page_faults"].get<std::uint64_t>());
    }
    const Json& d = report["runs"][0]["workloads"]["decode"];
    EXPECT_TRUE(d["prefill"].is_null());  // the CPU backend has no GPU prefill split
    EXPECT_EQ(d["follow_ups"], 0);
    EXPECT_EQ(d["follow_up_page_faults"], 0);
    EXPECT_TRUE(d["follow_up_page_faults_per_token"].is_null());
    const Json& r = report["runs"][0]["workloads"]["replay"];
    EXPECT_EQ(r["follow_ups"], 1);
    EXPECT_TRUE(r["follow_up_page_faults_per_token"].is_number());
    // The per-token rate divides by the tokens the answers processed (new prompt + generated).
    const Json& q0 = r["requests"][0];
    const double first_tokens = q0["prompt_tokens"].get<double>() -
                                q0["cached_tokens"].get<double>() +
                                q0["decode_tokens"].get<double>();
    EXPECT_NEAR(r["first_answer_page_faults_per_token"].get<double>(),
                r["first_answer_page_faults"].get<double>() / first_tokens, 1e-12);
    const Json& s = report["summary"]["default"]["replay"];
    EXPECT_EQ(s["first_answer_page_faults"], r["first_answer_page_faults"]);
    EXPECT_EQ(s["follow_up_page_faults"], r["follow_up_page_faults"]);
}

TEST(BenchRatios, MedianQuartilesAndRange) {
    const Json st = ratio_stats({1.2, 0.8, 1.0, 1.1});
    EXPECT_EQ(st["n"], 4);
    EXPECT_DOUBLE_EQ(st["median"].get<double>(), 1.05);
    EXPECT_DOUBLE_EQ(st["min"].get<double>(), 0.8);
    EXPECT_DOUBLE_EQ(st["max"].get<double>(), 1.2);
    EXPECT_NEAR(st["q1"].get<double>(), 0.95, 1e-12);
    EXPECT_NEAR(st["q3"].get<double>(), 1.125, 1e-12);
    EXPECT_EQ(ratio_stats({})["n"], 0);
    const Json pairs = Json::parse(
        R"([{"ratios": {"decode": {"decode_tok_s_b_over_a": 2.0, "prompt_seconds_b_over_a": null}}},
            {"ratios": {"decode": {"decode_tok_s_b_over_a": 4.0, "prompt_seconds_b_over_a": 0.5}}}])");
    const Json sum = ratio_summary(pairs);
    EXPECT_DOUBLE_EQ(sum["decode"]["decode_tok_s_b_over_a"]["median"].get<double>(), 3.0);
    EXPECT_EQ(sum["decode"]["prompt_seconds_b_over_a"]["n"], 1);
}

// The decode bounds from a workload's per-token figures: 2 tokens, 12 MB read by the CPU per
// token, probe 6 GB/s -> CPU 2.0 ms per token; GPU 0.5 dense + 1.5 experts
// (0.25 of them on layers the CPU left idle) + 0.25 tail = 2.25 ms.
TEST(BenchBounds, OverlapAndChainFromTheFigures) {
    Json w = Json::parse(R"({"token_records": 2, "cpu_bytes": 24000000,
        "phase_ms_per_token": {"wall": 4.5},
        "gpu_ms_per_token": {"dense": 0.5, "experts": 1.5, "experts_alone": 0.25, "tail": 0.25}})");
    const Json b = decode_bounds(w, 6.0);
    ASSERT_TRUE(b.is_object());
    EXPECT_NEAR(b["cpu_ms"].get<double>(), 2.0, 1e-12);
    EXPECT_NEAR(b["gpu_ms"].get<double>(), 2.25, 1e-12);
    EXPECT_NEAR(b["overlap_ms"].get<double>(), 2.25, 1e-12);                   // max(2.0, 2.25)
    EXPECT_NEAR(b["chain_ms"].get<double>(), 0.5 + 0.25 + 0.25 + 2.0, 1e-12);  // max(2.0, 1.25)
    EXPECT_NEAR(b["wall_over_overlap"].get<double>(), 2.0, 1e-12);
    EXPECT_NEAR(b["wall_over_chain"].get<double>(), 1.5, 1e-12);
    // The GPU's experts longer than the CPU's misses: the chain takes them.
    w["cpu_bytes"] = 6000000;  // 0.5 ms per token
    EXPECT_NEAR(decode_bounds(w, 6.0)["chain_ms"].get<double>(), 0.5 + 0.25 + 0.25 + 1.25, 1e-12);
    // No GPU times, no tokens or no probe: no bounds.
    EXPECT_TRUE(decode_bounds(w, 0.0).is_null());
    Json untimed = w;
    untimed["gpu_ms_per_token"] = nullptr;
    EXPECT_TRUE(decode_bounds(untimed, 6.0).is_null());
    Json empty = w;
    empty["token_records"] = 0;
    EXPECT_TRUE(decode_bounds(empty, 6.0).is_null());
}

TEST(BenchErrors, BadInputsSayWhatIsWrong) {
    test::TempDir dir;
    BenchOptions o = tiny_options();
    o.workloads = {"decode", "warp"};
    EXPECT_NE(error_of([&] { run_bench(o); }).find("unknown workload \"warp\""), std::string::npos);

    o.workloads = {"replay"};
    o.workload_dir = dir / "missing";
    EXPECT_NE(error_of([&] { run_bench(o); }).find("replay workload folder not found"),
              std::string::npos);
    o.workload_dir = dir.path();  // exists, but empty
    EXPECT_NE(error_of([&] { run_bench(o); }).find("no *.json"), std::string::npos);
    test::write_file(dir / "01.json", R"({"model":"m","messages":[]})");
    o.probes = false;
    EXPECT_NE(error_of([&] { run_bench(o); }).find("01.json"), std::string::npos);

    test::write_file(dir / "bad.json", "{\"kernel\": ");
    EXPECT_NE(error_of([&] { load_profile(dir / "bad.json", {}); }).find("invalid JSON"),
              std::string::npos);
    test::write_file(dir / "unknown.json", R"({"kernal": "auto"})");
    EXPECT_NE(error_of([&] { load_profile(dir / "unknown.json", {}); }).find("unknown profile key"),
              std::string::npos);
    test::write_file(dir / "type.json", R"({"threads": "eight"})");
    EXPECT_NE(error_of([&] {
                  load_profile(dir / "type.json", {});
              }).find("--threads: expected an integer in [0, 4096], got \"eight\""),
              std::string::npos);
    // The fast kernels read the checkpoint's experts: a kernel without a store is a valid profile.
    test::write_file(dir / "nostore.json", R"({"kernel": "avx2"})");
    EXPECT_EQ(load_profile(dir / "nostore.json", {}).load.kernel, "avx2");
    EXPECT_NE(error_of([&] { load_profile(dir / "absent.json", {}); }).find("not found"),
              std::string::npos);
}

TEST(BenchProfiles, PrefillAndRamKnobsParseAndAreRangeChecked) {
    const LoadOptions o = apply_profile_flags(
        Json::parse(R"({"kernel": "reference", "store": "s.nstore", "backend": "auto",
                        "prefill_order": "block", "prefill_block": 512,
                        "scratch": 6, "staging_threads": 3, "prefill_cpu_tokens": 0,
                        "prefill_early": 5, "warmup_ram": 2.5, "lock_ram": 1, "release_resident": true})"),
        LoadOptions{}, "p");
    EXPECT_EQ(o.gpu.prefill_order, "block");
    EXPECT_EQ(o.gpu.prefill_block, 512);
    EXPECT_EQ(o.gpu.scratch_slots, 6);
    EXPECT_EQ(o.gpu.staging_threads, 3);
    EXPECT_EQ(o.gpu.prefill_cpu_tokens, 0);
    EXPECT_EQ(o.gpu.prefill_early, 5);
    EXPECT_DOUBLE_EQ(o.warmup_ram_seconds, 2.5);
    EXPECT_EQ(o.lock_ram_bytes, std::uint64_t{1} << 30);
    EXPECT_TRUE(o.release_resident);
    const auto bad = [](const char* json) {
        return error_of([&] { apply_profile_flags(Json::parse(json), LoadOptions{}, "p"); });
    };
    // The schema's messages, as `neural` and neural-server give them, after the profile's name.
    EXPECT_EQ(bad(R"({"prefill_order": "sideways"})"),
              "p: --prefill-order: expected layer, block or token, got \"sideways\"");
    EXPECT_EQ(bad(R"({"prefill_cpu_tokens": 17})"),
              "p: --prefill-cpu-tokens: expected an integer in [0, 16], got \"17\"");
    EXPECT_EQ(bad(R"({"scratch": 0})"), "p: --scratch: expected an integer in [1, 64], got \"0\"");
    EXPECT_EQ(bad(R"({"prefill_early": -1})"),
              "p: --prefill-early: expected an integer in [0, 1024], got \"-1\"");
    EXPECT_EQ(bad(R"({"scratch": 5})"),
              "p: " + options::backend_refusal(*options::find("scratch"), "cpu"));
    LoadOptions cuda;
    cuda.backend = "cuda";
    const auto on_cuda = [&](const char* json) {
        return apply_profile_flags(Json::parse(json), cuda, "p");
    };
    EXPECT_EQ(on_cuda(R"({"kernel": "reference", "kv_ring": 3000})").gpu.kv_ring, 3000);
    LoadOptions ring0 = cuda;
    ring0.gpu.kv_ring = 0;
    EXPECT_EQ(apply_profile_flags(Json::parse(R"({"kernel": "reference", "kv_ring": "auto"})"),
                                  ring0, "p")
                  .gpu.kv_ring,
              -1);
    EXPECT_NE(bad(R"({"kv_ring": "big"})")
                  .find("--kv-ring: expected an integer in [0, 1073741824] or auto"),
              std::string::npos);
    EXPECT_NE(bad(R"({"release_resident": 2})").find("--release-resident: expected 0 or 1"),
              std::string::npos);
    // prefill_fp16: off by default; true/false or 0/1, as the flag's values.
    EXPECT_FALSE(LoadOptions{}.gpu.prefill_fp16);
    EXPECT_TRUE(on_cuda(R"({"prefill_fp16": true})").gpu.prefill_fp16);
    EXPECT_TRUE(on_cuda(R"({"prefill_fp16": 1})").gpu.prefill_fp16);
    EXPECT_NE(bad(R"({"prefill_fp16": "maybe"})").find("--prefill-fp16: expected 0 or 1"),
              std::string::npos);
    // stream_misses: auto by default; true/false, 0/1 or "auto", as the flag's values.
    EXPECT_EQ(LoadOptions{}.gpu.stream_misses, -1);
    EXPECT_EQ(on_cuda(R"({"stream_misses": true})").gpu.stream_misses, 1);
    EXPECT_EQ(on_cuda(R"({"stream_misses": 0})").gpu.stream_misses, 0);
    EXPECT_EQ(on_cuda(R"({"stream_misses": "auto"})").gpu.stream_misses, -1);
    EXPECT_DOUBLE_EQ(on_cuda(R"({"stream_share": 0.3})").gpu.stream_share, 0.3);
    EXPECT_EQ(on_cuda(R"({"prompt_admit": 0})").gpu.prompt_admit, 0);
    EXPECT_NE(
        bad(R"({"stream_misses": [1]})").find("--stream-misses: expected auto, 0 or 1, got [1]"),
        std::string::npos);
    // pin_store: "auto", 0 or 1 (a number or a string, as the flag's values).
    const auto pin = [&](const char* json) { return on_cuda(json).gpu.pin_store; };
    EXPECT_EQ(LoadOptions{}.gpu.pin_store, "auto");
    EXPECT_EQ(pin(R"({"pin_store": 0})"), "0");
    EXPECT_EQ(pin(R"({"pin_store": 1})"), "1");
    EXPECT_EQ(pin(R"({"pin_store": "1"})"), "1");
    EXPECT_EQ(pin(R"({"pin_store": "auto"})"), "auto");
    for (const char* json : {R"({"pin_store": 2})", R"({"pin_store": "yes"})"}) {
        EXPECT_NE(bad(json).find("--pin-store: expected auto, 0 or 1"), std::string::npos) << json;
    }
}

// Every schema row through a profile file, typed as JSON (number, boolean) or as the flag's text:
// the same LoadOptions as the command line's flags.
TEST(BenchProfiles, EveryEngineSettingIsAProfileKey) {
    for (const options::Setting& s : options::settings()) {
        SCOPED_TRACE(s.flag);
        options::Settings text = {{"store", "s.nstore"}, {"backend", "auto"}};
        if (s.key == "warmup_sync") text["warmup_ram"] = "1";
        std::string v;
        Json typed;
        switch (s.type) {
            case options::Type::integer:
                v = std::to_string(static_cast<std::int64_t>(s.max));
                typed = static_cast<std::int64_t>(s.max);
                break;
            case options::Type::real:
                v = options::format_real(s.max / 4);
                typed = s.max / 4;
                break;
            case options::Type::boolean:
                v = "1";
                typed = true;
                break;
            case options::Type::choice:
                v = s.choices.back();
                typed = v;
                break;
            case options::Type::path:
                v = "/x/" + s.key;
                typed = v;
                break;
        }
        text[s.key] = v;
        const LoadOptions want = options::apply(text);
        Json profile = Json::object();
        for (const auto& [k, t] : text) profile[k] = t;
        EXPECT_EQ(options::to_settings(apply_profile_flags(profile, {}, "p"), true),
                  options::to_settings(want, true));
        profile[s.key] = typed;
        EXPECT_EQ(options::to_settings(apply_profile_flags(profile, {}, "p"), true),
                  options::to_settings(want, true));
    }
}

TEST(BenchCli, UnknownWorkloadExitsWithAnError) {
    const auto neural = test::bin_dir() / "neural";
    const std::string cmd =
        fmt::format("\"{}\" bench --model \"{}\" --workload nope --no-probes 2>&1", neural.string(),
                    test::tiny_model_dir().string());
    const int rc = std::system(cmd.c_str());
    EXPECT_NE(rc, 0);
}

TEST(RamProbe, MeasuresAPositiveBandwidth) {
    cpu::ReferenceTeam team(1);
    const ReadBandwidth bw = measure_read_bandwidth(team, std::size_t{2} << 20, 2);
    EXPECT_GT(bw.gb_per_s, 0.0);
    EXPECT_EQ(bw.bytes, std::size_t{2} << 20);
    EXPECT_EQ(bw.threads, 1);
}

}  // namespace
}  // namespace neural::bench
