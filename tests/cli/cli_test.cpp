// End-to-end tests of the `neural` binary: exit codes, messages, and output of its commands on
// the tiny fixture. Every process runs under `timeout`, with stdout/stderr captured to files.

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/fixtures.h"
#include "support/run_neural.h"
#include "support/environment.h"

namespace neural {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

// gtest's own regular expressions are POSIX on Linux but a small subset on Windows (no brackets
// or groups), where these tests run under Wine: the patterns go through std::regex everywhere.
MATCHER_P(ContainsRegex, pattern, std::string("contains regular expression ") + pattern) {
    return std::regex_search(arg, std::regex(pattern));
}
MATCHER_P(MatchesRegex, pattern, std::string("matches regular expression ") + pattern) {
    return std::regex_match(arg, std::regex(pattern));
}

// Seconds one `neural` process may take before it is killed (each takes well under 2 s).
constexpr int kTimeoutSeconds = 30;

using test::Proc;

class Cli : public ::testing::Test {
protected:
    // Runs `neural args...` and captures its output.
    Proc neural(const std::vector<std::string>& args) {
        Proc r = test::run_neural(args, tmp_.path(), kTimeoutSeconds);
        EXPECT_NE(r.code, 124) << "neural timed out after " << kTimeoutSeconds << " s: " << r.cmd;
        return r;
    }

    fs::path write(const std::string& name, const std::string& text) {
        test::write_file(tmp_ / name, text);
        return tmp_ / name;
    }

    static std::string model() { return test::tiny_model_dir().string(); }

