// config.json / generation_config.json parsing: the fixture's every field, the transformers v5
// spelling, defaults, and one specific error message per kind of malformed input.
#include <cmath>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/config.h"
#include "neural/error.h"
#include "support/fixtures.h"

namespace neural {
namespace {

using test::error_of;

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

json fixture_config() { return test::read_json(test::tiny_model_dir() / "config.json"); }

// Every field of tiny-gptoss-a, as both spellings must produce it.
void expect_fixture_fields(const ModelConfig& c) {
    EXPECT_EQ(c.model_type, "gpt_oss");
    EXPECT_EQ(c.hidden_size, 32);
    EXPECT_EQ(c.intermediate_size, 96);
    EXPECT_EQ(c.num_layers, 4);
    EXPECT_EQ(c.num_experts, 8);
    EXPECT_EQ(c.experts_per_token, 4);
    EXPECT_EQ(c.num_heads, 4);
    EXPECT_EQ(c.num_kv_heads, 2);
    EXPECT_EQ(c.head_dim, 64);
    EXPECT_EQ(c.q_dim(), 256);
    EXPECT_EQ(c.kv_dim(), 128);
    EXPECT_EQ(c.vocab_size, 201088);
    EXPECT_EQ(c.sliding_window, 16);
    EXPECT_THAT(c.layer_is_sliding, ElementsAre(true, false, true, false));
    EXPECT_DOUBLE_EQ(c.rope_theta, 150000.0);
    EXPECT_EQ(c.rope.type, "yarn");
    EXPECT_DOUBLE_EQ(c.rope.factor, 32.0);
    EXPECT_DOUBLE_EQ(c.rope.beta_fast, 32.0);
    EXPECT_DOUBLE_EQ(c.rope.beta_slow, 1.0);
    EXPECT_DOUBLE_EQ(c.rope.original_max_position_embeddings, 4096.0);
    EXPECT_FALSE(c.rope.truncate);
    EXPECT_FALSE(c.rope.attention_factor.has_value());
    EXPECT_EQ(c.max_position_embeddings, 131072);
    EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
    EXPECT_FLOAT_EQ(c.swiglu_limit, 7.0f);
    EXPECT_FLOAT_EQ(c.swiglu_alpha, 1.702f);
    EXPECT_TRUE(c.attention_bias);
    EXPECT_THAT(c.eos_token_ids, ElementsAre(200002));
    ASSERT_TRUE(c.pad_token_id.has_value());
    EXPECT_EQ(*c.pad_token_id, 199999);
}

TEST(ModelConfig, FixtureParsesEveryField) {
    ModelConfig c = ModelConfig::load(test::tiny_model_dir() / "config.json");
    expect_fixture_fields(c);
}

TEST(ModelConfig, TransformersV5RopeParametersParseTheSame) {
    json j = fixture_config();
    json rp = j["rope_scaling"];
    rp["rope_theta"] = j["rope_theta"];
    j.erase("rope_scaling");
    j.erase("rope_theta");
    j["rope_parameters"] = rp;
    ModelConfig c = ModelConfig::from_json(j, "v5.json");
    expect_fixture_fields(c);
}

TEST(ModelConfig, RopeParametersWithoutThetaFallBackToTopLevel) {
    json j = fixture_config();
    j["rope_parameters"] = j["rope_scaling"];
    j.erase("rope_scaling");
    ModelConfig c = ModelConfig::from_json(j, "mixed.json");
    EXPECT_DOUBLE_EQ(c.rope_theta, 150000.0);
    EXPECT_EQ(c.rope.type, "yarn");
    EXPECT_DOUBLE_EQ(c.rope.factor, 32.0);
}

TEST(ModelConfig, NoRopeScalingIsRefusedWithoutTheOverride) {
    json j = fixture_config();
    j.erase("rope_scaling");
    std::string msg = error_of([&] { ModelConfig::from_json(j, "plain.json"); });
    EXPECT_THAT(msg, HasSubstr("plain.json: no \"rope_scaling\""));
    EXPECT_THAT(msg, HasSubstr("--plain-rope"));
    // The initial_context_length check needs YaRN's original length: without rope scaling and
    // with the override the rest still parses.
    ModelConfig c = ModelConfig::from_json(j, "plain.json", /*allow_plain_rope=*/true);
    EXPECT_FALSE(c.rope_scaling_given);
    EXPECT_EQ(c.rope.type, "default");
    EXPECT_DOUBLE_EQ(c.rope.factor, 1.0);
    EXPECT_DOUBLE_EQ(c.rope_theta, 150000.0);
    EXPECT_TRUE(ModelConfig::from_json(fixture_config(), "x.json").rope_scaling_given);
}

// A checkpoint that names one quantity twice with two values is refused, naming both keys.
TEST(ModelConfig, ExpertsPerTokenSpellingsMustAgree) {
    json j = fixture_config();
    j["num_experts_per_tok"] = 2;  // experts_per_token stays 4
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("num_experts_per_tok = 2 and experts_per_token = 4 disagree"));
    EXPECT_THAT(msg, HasSubstr("experts per token"));
}

TEST(ModelConfig, ExpertCountSpellingsMustAgree) {
    json j = fixture_config();
    j["num_experts"] = 16;  // num_local_experts is 8
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("num_local_experts = 8 and num_experts = 16 disagree"));
    j["num_experts"] = 8.0;  // the same number, written as a float: agrees
    EXPECT_EQ(ModelConfig::from_json(j, "cfg.json").num_experts, 8);
}

