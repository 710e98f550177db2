#include "bench/bench.h"

#include <cstdlib>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "bench/ram_probe.h"
#include "cpu/team/worker_team.h"
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
         {"wall", "cpu_kernel", "gpu_wait", "graph_submit", "admission", "other"}) {
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
    const Json& w = report["runs"][0]["workloads"];
    for (const char* name : {"decode", "prompt_40", "prompt_120", "replay"}) {
        ASSERT_TRUE(w.contains(name)) << name;
        expect_workload_schema(w[name]);
    }
    EXPECT_EQ(w["decode"]["requests"][0]["cached_tokens"], 0);
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
    EXPECT_NE(error_of([&] { load_profile(dir / "type.json", {}); }).find("\"threads\" must be"),
              std::string::npos);
    test::write_file(dir / "nostore.json", R"({"kernel": "auto"})");
    EXPECT_NE(error_of([&] { load_profile(dir / "nostore.json", {}); }).find("needs a store"),
              std::string::npos);
    EXPECT_NE(error_of([&] { load_profile(dir / "absent.json", {}); }).find("not found"),
              std::string::npos);
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