    test::TempDir tmp_;
};

// --- main ------------------------------------------------------------------------------------

TEST_F(Cli, HelpExitsZero) {
    for (const char* flag : {"--help", "-h", "help"}) {
        Proc r = neural({flag});
        EXPECT_EQ(r.code, 0) << flag;
        EXPECT_THAT(r.out, StartsWith("usage: neural COMMAND")) << flag;
        EXPECT_THAT(r.out, HasSubstr("generate"));
        EXPECT_THAT(r.out, HasSubstr("logits"));
        EXPECT_THAT(r.out, HasSubstr("tokenize"));
        EXPECT_THAT(r.err, IsEmpty());
    }
}

TEST_F(Cli, NoArgumentsPrintsUsageToStderr) {
    Proc r = neural({});
    EXPECT_EQ(r.code, 2);
    EXPECT_THAT(r.out, IsEmpty());
    EXPECT_THAT(r.err, HasSubstr("usage: neural COMMAND"));
}

TEST_F(Cli, Version) {
    Proc r = neural({"--version"});
    EXPECT_EQ(r.code, 0);
    EXPECT_THAT(r.out, MatchesRegex("neural [0-9]+\\.[0-9]+\\.[0-9]+\n"));
}

TEST_F(Cli, UnknownCommand) {
    Proc r = neural({"frobnicate"});
    EXPECT_NE(r.code, 0);
    EXPECT_EQ(r.code, 2);
    EXPECT_THAT(r.out, IsEmpty());
    EXPECT_THAT(r.err, HasSubstr("unknown command \"frobnicate\""));
    EXPECT_THAT(r.err, HasSubstr("usage: neural COMMAND"));
}

TEST_F(Cli, SubcommandHelp) {
    for (const char* cmd : {"generate", "logits", "tokenize"}) {
        Proc r = neural({cmd, "--help"});
        EXPECT_EQ(r.code, 0) << cmd;
        EXPECT_THAT(r.out, StartsWith(std::string("usage: neural ") + cmd)) << cmd;
    }
}

// --- tokenize --------------------------------------------------------------------------------

TEST_F(Cli, TokenizeAndDecodeRoundTrip) {
    Proc enc = neural({"tokenize", "--model", model(), "Hello world"});
    ASSERT_EQ(enc.code, 0) << enc.err;
    EXPECT_EQ(enc.out, "13225,2375\n");  // o200k_harmony: "Hello", " world"

    Proc dec = neural({"tokenize", "--model", model(), "--decode", "13225,2375"});
    ASSERT_EQ(dec.code, 0) << dec.err;
    EXPECT_EQ(dec.out, "Hello world\n");
}

TEST_F(Cli, TokenizeNonAsciiRoundTrips) {
    const std::string text = "h\xC3\xA9llo \xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x99\x82!";
    Proc enc = neural({"tokenize", "--model", model(), text});
    ASSERT_EQ(enc.code, 0) << enc.err;
    ASSERT_THAT(enc.out, MatchesRegex("[0-9]+(,[0-9]+)*\n"));
    const std::string ids = enc.out.substr(0, enc.out.size() - 1);
    Proc dec = neural({"tokenize", "--model", model(), "--decode=" + ids});
    ASSERT_EQ(dec.code, 0) << dec.err;
    EXPECT_EQ(dec.out, text + "\n");
}

TEST_F(Cli, TokenizeSpecialTokens) {
    Proc special = neural({"tokenize", "--model", model(), "--special", "<|start|>user"});
    ASSERT_EQ(special.code, 0) << special.err;
    EXPECT_EQ(special.out, "200006,1428\n");
    Proc plain = neural({"tokenize", "--model", model(), "<|start|>user"});
    ASSERT_EQ(plain.code, 0) << plain.err;
    EXPECT_THAT(plain.out, Not(HasSubstr("200006")));
}

TEST_F(Cli, TokenizeAcceptsTheTokenizerFile) {
    Proc r = neural({"tokenize", "--model", (test::tiny_model_dir() / "tokenizer.json").string(),
                     "Hello world"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "13225,2375\n");
}

TEST_F(Cli, TokenizeErrors) {
    Proc no_model = neural({"tokenize", "Hello"});
    EXPECT_EQ(no_model.code, 1);
    EXPECT_THAT(no_model.err, HasSubstr("neural tokenize: error: --model DIR is required"));

    Proc unknown = neural({"tokenize", "--model", model(), "--bogus", "x"});
    EXPECT_EQ(unknown.code, 1);
    EXPECT_THAT(unknown.err, HasSubstr("unknown option --bogus (see --help)"));

    Proc bad_ids = neural({"tokenize", "--model", model(), "--decode", "12,x"});
    EXPECT_EQ(bad_ids.code, 1);
    EXPECT_THAT(bad_ids.err, HasSubstr("\"x\" is not an integer"));

    Proc unknown_id = neural({"tokenize", "--model", model(), "--decode", "300000"});
    EXPECT_EQ(unknown_id.code, 1);
    EXPECT_THAT(unknown_id.out, IsEmpty());
    EXPECT_THAT(unknown_id.err, HasSubstr("token id 300000 is not in the tokenizer vocabulary"));

    Proc two = neural({"tokenize", "--model", model(), "a", "b"});
    EXPECT_EQ(two.code, 1);
    EXPECT_THAT(two.err, HasSubstr("expected exactly one TEXT argument"));

    Proc no_value = neural({"tokenize", "--model"});
    EXPECT_EQ(no_value.code, 1);
    EXPECT_THAT(no_value.err, HasSubstr("option --model needs a value"));
}

// --- generate --------------------------------------------------------------------------------

std::vector<std::string> greedy_args(const std::string& model) {
    return {"generate", "--model",       model, "--ids",        "200006,17360", "--max-tokens",
            "8",        "--temperature", "0",   "--ignore-eos", "--show-ids"};
}

TEST_F(Cli, GenerateGreedyIsDeterministic) {
    Proc a = neural(greedy_args(model()));
    ASSERT_EQ(a.code, 0) << a.err;
    Proc b = neural(greedy_args(model()));
    ASSERT_EQ(b.code, 0) << b.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_EQ(a.err, b.err);
    // Eight ids, and the run ended on the token limit.
    EXPECT_THAT(a.err, ContainsRegex("ids: [0-9]+(,[0-9]+){7}\nfinish: length\n"));
    EXPECT_THAT(a.out, testing::EndsWith("\n"));
}

TEST_F(Cli, GenerateGreedyMatchesGolden) {
    // golden.json "single": [200006] continues greedily with these ids.
    Proc r = neural({"generate", "--model", model(), "--ids", "200006", "--max-tokens", "4",
                     "--temperature", "0", "--ignore-eos", "--show-ids"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr("ids: 96596,123955,105915,27261\nfinish: length\n"));
}

TEST_F(Cli, GenerateSeededSamplingIsReproducible) {
    auto args = [&](const std::string& seed) {
        std::vector<std::string> a = greedy_args(model());
        a[8] =
            std::string(1, '1');  // --temperature 1 (a move: GCC 12 -Wrestrict misfires on = "1")
        a.insert(a.end(), {"--seed", seed});
        return a;
    };
    Proc a = neural(args("5"));
    ASSERT_EQ(a.code, 0) << a.err;
    Proc b = neural(args("5"));
    ASSERT_EQ(b.code, 0) << b.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_EQ(a.err, b.err);
    Proc c = neural(args("6"));
    ASSERT_EQ(c.code, 0) << c.err;
    EXPECT_NE(a.err, c.err);  // a different seed gives different tokens
}

using test::set_env;

// The "ids: ..." line of a generate run's stderr.
std::string ids_line(const std::string& err) {
    std::smatch m;
    return std::regex_search(err, m, std::regex("ids: [0-9,]+")) ? m.str() : "";
}

// Issue 49, "Reproducible by seed", in separate processes: a process run as on a CPU without
// AVX-512 (NEURAL_CPU_DISABLE, so its expert, dense, attention and sampler kernels are all the
// AVX2 ones) gives the plain run's sampled reply and logits (docs/KERNELS.md "Every variant the
// same bits"). On a CPU without AVX-512 both runs take AVX2 and the test says so.
TEST_F(Cli, ACpuWithoutAvx512GivesTheSameSeededReplyAndLogits) {
    std::vector<std::string> gen = greedy_args(model());
    gen[6] = std::to_string(24);   // --max-tokens
    gen[8] = std::string(1, '1');  // --temperature 1 (a move: GCC 12 -Wrestrict misfires)
    gen.insert(gen.end(), {"--seed", "7"});
    const fs::path prompts = write("prompts.json", R"({"p": [200006, 17360, 27, 3575, 553]})");
    auto run = [&](const char* disable, const std::string& tag) {
        set_env("NEURAL_CPU_DISABLE", disable);
        Proc g = neural(gen);
        const fs::path out = tmp_ / ("logits-" + tag + ".json");
        Proc l = neural({"logits", model(), prompts.string(), out.string(), "--steps", "4"});
        set_env("NEURAL_CPU_DISABLE", nullptr);
        EXPECT_EQ(g.code, 0) << g.err;
        EXPECT_EQ(l.code, 0) << l.err;
        return std::pair{ids_line(g.err), l.code == 0 ? test::read_json(out)["prompts"] : json()};
    };
    const auto [plain_ids, plain_logits] = run(nullptr, "plain");
    const auto [avx2_ids, avx2_logits] = run("avx512", "avx2");
    std::printf(
        "seeded reply compared across processes: the best variant of this CPU and one "
        "run with NEURAL_CPU_DISABLE=avx512\n%s\n",
        plain_ids.c_str());
    ASSERT_THAT(plain_ids, MatchesRegex("ids: [0-9]+(,[0-9]+){23}"));
    EXPECT_EQ(avx2_ids, plain_ids);
    EXPECT_EQ(avx2_logits, plain_logits);
}

TEST_F(Cli, MemoryHintsDoNotChangeTheResult) {
    Proc plain = neural(greedy_args(model()));
    ASSERT_EQ(plain.code, 0) << plain.err;
    std::vector<std::string> args = greedy_args(model());
    args.insert(args.end(), {"--ws-min", "0.004", "--prefetch", "all"});
    Proc hinted = neural(args);
    ASSERT_EQ(hinted.code, 0) << hinted.err;
    EXPECT_EQ(hinted.out, plain.out);
    // A locked-memory limit below 4 MiB (a sandbox) may add a "--ws-min: ..." warning line.
    std::string err;
    std::istringstream lines(hinted.err);
    for (std::string line; std::getline(lines, line);) {
        if (line.find("--ws-min: ") == std::string::npos) err += line + "\n";
    }
    EXPECT_EQ(err, plain.err);
}

TEST_F(Cli, MemoryHintErrors) {
    std::vector<std::string> args = greedy_args(model());
    args.insert(args.end(), {"--ws-min", "-1"});
    Proc r = neural(args);
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("--ws-min: expected GiB in [0, 65536]"));
    args = greedy_args(model());
    args.insert(args.end(), {"--prefetch", "some"});
    r = neural(args);
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("--prefetch: expected none, dense or all, got \"some\""));
}

// --- RAM residency levers (--warmup-ram, --warmup-sync, --lock-ram, --release-resident) ---------

TEST_F(Cli, RamLeversDoNotChangeTheResult) {
    Proc rp = neural({"repack", "--checkpoint", model(), "--out", (tmp_ / "s.nstore").string(),
                      "--format", "raw"});
    ASSERT_EQ(rp.code, 0) << rp.err;
    std::vector<std::string> base = greedy_args(model());
    base.insert(base.end(), {"--store", (tmp_ / "s.nstore").string()});
    Proc plain = neural(base);
    ASSERT_EQ(plain.code, 0) << plain.err;
    // A ranking for the tiny model (4 layers x 8 experts) orders the warm-up and the lock on the
    // CPU backend too.
    const fs::path ranking = write(
        "hot.json",
        R"({"layers": [[1,2,3,4,5,6,7,8],[8,7,6,5,4,3,2,1],[0,0,0,0,0,0,0,9],[1,1,1,1,1,1,1,1]],
            "tokens": 10, "source": "test"})");
    for (const std::vector<std::string>& levers :
         {std::vector<std::string>{"--warmup-ram", "10", "--warmup-sync", "1"},
          std::vector<std::string>{"--warmup-ram", "10", "--ranking", ranking.string()},
          std::vector<std::string>{"--lock-ram", "0.0001", "--warmup-ram", "5", "--warmup-sync",
                                   "1", "--ranking", ranking.string()}}) {
        std::vector<std::string> args = base;
        args.insert(args.end(), levers.begin(), levers.end());
        Proc r = neural(args);
        ASSERT_EQ(r.code, 0) << r.cmd << "\n" << r.err;
        EXPECT_EQ(r.out, plain.out) << r.cmd;
        // A sandbox without locked memory may add a "--lock-ram: ..." warning line.
        std::string err;
        std::istringstream lines(r.err);
        for (std::string line; std::getline(lines, line);) {
            if (line.find("--lock-ram: ") == std::string::npos) err += line + "\n";
        }
        EXPECT_EQ(err, plain.err) << r.cmd;
    }
    // On the CPU backend nothing lives in VRAM: --release-resident is refused, bare or 0|1.
    for (const std::vector<std::string>& rel_flags :
         {std::vector<std::string>{"--release-resident", "1"},
          std::vector<std::string>{"--release-resident"}}) {
        std::vector<std::string> args = base;
        args.insert(args.end(), rel_flags.begin(), rel_flags.end());
        Proc rel = neural(args);
        EXPECT_EQ(rel.code, 1) << rel.err;
        EXPECT_THAT(rel.err, HasSubstr("--release-resident needs --backend cuda (or auto)"));
    }
}