TEST(ModelConfig, InitialContextLengthMustBePositiveAndMatchYarn) {
    json j = fixture_config();
    j["initial_context_length"] = 0;
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("initial_context_length must be positive, got 0"));
    j["initial_context_length"] = 8192;
    msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("initial_context_length = 8192 and rope "
                               "original_max_position_embeddings = 4096 disagree"));
}

TEST(ModelConfig, MaxPositionsMustBeTheYarnScaledContext) {
    json j = fixture_config();
    j["max_position_embeddings"] = 65536;  // 32 x 4096 = 131072
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("max_position_embeddings = 65536 but rope factor 32 x "
                               "original_max_position_embeddings 4096 = 131072"));
}

TEST(ModelConfig, RopeScalingAndRopeParametersMustAgree) {
    json j = fixture_config();
    j["rope_parameters"] = j["rope_scaling"];
    j["rope_parameters"]["factor"] = 16.0;
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("rope_scaling.factor = 32.0 and rope_parameters.factor = 16.0 "
                               "disagree"));
    // Both spellings of one value: fine.
    json same = fixture_config();
    same["rope_parameters"] = same["rope_scaling"];
    expect_fixture_fields(ModelConfig::from_json(same, "cfg.json"));

    json theta = fixture_config();
    theta["rope_parameters"] = theta["rope_scaling"];
    theta.erase("rope_scaling");
    theta["rope_parameters"]["rope_theta"] = 10000;
    msg = error_of([&] { ModelConfig::from_json(theta, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("rope_parameters.rope_theta = 10000 and rope_theta = 150000"));

    json type = fixture_config();
    type["rope_scaling"]["type"] = "default";
    msg = error_of([&] { ModelConfig::from_json(type, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("rope_scaling.rope_type = \"yarn\" and rope_scaling.type = "
                               "\"default\" disagree"));
}

TEST(ModelConfig, SlidingWindowWithoutSlidingLayersIsRefused) {
    json j = fixture_config();
    j["layer_types"] = {"full_attention", "full_attention", "full_attention", "full_attention"};
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("sliding_window = 16 but layer_types lists no"));
    j["sliding_window"] = 0;  // no window, no sliding layer: consistent
    EXPECT_THAT(ModelConfig::from_json(j, "cfg.json").layer_is_sliding,
                ElementsAre(false, false, false, false));
}

// The fixture's own config carries both spellings of experts per token, initial_context_length
// and YaRN: it agrees with itself, so it loads (FixtureParsesEveryField).

TEST(ModelConfig, MissingLayerTypesMakesEvenLayersSliding) {
    json j = fixture_config();
    j.erase("layer_types");
    j["num_hidden_layers"] = 5;
    ModelConfig c = ModelConfig::from_json(j, "x.json");
    EXPECT_THAT(c.layer_is_sliding, ElementsAre(true, false, true, false, true));
}

TEST(ModelConfig, ExpertsPerTokenAlternativeSpellings) {
    json j = fixture_config();
    j.erase("num_local_experts");
    j.erase("num_experts_per_tok");
    j["num_experts"] = 8;
    j["experts_per_token"] = 2;
    ModelConfig c = ModelConfig::from_json(j, "x.json");
    EXPECT_EQ(c.num_experts, 8);
    EXPECT_EQ(c.experts_per_token, 2);
}

TEST(ModelConfig, InvalidJsonNamesTheFile) {
    test::TempDir tmp;
    const auto path = tmp / "config.json";
    test::write_file(path, "{\"hidden_size\": 32,");
    std::string msg = error_of([&] { ModelConfig::load(path); });
    EXPECT_THAT(msg, HasSubstr(path.string()));
    EXPECT_THAT(msg, HasSubstr("invalid JSON"));
}

TEST(ModelConfig, MissingFile) {
    test::TempDir tmp;
    const auto path = tmp / "config.json";
    std::string msg = error_of([&] { ModelConfig::load(path); });
    EXPECT_THAT(msg, HasSubstr("config.json not found or unreadable"));
    EXPECT_THAT(msg, HasSubstr(path.string()));
}

TEST(ModelConfig, TopLevelMustBeAnObject) {
    std::string msg = error_of([&] { ModelConfig::from_json(json::array({1, 2}), "arr.json"); });
    EXPECT_THAT(msg, HasSubstr("arr.json: expected a JSON object at the top level"));
}

TEST(ModelConfig, MissingHiddenSize) {
    json j = fixture_config();
    j.erase("hidden_size");
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("cfg.json: missing required field \"hidden_size\""));
}

TEST(ModelConfig, NullCountsAsMissing) {
    json j = fixture_config();
    j["vocab_size"] = nullptr;
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("missing required field \"vocab_size\""));
}

