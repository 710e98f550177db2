// neural::Model::load on the tiny fixture and on broken copies of it: every failure names the
// file (and the tensor or field) at fault.
#include <cstdint>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "neural/error.h"
#include "runtime/model.h"
#include "runtime/options.h"
#include "support/fixtures.h"

namespace neural {
namespace {

using test::error_of;

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A writable stand-in for the fixture: symlinks to the read-only originals, which a test
// replaces with real (corrupted) files as needed.
class FixtureCopy {
public:
    FixtureCopy() {
        dir_ = tmp_ / "model";
        fs::create_directory(dir_);
        for (const auto& e : fs::directory_iterator(test::tiny_model_dir())) {
            // Windows allows symlinks only with developer mode (and Wine not at all): copy there.
            std::error_code ec;
            fs::create_symlink(fs::absolute(e.path()), dir_ / e.path().filename(), ec);
            if (ec) {
                fs::copy_file(e.path(), dir_ / e.path().filename());
                // The fixture is read-only; a copy must be replaceable (Windows: the attribute).
                fs::permissions(dir_ / e.path().filename(), fs::perms::owner_write,
                                fs::perm_options::add);
            }
        }
    }
    const fs::path& dir() const { return dir_; }
    fs::path operator/(const std::string& name) const { return dir_ / name; }
    void replace(const std::string& name, const std::string& bytes) {
        fs::remove(dir_ / name);
        test::write_file(dir_ / name, bytes);
    }
    void remove(const std::string& name) { fs::remove(dir_ / name); }
    json config() const { return test::read_json(dir_ / "config.json"); }
    void set_config(const json& j) { replace("config.json", j.dump(2)); }

private:
    test::TempDir tmp_;
    fs::path dir_;
};

// Rewrites model.safetensors with `edit` applied to its header (data bytes unchanged).
template <typename F>
void edit_header(FixtureCopy& m, F&& edit) {
    const std::string bytes = test::read_file(test::tiny_model_dir() / "model.safetensors");
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) {
        n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
    }
    json header = json::parse(bytes.substr(8, n));
    edit(header);
    const std::string text = header.dump();
    std::string out;
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((text.size() >> (8 * i)) & 0xff));
    m.replace("model.safetensors", out + text + bytes.substr(8 + n));
}

TEST(ModelLoad, FixtureLoads) {
    auto m = Model::load(test::tiny_model_dir());
    EXPECT_EQ(m->dir(), test::tiny_model_dir());
    EXPECT_EQ(m->config().hidden_size, 32);
    EXPECT_EQ(m->config().num_layers, 4);
    EXPECT_EQ(m->checkpoint().tensor_count(), 79u);
    EXPECT_THAT(m->generation().eos_token_ids, ElementsAre(200002, 199999, 200012));
    // generation_config's eos ids win over config.json's, sorted and unique.
    EXPECT_THAT(m->stop_tokens(), ElementsAre(199999, 200002, 200012));
    // o200k_harmony defines ids up to 200018; lm_head rows past that are never sampled.
    EXPECT_EQ(m->sampleable_vocab(), 200019u);
    EXPECT_EQ(m->tokenizer().vocab_size(), 200019u);
    KvCache cache = m->new_cache();
    EXPECT_EQ(cache.size(), 0);
    EXPECT_EQ(cache.layers(), 4);
    EXPECT_EQ(cache.kv_dim(), 128);
}

TEST(ModelLoad, WithoutGenerationConfigStopsOnConfigEosAndTheHarmonyStops) {
    FixtureCopy m;
    m.remove("generation_config.json");
    auto model = Model::load(m.dir());
    EXPECT_TRUE(model->generation().eos_token_ids.empty());
    // config.json's eos (<|return|>) and the harmony stops <|return|>, <|call|>.
    EXPECT_THAT(model->stop_tokens(), ElementsAre(200002, 200012));
}

TEST(ModelLoad, MissingFolder) {
    test::TempDir tmp;
    std::string msg = error_of([&] { Model::load(tmp / "nothing-here"); });
    EXPECT_THAT(msg, HasSubstr("model folder not found"));
    EXPECT_THAT(msg, HasSubstr("nothing-here"));
}

TEST(ModelLoad, TruncatedWeightsNameTheFile) {
    FixtureCopy m;
    const std::string bytes = test::read_file(test::tiny_model_dir() / "model.safetensors");
    m.replace("model.safetensors", bytes.substr(0, bytes.size() / 2));
    std::string msg = error_of([&] { Model::load(m.dir()); });
    EXPECT_THAT(msg, HasSubstr((m / "model.safetensors").string()));
    EXPECT_THAT(msg, HasSubstr("lie outside the data area"));
    EXPECT_THAT(msg, HasSubstr("truncated"));
}