TEST_F(Cli, RamLeverErrors) {
    const std::string store = (tmp_ / "none.nstore").string();
    auto run = [&](std::vector<std::string> extra) {
        std::vector<std::string> args = greedy_args(model());
        args.insert(args.end(), extra.begin(), extra.end());
        return neural(args);
    };
    Proc r = run({"--warmup-ram", "5"});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("they need --store FILE"));
    r = run({"--backend", "auto", "--release-resident", "1"});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("they need --store FILE"));
    r = run({"--store", store, "--warmup-ram", "-2"});  // -1 is auto, as for the other rows
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("--warmup-ram: expected seconds in [0, 86400]"));
    EXPECT_THAT(r.err, HasSubstr("got \"-2\""));
    r = run({"--store", store, "--warmup-ram", "soon"});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("--warmup-ram"));
    r = run({"--store", store, "--lock-ram", "1e9"});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("--lock-ram: expected GiB in [0, 65536]"));
    r = run({"--store", store, "--backend", "auto", "--release-resident=2"});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("--release-resident"));
    r = run({"--store", store, "--warmup-ram", "0", "--warmup-sync", "1"});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("--warmup-sync needs a warm-up to wait for"));
    // --ranking stays a GPU flag unless a RAM lever uses its order.
    r = run({"--ranking", "hot.json"});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("--ranking needs --backend cuda"));
    // Flags are checked before the store is opened; then the missing store is the error.
    r = run({"--store", store, "--warmup-ram", "1", "--ranking", "missing.json"});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("none.nstore"));
}