TEST(ModelConfig, WrongTypeNamesFieldAndValue) {
    json j = fixture_config();
    j["hidden_size"] = "32";
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("cfg.json: field \"hidden_size\" must be an integer, got \"32\""));

    json k = fixture_config();
    k["rms_norm_eps"] = "tiny";
    msg = error_of([&] { ModelConfig::from_json(k, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("field \"rms_norm_eps\" must be a number, got \"tiny\""));

    json f = fixture_config();
    f["num_hidden_layers"] = 4.5;
    msg = error_of([&] { ModelConfig::from_json(f, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("field \"num_hidden_layers\" must be an integer, got 4.5"));
}

TEST(ModelConfig, IntegralFloatIsAccepted) {
    json j = fixture_config();
    j["hidden_size"] = 32.0;
    EXPECT_EQ(ModelConfig::from_json(j, "cfg.json").hidden_size, 32);
}

TEST(ModelConfig, OutOfRangeValue) {
    json j = fixture_config();
    j["hidden_size"] = 0;
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("field \"hidden_size\" = 0 is out of range"));

    json k = fixture_config();
    k["num_experts_per_tok"] = 9;  // more than the 8 experts
    k["experts_per_token"] = 9;
    msg = error_of([&] { ModelConfig::from_json(k, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("field \"num_experts_per_tok\" = 9 is out of range (1..8)"));
}

TEST(ModelConfig, HeadsMustBeAMultipleOfKvHeads) {
    json j = fixture_config();
    j["num_key_value_heads"] = 3;
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("num_attention_heads (4) must be a multiple of "
                               "num_key_value_heads (3)"));
}

TEST(ModelConfig, HiddenSizeMustBeAMultipleOf32) {
    json j = fixture_config();
    j["hidden_size"] = 48;
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("must be multiples of 32"));
}

TEST(ModelConfig, LayerTypesWrongLength) {
    json j = fixture_config();
    j["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention"};
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("cfg.json: layer_types must list 4 entries"));
}

TEST(ModelConfig, LayerTypesUnknownValue) {
    json j = fixture_config();
    j["layer_types"][1] = "local_attention";
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("layer_types[1] = \"local_attention\""));
    EXPECT_THAT(msg, HasSubstr("expected \"sliding_attention\" or \"full_attention\""));
}