TEST(ModelLoad, WrongHiddenSizeIsAShapeMismatch) {
    FixtureCopy m;
    json c = m.config();
    c["hidden_size"] = 64;
    m.set_config(c);
    std::string msg = error_of([&] { Model::load(m.dir()); });
    EXPECT_THAT(msg, HasSubstr("model.safetensors"));
    EXPECT_THAT(msg, HasSubstr("tensor \"model.embed_tokens.weight\" has shape [201088, 32], "
                               "expected [201088, 64] from config.json"));
}

TEST(ModelLoad, WrongExpertCountNamesTheRouter) {
    FixtureCopy m;
    json c = m.config();
    c["num_local_experts"] = 16;
    m.set_config(c);
    std::string msg = error_of([&] { Model::load(m.dir()); });
    EXPECT_THAT(msg, HasSubstr("tensor \"model.layers.0.mlp.router.weight\" has shape [8, 32], "
                               "expected [16, 32]"));
}

TEST(ModelLoad, WrongHeadDimNamesTheProjection) {
    FixtureCopy m;
    json c = m.config();
    c["head_dim"] = 32;
    m.set_config(c);
    std::string msg = error_of([&] { Model::load(m.dir()); });
    EXPECT_THAT(msg, HasSubstr("tensor \"model.layers.0.self_attn.q_proj.weight\" has shape "
                               "[256, 32], expected [128, 32]"));
}

TEST(ModelLoad, MissingTensorNamed) {
    FixtureCopy m;
    edit_header(m, [](json& h) { h.erase("model.layers.2.self_attn.sinks"); });
    std::string msg = error_of([&] { Model::load(m.dir()); });
    EXPECT_THAT(msg, HasSubstr(m.dir().string()));
    EXPECT_THAT(msg, HasSubstr("tensor \"model.layers.2.self_attn.sinks\" is missing "
                               "(expected BF16 [4])"));
}

TEST(ModelLoad, WrongDtypeNamed) {
    FixtureCopy m;
    edit_header(m, [](json& h) {
        // Same byte size, different dtype: F16 instead of BF16.
        h["model.norm.weight"]["dtype"] = "F16";
    });
    std::string msg = error_of([&] { Model::load(m.dir()); });
    EXPECT_THAT(msg, HasSubstr("tensor \"model.norm.weight\" has dtype F16, expected BF16"));
}

TEST(ModelLoad, MissingTokenizer) {
    FixtureCopy m;
    m.remove("tokenizer.json");
    std::string msg = error_of([&] { Model::load(m.dir()); });
    EXPECT_THAT(msg, HasSubstr(m.dir().string()));
    EXPECT_THAT(msg, HasSubstr("tokenizer.json is missing"));
}

TEST(ModelLoad, BrokenConfig) {
    FixtureCopy m;
    m.replace("config.json", "{ \"model_type\": \"gpt_oss\", ");
    std::string msg = error_of([&] { Model::load(m.dir()); });
    EXPECT_THAT(msg, HasSubstr((m / "config.json").string()));
    EXPECT_THAT(msg, HasSubstr("invalid JSON"));
}

TEST(ModelLoad, MissingConfig) {
    FixtureCopy m;
    m.remove("config.json");
    std::string msg = error_of([&] { Model::load(m.dir()); });
    EXPECT_THAT(msg, HasSubstr("config.json not found or unreadable"));
}

TEST(ModelLoad, BrokenGenerationConfig) {
    FixtureCopy m;
    m.replace("generation_config.json", "not json");
    std::string msg = error_of([&] { Model::load(m.dir()); });
    EXPECT_THAT(msg, HasSubstr((m / "generation_config.json").string()));
    EXPECT_THAT(msg, HasSubstr("invalid JSON"));
}

TEST(ModelLoad, VocabSmallerThanTokenizer) {
    FixtureCopy m;
    json c = m.config();
    c["vocab_size"] = 1000;
    m.set_config(c);
    std::string msg = error_of([&] { Model::load(m.dir()); });
    EXPECT_THAT(msg, HasSubstr("tokenizer defines 200019 tokens but the model's vocab_size is "
                               "1000"));
}