TEST_F(Cli, GeneratePromptText) {
    Proc r = neural({"generate", "--model", model(), "--prompt", "Hello world", "--max-tokens", "3",
                     "--temperature", "0", "--show-ids"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_THAT(r.err, ContainsRegex("ids: [0-9]+(,[0-9]+){0,2}\nfinish: (length|stop)\n"));
}

TEST_F(Cli, GenerateMissingModel) {
    Proc r = neural({"generate", "--ids", "1,2"});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.out, IsEmpty());
    EXPECT_THAT(r.err, HasSubstr("neural generate: error: --model DIR is required"));
}

TEST_F(Cli, GenerateBadTopP) {
    Proc zero = neural({"generate", "--model", model(), "--ids", "1", "--top-p", "0"});
    EXPECT_EQ(zero.code, 1);
    EXPECT_THAT(zero.err, HasSubstr("top_p must be in (0, 1], got 0"));

    Proc big = neural({"generate", "--model", model(), "--ids", "1", "--top-p", "1.5"});
    EXPECT_EQ(big.code, 1);
    EXPECT_THAT(big.err, HasSubstr("top_p must be in (0, 1], got 1.5"));

    Proc text = neural({"generate", "--model", model(), "--ids", "1", "--top-p", "abc"});
    EXPECT_EQ(text.code, 1);
    EXPECT_THAT(text.err, HasSubstr("--top-p: \"abc\" is not a number"));
}

TEST_F(Cli, GenerateOtherArgumentErrors) {
    Proc both = neural({"generate", "--model", model(), "--ids", "1", "--prompt", "hi"});
    EXPECT_EQ(both.code, 1);
    EXPECT_THAT(both.err, HasSubstr("give exactly one of --prompt and --ids"));

    Proc neither = neural({"generate", "--model", model()});
    EXPECT_EQ(neither.code, 1);
    EXPECT_THAT(neither.err, HasSubstr("give exactly one of --prompt and --ids"));

    Proc temp = neural({"generate", "--model", model(), "--ids", "1", "--temperature", "-1"});
    EXPECT_EQ(temp.code, 1);
    EXPECT_THAT(temp.err, HasSubstr("temperature must be a finite number >= 0, got -1"));

    Proc tokens = neural({"generate", "--model", model(), "--ids", "1", "--max-tokens", "-3"});
    EXPECT_EQ(tokens.code, 1);
    EXPECT_THAT(tokens.err, HasSubstr("--max-tokens must be between 0 and"));

    Proc ids = neural({"generate", "--model", model(), "--ids", "1,,2"});
    EXPECT_EQ(ids.code, 1);
    EXPECT_THAT(ids.err, HasSubstr("token id list: \"\" is not an integer"));

    Proc vocab = neural({"generate", "--model", model(), "--ids", "200500"});
    EXPECT_EQ(vocab.code, 1);
    EXPECT_THAT(vocab.err, HasSubstr("token id 200500 is not in the tokenizer's vocabulary"));

    Proc extra = neural({"generate", "--model", model(), "--ids", "1", "stray"});
    EXPECT_EQ(extra.code, 1);
    EXPECT_THAT(extra.err, HasSubstr("unexpected argument \"stray\""));

    Proc dir = neural({"generate", "--model", (tmp_ / "nope").string(), "--ids", "1"});
    EXPECT_EQ(dir.code, 1);
    EXPECT_THAT(dir.err, HasSubstr("model folder not found"));
}

// --- logits ----------------------------------------------------------------------------------

TEST_F(Cli, LogitsWritesTheGoldenSchema) {
    const fs::path prompts = write("prompts.json", R"({"p": [200006, 17360, 27]})");
    const fs::path out = tmp_ / "out.json";
    Proc r = neural({"logits", model(), prompts.string(), out.string(), "--steps", "4"});
    ASSERT_EQ(r.code, 0) << r.err;
    const json j = test::read_json(out);

    ASSERT_TRUE(j.contains("source"));
    EXPECT_THAT(j["source"].get<std::string>(), HasSubstr("neural"));
    const json golden = test::read_json(test::tiny_model_dir() / "golden.json");
    EXPECT_EQ(j["probe_ids"], golden["probe_ids"]);
    ASSERT_TRUE(j["prompts"].is_object());
    ASSERT_EQ(j["prompts"].size(), 1u);
    ASSERT_TRUE(j["prompts"].contains("p"));
    const json& p = j["prompts"]["p"];
    for (const char* key : {"ids", "argmax", "top8_ids", "top8_logits", "logsumexp", "probe_logits",
                            "router", "greedy", "greedy_margins"}) {
        EXPECT_TRUE(p.contains(key)) << key;
    }
    EXPECT_EQ(p["ids"], json({200006, 17360, 27}));
    ASSERT_EQ(p["argmax"].size(), 3u);
    ASSERT_EQ(p["top8_ids"].size(), 3u);
    ASSERT_EQ(p["top8_logits"].size(), 3u);
    ASSERT_EQ(p["logsumexp"].size(), 3u);
    ASSERT_EQ(p["probe_logits"].size(), 3u);
    for (size_t t = 0; t < 3; ++t) {
        ASSERT_EQ(p["top8_ids"][t].size(), 8u);
        ASSERT_EQ(p["top8_logits"][t].size(), 8u);
        EXPECT_EQ(p["probe_logits"][t].size(), 20u);
        EXPECT_EQ(p["argmax"][t], p["top8_ids"][t][0]);
        for (size_t k = 1; k < 8; ++k) {
            EXPECT_GE(p["top8_logits"][t][k - 1].get<double>(),
                      p["top8_logits"][t][k].get<double>());
        }
        EXPECT_GT(p["logsumexp"][t].get<double>(), p["top8_logits"][t][0].get<double>());
    }
    ASSERT_TRUE(p["router"].is_array());
    ASSERT_EQ(p["router"].size(), 4u);  // layers
    for (const auto& layer : p["router"]) {
        ASSERT_TRUE(layer.contains("experts"));
        ASSERT_TRUE(layer.contains("weights"));
        ASSERT_EQ(layer["experts"].size(), 3u);  // positions
        ASSERT_EQ(layer["weights"].size(), 3u);
        for (size_t t = 0; t < 3; ++t) {
            ASSERT_EQ(layer["experts"][t].size(), 4u);  // top-4
            ASSERT_EQ(layer["weights"][t].size(), 4u);
            double sum = 0;
            for (const auto& e : layer["experts"][t]) {
                EXPECT_GE(e.get<int>(), 0);
                EXPECT_LT(e.get<int>(), 8);
            }
            for (const auto& w : layer["weights"][t]) sum += w.get<double>();
            EXPECT_NEAR(sum, 1.0, 1e-5);
        }
    }
    ASSERT_EQ(p["greedy"].size(), 4u);
    ASSERT_EQ(p["greedy_margins"].size(), 4u);
    // The first greedy token is the last position's argmax, with the top-2 gap as margin.
    EXPECT_EQ(p["greedy"][0], p["argmax"][2]);
    EXPECT_NEAR(p["greedy_margins"][0].get<double>(),
                p["top8_logits"][2][0].get<double>() - p["top8_logits"][2][1].get<double>(), 1e-6);
    for (const auto& m : p["greedy_margins"]) EXPECT_GE(m.get<double>(), 0.0);
}

TEST_F(Cli, LogitsMatchGoldenPrefix) {
    // Causal attention: the first three positions of golden "chat" depend only on its first
    // three ids, so a 3-token prompt reproduces them.
    const json golden = test::read_json(test::tiny_model_dir() / "golden.json");
    const json& g = golden["prompts"]["chat"];
    json prompts;
    prompts["chat3"] = {g["ids"][0], g["ids"][1], g["ids"][2]};
    const fs::path in = write("prompts.json", prompts.dump());
    // The default path (int8 lm_head: docs/KERNELS.md "Int8 dense weights") within the fast
    // path's golden tolerance, 5e-2; the bf16 dense kernels within 1e-3, checked in full below.
    const fs::path fast_out = tmp_ / "fast.json";
    Proc fast = neural({"logits", model(), in.string(), fast_out.string()});
    ASSERT_EQ(fast.code, 0) << fast.err;
    const json f = test::read_json(fast_out)["prompts"]["chat3"];
    for (size_t t = 0; t < 3; ++t) {
        EXPECT_EQ(f["argmax"][t], g["argmax"][t]) << t;
        for (size_t k = 0; k < 20; ++k) {
            EXPECT_NEAR(f["probe_logits"][t][k].get<double>(),
                        g["probe_logits"][t][k].get<double>(), 5e-2);
        }
    }
    const fs::path out = tmp_ / "out.json";
    Proc r = neural({"logits", model(), in.string(), out.string(), "--dense", "bf16"});
    ASSERT_EQ(r.code, 0) << r.err;
    const json p = test::read_json(out)["prompts"]["chat3"];
    EXPECT_FALSE(p.contains("greedy"));  // no --steps
    for (size_t t = 0; t < 3; ++t) {
        EXPECT_EQ(p["argmax"][t], g["argmax"][t]) << t;
        EXPECT_EQ(p["top8_ids"][t], g["top8_ids"][t]) << t;
        for (size_t k = 0; k < 8; ++k) {
            EXPECT_NEAR(p["top8_logits"][t][k].get<double>(), g["top8_logits"][t][k].get<double>(),
                        1e-3);
        }
        EXPECT_NEAR(p["logsumexp"][t].get<double>(), g["logsumexp"][t].get<double>(), 1e-3);
        for (size_t k = 0; k < 20; ++k) {
            EXPECT_NEAR(p["probe_logits"][t][k].get<double>(),
                        g["probe_logits"][t][k].get<double>(), 1e-3);
        }
        for (size_t l = 0; l < 4; ++l) {
            EXPECT_EQ(p["router"][l]["experts"][t], g["router"][l]["experts"][t]) << l << "," << t;
            for (size_t k = 0; k < 4; ++k) {
                EXPECT_NEAR(p["router"][l]["weights"][t][k].get<double>(),
                            g["router"][l]["weights"][t][k].get<double>(), 1e-4);
            }
        }
    }
}

TEST_F(Cli, LogitsTokenOutOfRange) {
    const fs::path in = write("prompts.json", R"({"p": [200006, 201088]})");
    Proc r = neural({"logits", model(), in.string(), (tmp_ / "out.json").string()});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("token id 201088 is outside the model's vocabulary (0..201087)"));

    const fs::path neg = write("neg.json", R"({"p": [-1]})");
    Proc n = neural({"logits", model(), neg.string(), (tmp_ / "out.json").string()});
    EXPECT_EQ(n.code, 1);
    EXPECT_THAT(n.err, HasSubstr("outside the model's vocabulary"));
}

