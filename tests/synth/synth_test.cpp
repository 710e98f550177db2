// neural synth: plans of the real shapes (sizes, names, shards) and tiny checkpoints written to a
// temporary folder, loaded back and run. Never writes the 20b/120b shapes.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cpu/reference_model.h"
#include "model/safetensors.h"
#include "neural/error.h"
#include "runtime/model.h"
#include "support/fixtures.h"
#include "synth/synth.h"

#ifndef _WIN32
#include <sys/wait.h>
#endif

namespace neural {
namespace {

using test::error_of;

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::HasSubstr;

fs::path fixture_tokenizer() { return test::tiny_model_dir() / "tokenizer.json"; }

synth::Plan tiny_plan(std::uint64_t seed = 0, double skew = 0.0) {
    synth::Options o;
    o.shape = synth::shape_named("tiny");
    o.seed = seed;
    o.router_skew = skew;
    return synth::make_plan(o);
}

synth::WriteResult write_tiny(const fs::path& dir, std::uint64_t seed = 0, double skew = 0.0,
                              int threads = 2) {
    synth::WriteOptions w;
    w.threads = threads;
    w.tokenizer = fixture_tokenizer();
    return synth::write_checkpoint(tiny_plan(seed, skew), dir, w);
}

std::vector<std::string> file_names(const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

// --- plans of the real shapes ---------------------------------------------------------------

void expect_real_plan(const std::string& shape, std::size_t tensors, std::uint64_t bytes,
                      int shards, int experts, int layers) {
    synth::Options o;
    o.shape = synth::shape_named(shape);
    const synth::Plan p = synth::make_plan(o);
    EXPECT_EQ(p.tensors.size(), tensors);
    EXPECT_EQ(p.tensor_bytes, bytes);
    EXPECT_TRUE(p.indexed);
    ASSERT_EQ(p.shards.size(), static_cast<std::size_t>(shards));
    std::set<std::string> names;
    std::size_t in_shards = 0;
    for (int i = 0; i < shards; ++i) {
        const auto& s = p.shards[i];
        EXPECT_EQ(s.file_name, fmt::format("model-{:05d}-of-{:05d}.safetensors", i, shards - 1));
        EXPECT_LE(s.data_bytes, 4'800'000'000ull) << s.file_name;
        EXPECT_EQ(s.header.size() % 8, 0u);
        // The data area is exactly the shard's tensors, back to back.
        std::uint64_t off = 0;
        for (std::size_t t : s.tensors) {
            EXPECT_EQ(p.tensors[t].shard, i);
            EXPECT_EQ(p.tensors[t].offset, off);
            off += p.tensors[t].nbytes;
        }
        EXPECT_EQ(off, s.data_bytes);
        in_shards += s.tensors.size();
    }
    EXPECT_EQ(in_shards, tensors);
    for (const auto& t : p.tensors) names.insert(t.name);
    EXPECT_EQ(names.size(), tensors) << "tensor names are unique";

    const json index = json::parse(p.index_json);
    EXPECT_EQ(index["metadata"]["total_size"].get<std::uint64_t>(), bytes);
    EXPECT_EQ(index["weight_map"].size(), tensors);
    EXPECT_EQ(index["weight_map"]["model.embed_tokens.weight"],
              fmt::format("model-00000-of-{:05d}.safetensors", shards - 1));

    const std::int64_t E = experts;
    const std::string last = fmt::format("model.layers.{}.", layers - 1);
    struct Want {
        std::string name;
        DType dtype;
        std::vector<std::int64_t> shape;
    };
    const std::vector<Want> want = {
        {"model.embed_tokens.weight", DType::kBF16, {201088, 2880}},
        {"lm_head.weight", DType::kBF16, {201088, 2880}},
        {"model.norm.weight", DType::kBF16, {2880}},
        {last + "self_attn.q_proj.weight", DType::kBF16, {4096, 2880}},
        {last + "self_attn.k_proj.bias", DType::kBF16, {512}},
        {last + "self_attn.o_proj.weight", DType::kBF16, {2880, 4096}},
        {last + "self_attn.sinks", DType::kBF16, {64}},
        {last + "mlp.router.weight", DType::kBF16, {E, 2880}},
        {last + "mlp.router.bias", DType::kBF16, {E}},
        {last + "mlp.experts.gate_up_proj_blocks", DType::kU8, {E, 5760, 90, 16}},
        {last + "mlp.experts.gate_up_proj_scales", DType::kU8, {E, 5760, 90}},
        {last + "mlp.experts.gate_up_proj_bias", DType::kBF16, {E, 5760}},
        {last + "mlp.experts.down_proj_blocks", DType::kU8, {E, 2880, 90, 16}},
        {last + "mlp.experts.down_proj_scales", DType::kU8, {E, 2880, 90}},
        {last + "mlp.experts.down_proj_bias", DType::kBF16, {E, 2880}},
    };
    for (const auto& w : want) {
        const synth::TensorPlan* t = p.find(w.name);
        ASSERT_NE(t, nullptr) << w.name;
        EXPECT_EQ(t->dtype, w.dtype) << w.name;
        EXPECT_EQ(t->shape, w.shape) << w.name;
    }
    EXPECT_EQ(p.find(fmt::format("model.layers.{}.input_layernorm.weight", layers)), nullptr);
}

TEST(SynthPlan, Gpt20bMatchesTheSpec) {
    expect_real_plan("gpt-oss-20b", 459, 13'761'264'768ull, 3, 32, 24);
}

TEST(SynthPlan, Gpt120bMatchesTheSpec) {
    expect_real_plan("gpt-oss-120b", 687, 65'248'815'744ull, 15, 128, 36);
}

TEST(SynthPlan, ConfigHasTheHubFields) {
    synth::Options o;
    o.shape = synth::shape_named("gpt-oss-120b");
    const synth::Plan p = synth::make_plan(o);
    const json c = json::parse(p.config_json);
    EXPECT_EQ(c["architectures"], json::array({"GptOssForCausalLM"}));
    EXPECT_EQ(c["num_hidden_layers"], 36);
    EXPECT_EQ(c["num_local_experts"], 128);
    EXPECT_EQ(c["num_experts_per_tok"], 4);
    EXPECT_EQ(c["sliding_window"], 128);
    EXPECT_EQ(c["layer_types"].size(), 36u);
    EXPECT_EQ(c["layer_types"][0], "sliding_attention");
    EXPECT_EQ(c["layer_types"][1], "full_attention");
    EXPECT_EQ(c["rope_scaling"]["rope_type"], "yarn");
    EXPECT_EQ(c["rope_scaling"]["truncate"], false);
    EXPECT_EQ(c["rope_scaling"]["factor"], 32.0);
    EXPECT_EQ(c["rope_theta"], 150000);
    EXPECT_EQ(c["quantization_config"]["quant_method"], "mxfp4");
    EXPECT_EQ(c["eos_token_id"], 200002);
    EXPECT_EQ(c["pad_token_id"], 199999);
    EXPECT_EQ(c["vocab_size"], 201088);
    const ModelConfig mc = ModelConfig::from_json(nlohmann::json::parse(p.config_json), "synth");
    EXPECT_EQ(mc.num_layers, 36);
    EXPECT_FALSE(mc.rope.truncate);

    const json g = json::parse(p.generation_config_json);
    EXPECT_EQ(g["bos_token_id"], 199998);
    EXPECT_EQ(g["eos_token_id"], json::array({200002, 199999, 200012}));
    EXPECT_EQ(g["pad_token_id"], 199999);
    EXPECT_EQ(g["do_sample"], true);
}

TEST(SynthPlan, TinyIsOneFile) {
    const synth::Plan p = tiny_plan();
    ASSERT_EQ(p.shards.size(), 1u);
    EXPECT_EQ(p.shards[0].file_name, "model.safetensors");
    EXPECT_FALSE(p.indexed);
    EXPECT_TRUE(p.index_json.empty());
    EXPECT_EQ(p.tensors.size(), 3u + 19u * 4u);
}

TEST(SynthPlan, RejectsBadOptions) {
    EXPECT_THAT(error_of([] { synth::shape_named("gpt-oss-7b"); }),
                HasSubstr("tiny, gpt-oss-20b, gpt-oss-120b"));
    synth::Options o;
    o.shape = synth::shape_named("tiny");
    o.router_skew = -1.0;
    EXPECT_THAT(error_of([&] { synth::make_plan(o); }), HasSubstr("router skew"));
}

// The scale bytes are never 255 (NaN) and sit near the exponent that gives unit-scale rows
// (gate/up), or rows scaled by 2^-3 ~ 1/sqrt(2 * 24) (down: a residual branch).
TEST(SynthPlan, ScalesAreValidE8M0) {
    synth::Options o;
    o.shape = synth::shape_named("gpt-oss-20b");
    const synth::Plan p = synth::make_plan(o);
    const std::pair<const char*, int> cases[] = {
        {"model.layers.3.mlp.experts.gate_up_proj_scales", -8},  // 2.926*1.32*sqrt(2880)/2^8=0.81
        {"model.layers.3.mlp.experts.down_proj_scales", -11},
    };
    for (const auto& [name, exponent] : cases) {
        const synth::TensorPlan* t = p.find(name);
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(t->exponent, exponent) << name;
        std::vector<std::uint8_t> bytes(4099);
        synth::fill_tensor(p, static_cast<std::size_t>(t - p.tensors.data()), 12345,
                           12345 + bytes.size(), bytes.data());
        const std::set<int> seen(bytes.begin(), bytes.end());
        EXPECT_EQ(seen, (std::set<int>{126 + exponent, 127 + exponent, 128 + exponent})) << name;
    }
}

// Any split of a tensor into ranges gives the same bytes (what makes threads irrelevant).
TEST(SynthPlan, FillIsIndependentOfTheSplit) {
    const synth::Plan p = tiny_plan(7, 1.0);
    for (std::size_t i = 0; i < 20; ++i) {
        const auto& t = p.tensors[i];
        const std::uint64_t n = std::min<std::uint64_t>(t.nbytes, 10000);
        std::vector<std::uint8_t> whole(n), parts(n);
        synth::fill_tensor(p, i, 0, n, whole.data());
        for (std::uint64_t b = 0; b < n;) {
            const std::uint64_t e = std::min<std::uint64_t>(n, b + 1 + (b * 7919) % 29);
            synth::fill_tensor(p, i, b, e, parts.data() + b);
            b = e;
        }
        EXPECT_EQ(whole, parts) << t.name;
    }
}

// Large ranges of uniform tensors go through a lookup table; it must give the same bytes as the
// per-element path that small ranges take.
TEST(SynthPlan, LargeRangesMatchSmallOnes) {
    const synth::Plan p = tiny_plan(3);
    for (const char* name : {"model.embed_tokens.weight", "lm_head.weight"}) {
        const synth::TensorPlan* t = p.find(name);
        ASSERT_NE(t, nullptr);
        const auto index = static_cast<std::size_t>(t - p.tensors.data());
        const std::uint64_t begin = 1001, n = 3u << 20;
        std::vector<std::uint8_t> big(n), small(n);
        synth::fill_tensor(p, index, begin, begin + n, big.data());
        for (std::uint64_t b = 0; b < n; b += 4096) {
            const std::uint64_t e = std::min(n, b + 4096);
            synth::fill_tensor(p, index, begin + b, begin + e, small.data() + b);
        }
        EXPECT_EQ(big, small) << name;
    }
}

// --- tiny checkpoints on disk ---------------------------------------------------------------

std::vector<float> run_forward(const fs::path& dir, const std::vector<TokenId>& ids,
                               RouterObserver* observer = nullptr) {
    auto model = Model::load(dir);
    KvCache cache = model->new_cache();
    ForwardOptions fo;
    fo.observer = observer;
    return model->cpu().forward(ids, cache, fo);
}

TEST(SynthWrite, TinyLoadsAndRuns) {
    test::TempDir tmp;
    const fs::path dir = tmp / "tiny";
    const auto r = write_tiny(dir);
    EXPECT_EQ(r.dir, dir);
    EXPECT_EQ(
        file_names(dir),
        (std::vector<std::string>{"config.json", "generation_config.json", "model.safetensors",
                                  "neural-synth.json", "tokenizer.json", "tokenizer_config.json"}));
    EXPECT_EQ(file_names(tmp.path()), std::vector<std::string>{"tiny"}) << "no temporary left";
    const auto marker = test::read_json(dir / synth::kSynthMarkerFile);
    EXPECT_EQ(marker["shape"], "tiny");
    EXPECT_THAT(marker["note"].get<std::string>(), ::testing::HasSubstr("random weights"));
    EXPECT_EQ(test::read_file(dir / "tokenizer.json"), test::read_file(fixture_tokenizer()));
    const synth::Plan plan = tiny_plan();
    EXPECT_EQ(fs::file_size(dir / "model.safetensors"), plan.shards[0].file_bytes());

    auto model = Model::load(dir);
    EXPECT_EQ(model->config().hidden_size, 32);
    EXPECT_EQ(model->config().num_layers, 4);
    EXPECT_EQ(model->config().num_experts, 8);
    EXPECT_EQ(model->config().sliding_window, 16);
    EXPECT_EQ(model->generation().bos_token_id, 199998);
    EXPECT_EQ(model->checkpoint().total_bytes(), plan.tensor_bytes);

    const std::vector<TokenId> ids = model->tokenizer().encode("Hello synthetic world!", false);
    KvCache cache = model->new_cache();
    ForwardOptions fo;
    fo.all_logits = true;
    const std::vector<float> logits = model->cpu().forward(ids, cache, fo);
    ASSERT_EQ(logits.size(), ids.size() * 201088u);
    double sum_sq = 0.0;
    for (float v : logits) {
        ASSERT_TRUE(std::isfinite(v));
        sum_sq += double(v) * v;
    }
    // Unit-scale design: logits are O(1), neither vanishing nor exploding.
    const double rms = std::sqrt(sum_sq / logits.size());
    RecordProperty("logit_rms", std::to_string(rms));
    EXPECT_GT(rms, 0.1);
    EXPECT_LT(rms, 10.0);
}

TEST(SynthWrite, SameSeedSameBytesForAnyThreadCount) {
    test::TempDir tmp;
    write_tiny(tmp / "a", 42, 0.5, 1);
    write_tiny(tmp / "b", 42, 0.5, 3);
    write_tiny(tmp / "c", 43, 0.5, 3);
    for (const auto& name : file_names(tmp / "a")) {
        EXPECT_EQ(test::read_file(tmp / "a" / name), test::read_file(tmp / "b" / name)) << name;
    }
    const std::string a = test::read_file(tmp / "a" / "model.safetensors");
    const std::string c = test::read_file(tmp / "c" / "model.safetensors");
    ASSERT_EQ(a.size(), c.size());
    EXPECT_NE(a, c);
    // Every large tensor differs, not just one.
    const auto ta = SafetensorsFile::open(tmp / "a" / "model.safetensors");
    const auto tc = SafetensorsFile::open(tmp / "c" / "model.safetensors");
    for (const auto& [name, t] : ta.tensors()) {
        if (t.nbytes() < 64) continue;
        EXPECT_NE(std::memcmp(t.data, tc.find(name)->data, t.nbytes()), 0) << name;
    }
}

// A small shard budget shards the tiny model like the Hub shards 20b/120b; the loader reads it
// through the index and computes exactly what the single-file checkpoint computes.
TEST(SynthWrite, ShardedTinyMatchesSingleFile) {
    test::TempDir tmp;
    write_tiny(tmp / "single", 5);
    synth::Options o;
    o.shape = synth::shape_named("tiny");
    o.seed = 5;
    o.shard_bytes = 5'000'000;
    const synth::Plan plan = synth::make_plan(o);
    // The 12.9 MB embedding and LM head exceed the budget and get shards of their own.
    ASSERT_EQ(plan.shards.size(), 3u);
    synth::WriteOptions w;
    w.tokenizer = fixture_tokenizer();
    synth::write_checkpoint(plan, tmp / "sharded", w);

    const json index = test::read_json(tmp / "sharded" / "model.safetensors.index.json");
    EXPECT_EQ(index["metadata"]["total_size"].get<std::uint64_t>(), plan.tensor_bytes);
    EXPECT_EQ(index["weight_map"]["lm_head.weight"], "model-00002-of-00002.safetensors");
    for (const auto& s : plan.shards) EXPECT_TRUE(fs::exists(tmp / "sharded" / s.file_name));

    const std::vector<TokenId> ids = {1, 2, 3, 200005, 17, 99};
    EXPECT_EQ(run_forward(tmp / "single", ids), run_forward(tmp / "sharded", ids));
}

// Counts, per layer, how often each expert is the router's first choice.
struct FirstChoiceCounter : RouterObserver {
    std::map<int, std::vector<int>> counts;  // layer -> [E]
    void on_route(int layer, std::int64_t, std::span<const int> experts,
                  std::span<const float>) override {
        auto& c = counts[layer];
        c.resize(8);
        ++c[static_cast<std::size_t>(experts[0])];
    }
    // Mean over layers of the most popular expert's share of first choices.
    double top_share() const {
        double sum = 0;
        for (const auto& [layer, c] : counts) {
            const int total = std::accumulate(c.begin(), c.end(), 0);
            sum += double(*std::max_element(c.begin(), c.end())) / total;
        }
        return sum / counts.size();
    }
};

TEST(SynthWrite, RouterSkewMakesSomeExpertsPopular) {
    test::TempDir tmp;
    write_tiny(tmp / "flat", 11, 0.0);
    write_tiny(tmp / "skewed", 11, 1.5);
    std::vector<TokenId> ids(200);
    std::uint64_t x = 12345;
    for (auto& id : ids) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        id = static_cast<TokenId>((x >> 33) % 199998);
    }
    FirstChoiceCounter flat, skewed;
    run_forward(tmp / "flat", ids, &flat);
    run_forward(tmp / "skewed", ids, &skewed);
    ASSERT_EQ(flat.counts.size(), 4u);
    RecordProperty("flat_top_share", std::to_string(flat.top_share()));
    RecordProperty("skewed_top_share", std::to_string(skewed.top_share()));
    // First choices: uniform gives 1/8 = 0.125 each (measured ~0.18 with 200 tokens' noise);
    // Zipf 1.5 over 8 experts gives the top expert 1 / sum_r (r+1)^-1.5 = 0.52 (measured 0.52).
    EXPECT_LT(flat.top_share(), 0.25) << "skew 0 is near uniform";
    EXPECT_GT(skewed.top_share(), 0.35) << "skew 1.5 concentrates the routing";
}

TEST(SynthWrite, RefusesNonEmptyFolderUnlessForced) {
    test::TempDir tmp;
    const fs::path dir = tmp / "out";
    fs::create_directory(dir);
    test::write_file(dir / "precious.txt", "keep me");
    EXPECT_THAT(error_of([&] { write_tiny(dir); }), HasSubstr("is not empty"));
    EXPECT_EQ(test::read_file(dir / "precious.txt"), "keep me");
    EXPECT_EQ(file_names(tmp.path()), std::vector<std::string>{"out"});

    synth::WriteOptions w;
    w.tokenizer = fixture_tokenizer();
    w.force = true;
    synth::write_checkpoint(tiny_plan(), dir, w);
    EXPECT_FALSE(fs::exists(dir / "precious.txt"));
    EXPECT_TRUE(fs::exists(dir / "model.safetensors"));
    EXPECT_EQ(file_names(tmp.path()), std::vector<std::string>{"out"});

    // An empty folder needs no --force.
    fs::create_directory(tmp / "empty");
    write_tiny(tmp / "empty");
    EXPECT_TRUE(fs::exists(tmp / "empty" / "config.json"));
}

TEST(SynthWrite, MissingTokenizerIsAClearError) {
    test::TempDir tmp;
    synth::WriteOptions w;
    EXPECT_THAT(error_of([&] { synth::write_checkpoint(tiny_plan(), tmp / "m", w); }),
                HasSubstr("NEURAL_TOKENIZER"));
    w.tokenizer = tmp / "nope" / "tokenizer.json";
    EXPECT_THAT(error_of([&] { synth::write_checkpoint(tiny_plan(), tmp / "m", w); }),
                HasSubstr((tmp / "nope" / "tokenizer.json").string()));
    EXPECT_FALSE(fs::exists(tmp / "m"));
    // A folder holding tokenizer.json is accepted.
    w.tokenizer = test::tiny_model_dir();
    synth::write_checkpoint(tiny_plan(), tmp / "m", w);
    EXPECT_TRUE(fs::exists(tmp / "m" / "tokenizer_config.json"));
}

TEST(SynthWrite, CancelRemovesThePartialOutput) {
    test::TempDir tmp;
    std::atomic<bool> cancel{true};
    synth::WriteOptions w;
    w.tokenizer = fixture_tokenizer();
    w.cancel = &cancel;
    EXPECT_THROW(synth::write_checkpoint(tiny_plan(), tmp / "m", w), Cancelled);
    EXPECT_TRUE(file_names(tmp.path()).empty());
}

#ifndef _WIN32
// The CLI: the tokenizer comes from --tokenizer or NEURAL_TOKENIZER, else a clear error.
int run_neural(const std::string& args, const fs::path& err) {
    const std::string cmd = "env -u NEURAL_TOKENIZER '" + (test::bin_dir() / "neural").string() +
                            "' " + args + " </dev/null >/dev/null 2>'" + err.string() + "'";
    const int status = std::system(cmd.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(SynthCli, NeedsATokenizerAndWritesWithOne) {
    test::TempDir tmp;
    const fs::path out = tmp / "m";
    EXPECT_EQ(run_neural("synth --shape tiny '" + out.string() + "'", tmp / "err1"), 1);
    EXPECT_THAT(test::read_file(tmp / "err1"), HasSubstr("--tokenizer"));
    EXPECT_FALSE(fs::exists(out));
    EXPECT_EQ(run_neural("synth --shape tiny --seed 3 --router-skew 1 --threads 2 --tokenizer '" +
                             fixture_tokenizer().string() + "' '" + out.string() + "'",
                         tmp / "err2"),
              0)
        << test::read_file(tmp / "err2");
    EXPECT_TRUE(fs::exists(out / "model.safetensors"));
    EXPECT_EQ(run_neural("synth --shape tiny --tokenizer '" + fixture_tokenizer().string() + "' '" +
                             out.string() + "'",
                         tmp / "err3"),
              1);
    EXPECT_THAT(test::read_file(tmp / "err3"), HasSubstr("--force"));
}
#endif

}  // namespace
}  // namespace neural