// A config without rope_scaling is refused at load, naming the override; with --plain-rope (the
// schema's plain_rope) it loads and runs plain RoPE.
TEST(ModelLoad, MissingRopeScalingNeedsTheExplicitOverride) {
    FixtureCopy m;
    json c = m.config();
    c.erase("rope_scaling");
    m.set_config(c);
    std::string msg = error_of([&] { Model::load(m.dir()); });
    EXPECT_THAT(msg, HasSubstr("no \"rope_scaling\""));
    EXPECT_THAT(msg, HasSubstr("--plain-rope 1"));
    LoadOptions o = options::apply({{"plain_rope", "1"}});
    auto model = Model::load(m.dir(), o);
    EXPECT_EQ(model->config().rope.type, "default");
    EXPECT_FALSE(model->config().rope_scaling_given);
}

// Two spellings of experts per token that disagree stop the load (the fixture has both).
TEST(ModelLoad, DisagreeingExpertsPerTokenIsRefused) {
    FixtureCopy m;
    json c = m.config();
    c["num_experts_per_tok"] = 2;
    m.set_config(c);
    std::string msg = error_of([&] { Model::load(m.dir()); });
    EXPECT_THAT(msg, HasSubstr((m / "config.json").string()));
    EXPECT_THAT(msg, HasSubstr("num_experts_per_tok = 2 and experts_per_token = 4 disagree"));
}

TEST(ModelLoad, MissingWeights) {
    FixtureCopy m;
    m.remove("model.safetensors");
    std::string msg = error_of([&] { Model::load(m.dir()); });
    EXPECT_THAT(msg, HasSubstr("no model.safetensors or model.safetensors.index.json found"));
}

// Config and weights that disagree are errors, never a model that silently runs without part of
// its weights or with a guessed value.
TEST(ModelLoad, FewerLayersInTheConfigThanInTheWeightsIsAnError) {
    FixtureCopy m;
    json c = m.config();
    const int layers = c["num_hidden_layers"].get<int>();
    c["num_hidden_layers"] = layers - 1;
    if (c.contains("layer_types")) c["layer_types"].erase(c["layer_types"].size() - 1);
    m.set_config(c);
    std::string msg = error_of([&] { Model::load(m.dir()); });
    EXPECT_THAT(msg, HasSubstr("tensors its config.json does not use"));
    EXPECT_THAT(msg, HasSubstr("model.layers." + std::to_string(layers - 1) + "."));
    EXPECT_THAT(msg, HasSubstr("num_hidden_layers = " + std::to_string(layers - 1)));
}

TEST(ModelLoad, AttentionBiasFalseWithBiasTensorsIsAnError) {
    FixtureCopy m;
    json c = m.config();
    ASSERT_TRUE(c.value("attention_bias", false)) << "the fixture has attention biases";
    c["attention_bias"] = false;
    m.set_config(c);
    std::string msg = error_of([&] { Model::load(m.dir()); });
    EXPECT_THAT(msg, HasSubstr("self_attn.k_proj.bias"));
    EXPECT_THAT(msg, HasSubstr("attention_bias = false"));
}

TEST(ModelLoad, RopeThetaZeroIsAnErrorNotADefault) {
    FixtureCopy m;
    json c = m.config();
    c["rope_theta"] = 0;
    if (c.contains("rope_parameters")) c["rope_parameters"].erase("rope_theta");
    m.set_config(c);
    EXPECT_THAT(error_of([&] { Model::load(m.dir()); }),
                HasSubstr("rope_theta must be > 1, got 0"));
}

TEST(ModelLoad, MissingRopeThetaIsAnError) {
    FixtureCopy m;
    json c = m.config();
    c.erase("rope_theta");
    if (c.contains("rope_parameters")) c["rope_parameters"].erase("rope_theta");
    m.set_config(c);
    EXPECT_THAT(error_of([&] { Model::load(m.dir()); }),
                HasSubstr("missing required field \"rope_theta\" (the RoPE base; gpt-oss uses "
                          "150000)"));
}

TEST(ModelLoad, EosTokenPastTheVocabIsAnError) {
    {
        FixtureCopy m;
        json c = m.config();
        c["eos_token_id"] = 1000000000;
        m.set_config(c);
        std::string msg = error_of([&] { Model::load(m.dir()); });
        EXPECT_THAT(msg, HasSubstr((m / "config.json").string()));
        EXPECT_THAT(msg, HasSubstr("token id 1000000000 is not a token of this model"));
    }
    {
        FixtureCopy m;
        json g = test::read_json(m / "generation_config.json");
        g["eos_token_id"] = json::array({200002, 1000000000});
        m.replace("generation_config.json", g.dump());
        std::string msg = error_of([&] { Model::load(m.dir()); });
        EXPECT_THAT(msg, HasSubstr((m / "generation_config.json").string()));
        EXPECT_THAT(msg, HasSubstr("token id 1000000000 is not a token of this model"));
    }
}

}  // namespace
}  // namespace neural