// An id that does not fit in int32 is refused: narrowed (2^32 + 5 would become token 5), the
// command would succeed with logits for the wrong prompt.
TEST_F(Cli, LogitsIdPastInt32IsRejected) {
    const fs::path in = write("prompts.json", R"({"p": [4294967301]})");
    Proc r = neural({"logits", model(), in.string(), (tmp_ / "out.json").string()});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("4294967301"));
}

TEST_F(Cli, LogitsInvalidPromptsJson) {
    const fs::path in = write("prompts.json", R"({"p": [1, 2)");
    Proc r = neural({"logits", model(), in.string(), (tmp_ / "out.json").string()});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr(in.string() + ": invalid JSON"));
    EXPECT_FALSE(fs::exists(tmp_ / "out.json"));
}

TEST_F(Cli, LogitsPromptFileErrors) {
    const fs::path out = tmp_ / "out.json";
    const fs::path arr = write("arr.json", "[1, 2, 3]");
    Proc a = neural({"logits", model(), arr.string(), out.string()});
    EXPECT_EQ(a.code, 1);
    EXPECT_THAT(a.err, HasSubstr("expected an object {name: [token ids]}"));

    const fs::path empty = write("empty.json", R"({"p": []})");
    Proc e = neural({"logits", model(), empty.string(), out.string()});
    EXPECT_EQ(e.code, 1);
    EXPECT_THAT(e.err, HasSubstr("prompt \"p\" must be a non-empty array of token ids"));

    const fs::path text = write("text.json", R"({"p": [1, "two"]})");
    Proc t = neural({"logits", model(), text.string(), out.string()});
    EXPECT_EQ(t.code, 1);
    EXPECT_THAT(t.err, HasSubstr("prompt \"p\" holds a non-integer id"));

    Proc missing = neural({"logits", model(), (tmp_ / "absent.json").string(), out.string()});
    EXPECT_EQ(missing.code, 1);
    EXPECT_THAT(missing.err, HasSubstr("cannot read prompts file"));
}