TEST(ModelConfig, SlidingLayersNeedAWindow) {
    json j = fixture_config();
    j.erase("sliding_window");
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("sliding layers need a positive sliding_window"));
}

TEST(ModelConfig, ModelTypeMustBeGptOss) {
    json j = fixture_config();
    j["model_type"] = "llama";
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("model_type is \"llama\""));
    EXPECT_THAT(msg, HasSubstr("\"gpt_oss\""));
}

TEST(ModelConfig, UnsupportedRopeType) {
    json j = fixture_config();
    j["rope_scaling"]["rope_type"] = "longrope";
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("unsupported rope_type \"longrope\""));
}

TEST(ModelConfig, YarnNeedsFactor) {
    json j = fixture_config();
    j["rope_scaling"].erase("factor");
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("missing required field \"factor\""));
}

TEST(ModelConfig, TiedEmbeddingsRejected) {
    json j = fixture_config();
    j["tie_word_embeddings"] = true;
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("tie_word_embeddings=true"));
}

TEST(ModelConfig, OtherQuantizationRejected) {
    json j = fixture_config();
    j["quantization_config"]["quant_method"] = "gptq";
    std::string msg = error_of([&] { ModelConfig::from_json(j, "cfg.json"); });
    EXPECT_THAT(msg, HasSubstr("quantization method \"gptq\" is not supported"));
}

TEST(GenerationConfig, FixtureValues) {
    GenerationConfig g = GenerationConfig::load(test::tiny_model_dir() / "generation_config.json");
    EXPECT_THAT(g.eos_token_ids, ElementsAre(200002, 199999, 200012));
    ASSERT_TRUE(g.bos_token_id.has_value());
    EXPECT_EQ(*g.bos_token_id, 199998);
    ASSERT_TRUE(g.pad_token_id.has_value());
    EXPECT_EQ(*g.pad_token_id, 199999);
    EXPECT_TRUE(g.do_sample);
    EXPECT_FALSE(g.temperature.has_value());
    EXPECT_FALSE(g.top_p.has_value());
    EXPECT_FALSE(g.top_k.has_value());
}

TEST(GenerationConfig, MissingFileGivesDefaults) {
    test::TempDir tmp;
    GenerationConfig g = GenerationConfig::load(tmp / "generation_config.json");
    EXPECT_TRUE(g.eos_token_ids.empty());
    EXPECT_FALSE(g.bos_token_id.has_value());
    EXPECT_FALSE(g.pad_token_id.has_value());
    EXPECT_FALSE(g.do_sample);
    EXPECT_FALSE(g.temperature.has_value());
}

TEST(GenerationConfig, InvalidJsonThrows) {
    test::TempDir tmp;
    const auto path = tmp / "generation_config.json";
    test::write_file(path, "{\"eos_token_id\": [1, 2");
    std::string msg = error_of([&] { GenerationConfig::load(path); });
    EXPECT_THAT(msg, HasSubstr(path.string()));
    EXPECT_THAT(msg, HasSubstr("invalid JSON"));
}

TEST(GenerationConfig, ScalarEosAndSamplingFields) {
    test::TempDir tmp;
    const auto path = tmp / "generation_config.json";
    test::write_file(path, R"({"eos_token_id": 7, "temperature": 0.6, "top_p": 0.9, "top_k": 40})");
    GenerationConfig g = GenerationConfig::load(path);
    EXPECT_THAT(g.eos_token_ids, ElementsAre(7));
    EXPECT_DOUBLE_EQ(g.temperature.value_or(-1), 0.6);
    EXPECT_DOUBLE_EQ(g.top_p.value_or(-1), 0.9);
    EXPECT_EQ(g.top_k.value_or(-1), 40);
}

TEST(GenerationConfig, NegativeTokenIdRejected) {
    test::TempDir tmp;
    const auto path = tmp / "generation_config.json";
    test::write_file(path, R"({"eos_token_id": [1, -2]})");
    std::string msg = error_of([&] { GenerationConfig::load(path); });
    EXPECT_THAT(msg, HasSubstr("field \"eos_token_id\" must hold non-negative token ids, got -2"));
}

}  // namespace
}  // namespace neural