TEST_F(Cli, LogitsArgumentErrors) {
    const fs::path in = write("prompts.json", R"({"p": [1]})");
    Proc two = neural({"logits", model(), in.string()});
    EXPECT_EQ(two.code, 1);
    EXPECT_THAT(two.err, HasSubstr("expected MODEL_DIR PROMPTS.json OUT.json"));

    // A number beyond double's range is an error, not std::terminate.
    Proc huge = neural({"logits", model(), write("huge.json", R"({"p": [1e999]})").string(),
                        (tmp_ / "o.json").string()});
    EXPECT_EQ(huge.code, 1);
    EXPECT_THAT(huge.err, HasSubstr("invalid JSON"));

    Proc unknown =
        neural({"logits", model(), in.string(), (tmp_ / "o.json").string(), "--backend", "gpu"});
    EXPECT_EQ(unknown.code, 1);
    EXPECT_THAT(unknown.err, HasSubstr("--backend: expected cpu, cuda or auto, got \"gpu\""));

    // Without a GPU (or a CUDA build) asking for the GPU is a clear error naming the backend;
    // with one, it runs (tests/cuda checks its results).
    Proc backend =
        neural({"logits", model(), in.string(), (tmp_ / "o.json").string(), "--backend", "cuda"});
    if (backend.code != 0) {
        EXPECT_EQ(backend.code, 1);
        EXPECT_THAT(backend.err, HasSubstr("backend \"cuda\""));
    }
    Proc cpu_knob =
        neural({"logits", model(), in.string(), (tmp_ / "o.json").string(), "--pool", "2"});
    EXPECT_EQ(cpu_knob.code, 1);
    EXPECT_THAT(cpu_knob.err, HasSubstr("--pool needs --backend cuda"));
    // The prefill and checkpoint knobs are range-checked and GPU-only too.
    for (const auto& [flag, value, message] :
         {std::tuple{"--prefill-order", "sideways",
                     "--prefill-order: expected layer, block or token, got \"sideways\""},
          std::tuple{"--prefill-cpu-tokens", "17", "--prefill-cpu-tokens"},
          std::tuple{"--prefill-early", "1025", "--prefill-early"},
          std::tuple{"--kv-ring", "-2",
                     "--kv-ring: expected an integer in [0, 1073741824] or auto, got \"-2\""},
          std::tuple{"--kv-checkpoints", "-1",
                     "--kv-checkpoints: expected GiB in [0, 4096], got \"-1\""},
          std::tuple{"--static-fraction", "1.5",
                     "--static-fraction: expected a fraction in [0, 1]"},
          std::tuple{"--pin-store", "2", "--pin-store: expected auto, 0 or 1, got \"2\""},
          std::tuple{"--pin-store", "yes", "--pin-store: expected auto, 0 or 1, got \"yes\""},
          std::tuple{"--pin-store", "1", "--pin-store needs --backend cuda"},
          std::tuple{"--prefill-fp16", "2", "--prefill-fp16"},
          std::tuple{"--expert-streams", "3", "--expert-streams"},
          std::tuple{"--stream-misses", "2", "--stream-misses"},
          std::tuple{"--stream-misses", "1", "--stream-misses needs --backend cuda"},
          std::tuple{"--stream-share", "1.5",
                     "--stream-share: expected a fraction in [0, 1] or auto"},
          std::tuple{"--stream-share", "0.3", "--stream-share needs --backend cuda"},
          std::tuple{"--prompt-admit", "-1", "--prompt-admit"},
          std::tuple{"--prefill-fp16", "1", "--prefill-fp16 needs --backend cuda"},
          std::tuple{"--scratch", "2", "--scratch needs --backend cuda"}}) {
        Proc bad =
            neural({"logits", model(), in.string(), (tmp_ / "o.json").string(), flag, value});
        EXPECT_EQ(bad.code, 1) << flag;
        EXPECT_THAT(bad.err, HasSubstr(message)) << flag;
    }
    // --pin-store's values are accepted (--backend auto: the CPU where no GPU is usable; the
    // fixture has no store, so nothing is pinned either way).
    for (const char* pin : {"auto", "0", "1"}) {
        Proc ok = neural({"logits", model(), in.string(), (tmp_ / "o.json").string(), "--backend",
                          "auto", "--pin-store", pin});
        EXPECT_EQ(ok.code, 0) << pin << ": " << ok.err;
    }

    Proc steps =
        neural({"logits", model(), in.string(), (tmp_ / "o.json").string(), "--steps", "many"});
    EXPECT_EQ(steps.code, 1);
    EXPECT_THAT(steps.err, HasSubstr("--steps: \"many\" is not an integer"));
}

}  // namespace
}  // namespace neural

namespace neural {
namespace {

TEST_F(Cli, FitPlansForThisMachineAndWritesJson) {
    const fs::path out = tmp_ / "plan.json";
    Proc p = neural({"fit", "--model", model(), "--json", out.string()});
    EXPECT_EQ(p.code, 0) << p.err;
    EXPECT_THAT(p.out, HasSubstr("machine: "));
    EXPECT_THAT(p.out, HasSubstr("plan:"));
    EXPECT_THAT(p.out, HasSubstr("flags: --backend "));
    const auto j = test::read_json(out);
    EXPECT_TRUE(j["backend"] == "cpu" || j["backend"] == "cuda");
    EXPECT_GE(j["threads"].get<int>(), 1);
    EXPECT_TRUE(j["reasons"].is_array());

    Proc bad = neural({"fit", "--model", model(), "--vram-budget", "-3"});
    EXPECT_EQ(bad.code, 1);
    // --vram-budget is the settings schema's row: its range and message, as the engine's.
    EXPECT_THAT(bad.err, HasSubstr("--vram-budget: expected GiB in [0, 4096]"));
    Proc huge = neural({"fit", "--model", model(), "--vram-budget", "5000"});
    EXPECT_EQ(huge.code, 1);
    EXPECT_THAT(huge.err, HasSubstr("--vram-budget: expected GiB in [0, 4096], got \"5000\""));
    Proc help = neural({"fit", "--help"});
    EXPECT_EQ(help.code, 0);
    EXPECT_THAT(help.out, HasSubstr("--vram-budget GIB"));
    EXPECT_THAT(help.out, HasSubstr("cap on all GPU memory the engine uses"));
    Proc missing = neural({"fit"});
    EXPECT_EQ(missing.code, 1);
    EXPECT_THAT(missing.err, HasSubstr("--model DIR is required"));
    Proc tiny_ram = neural({"fit", "--model", model(), "--ram-budget", "0.5"});
    EXPECT_EQ(tiny_ram.code, 3) << "a plan that does not fit exits 3";
    EXPECT_THAT(tiny_ram.out, HasSubstr("GB more RAM"));
}

}  // namespace
}  // namespace neural

namespace neural {
namespace {

// The flags `neural fit` prints are the settings schema's: `neural generate` takes them as they
// are (neural-server's and the desktop's side: server_process_test.cpp, gui profile_test.cpp).
TEST_F(Cli, FitFlagsAreAcceptedByTheEngineCommands) {
    Proc fit = neural({"fit", "--model", model()});
    ASSERT_EQ(fit.code, 0) << fit.err;
    const auto at = fit.out.find("flags: ");
    ASSERT_NE(at, std::string::npos) << fit.out;
    std::string line = fit.out.substr(at + 7, fit.out.find('\n', at) - at - 7);
    line = line.substr(0, line.find("  ("));  // the note on a store to make
    std::vector<std::string> args = greedy_args(model());
    std::istringstream words(line);
    std::vector<std::string> flags;
    for (std::string w; words >> w;) flags.push_back(w);
    ASSERT_GE(flags.size(), 2u);
    EXPECT_EQ(flags[0], "--backend");
    args.insert(args.end(), flags.begin(), flags.end());
    Proc r = neural(args);
    EXPECT_EQ(r.code, 0) << r.cmd << "\n" << r.err;
}

TEST_F(Cli, RankWritesARankingTheGpuBackendReads) {
    const fs::path text = write("warmup.txt", "Hello there.\n\nWrite a haiku about rain.\n");
    const fs::path out = tmp_ / "ranking.json";
    Proc p = neural({"rank", "--model", model(), "--out", out.string(), "--text", text.string(),
                     "--decode", "2"});
    EXPECT_EQ(p.code, 0) << p.err;
    EXPECT_THAT(p.err, HasSubstr("chat 2/2"));
    const auto j = test::read_json(out);
    ASSERT_EQ(j["layers"].size(), 4u);
    double total = 0;
    for (double v : j["layers"][0]) total += v;
    EXPECT_DOUBLE_EQ(total, 4.0 * j["tokens"].get<double>());  // top-4 per token

    Proc empty = neural({"rank", "--model", model(), "--out", out.string(), "--text",
                         write("empty.txt", "\n\n").string()});
    EXPECT_EQ(empty.code, 1);
    EXPECT_THAT(empty.err, HasSubstr("holds no message"));
    Proc no_out = neural({"rank", "--model", model(), "--routing-stats", "off"});
    EXPECT_EQ(no_out.code, 1);
    EXPECT_THAT(no_out.err, HasSubstr("--out FILE"));
}

// Without --out, rank seeds the statistics the engine learns in (--routing-stats auto: here the
// tests' folder), --show prints them, and a front end (generate) learns on from there and logs
// what it read.
TEST_F(Cli, RankSeedsTheLearnedStatisticsAndShowPrintsThem) {
    const fs::path text = write("warmup.txt", "Hello there.\n");
    Proc p = neural({"rank", "--model", model(), "--text", text.string(), "--decode", "1"});
    ASSERT_EQ(p.code, 0) << p.err;
    const std::string wrote = p.out.substr(p.out.find("wrote ") + 6);
    const fs::path file = wrote.substr(0, wrote.find(": "));  // "C:\\..." on Windows
    const auto j = test::read_json(file);
    EXPECT_EQ(j["format"], "neural-routing-stats");
    const std::int64_t seeded = j["tokens"].get<std::int64_t>();
    EXPECT_GT(seeded, 0);
    EXPECT_THAT(j["source"].get<std::string>(), HasSubstr("neural rank"));

    Proc show = neural({"rank", "--show", "--model", model()});
    ASSERT_EQ(show.code, 0) << show.err;
    EXPECT_THAT(show.out, HasSubstr(file.string()));
    EXPECT_THAT(show.out, HasSubstr(std::to_string(seeded) + " learned"));
    EXPECT_THAT(show.out, HasSubstr("UTC"));
    EXPECT_THAT(show.out, HasSubstr(j["model"].get<std::string>() + " (model "));
    EXPECT_THAT(show.out, HasSubstr("layer  3:"));

    // generate learns on from the seeded file (through Model::forward, like chat and the server).
#ifdef _WIN32
    _putenv_s("NEURAL_LOG", "info");
#else
    setenv("NEURAL_LOG", "info", 1);
#endif
    Proc g = neural(greedy_args(model()));
#ifdef _WIN32
    _putenv_s("NEURAL_LOG", "");
#else
    unsetenv("NEURAL_LOG");
#endif
    ASSERT_EQ(g.code, 0) << g.err;
    EXPECT_THAT(g.err, HasSubstr("expert statistics: " + std::to_string(seeded) +
                                 " tokens learned, last updated "));
    EXPECT_GT(test::read_json(file)["tokens"].get<std::int64_t>(), seeded);

    // A ranking file in the old format shows as statistics of no model.
    const fs::path old = write("old.json", R"({"layers": [[1, 2], [3, 4]], "tokens": 9})");
    Proc o = neural({"rank", "--show", old.string()});
    ASSERT_EQ(o.code, 0) << o.err;
    EXPECT_THAT(o.out, HasSubstr("unknown (a ranking file)"));
    EXPECT_THAT(o.out, HasSubstr("9 learned"));
    Proc bad = neural({"rank", "--show", write("bad.json", "{").string()});
    EXPECT_EQ(bad.code, 1);
    EXPECT_THAT(bad.err, HasSubstr("bad.json"));
}

}  // namespace
}  // namespace neural
