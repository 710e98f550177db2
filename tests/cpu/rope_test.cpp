// YaRN frequencies against the table of docs/MODEL.md "RoPE with YaRN" (120b/20b RoPE config).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cpu/rope.h"

namespace neural {
namespace {

ModelConfig gpt_oss_rope_config() {
    nlohmann::json j = {{"model_type", "gpt_oss"},
                        {"hidden_size", 2880},
                        {"intermediate_size", 2880},
                        {"num_hidden_layers", 2},
                        {"num_local_experts", 4},
                        {"num_experts_per_tok", 2},
                        {"num_attention_heads", 64},
                        {"num_key_value_heads", 8},
                        {"head_dim", 64},
                        {"vocab_size", 1000},
                        {"sliding_window", 128},
                        {"rope_theta", 150000},
                        {"rope_scaling",
                         {{"rope_type", "yarn"},
                          {"factor", 32.0},
                          {"beta_fast", 32.0},
                          {"beta_slow", 1.0},
                          {"truncate", false},
                          {"original_max_position_embeddings", 4096}}}};
    return ModelConfig::from_json(j, "test");
}

TEST(Rope, YarnFrequenciesMatchTheSpecTable) {
    cpu::Rope rope(gpt_oss_rope_config());
    const auto& f = rope.inv_freq();
    ASSERT_EQ(f.size(), 32u);
    const std::pair<int, double> table[] = {
        {0, 1.000000e+00},  {8, 5.081327e-02},  {9, 3.170570e-02}, {12, 6.794959e-03},
        {17, 1.293187e-04}, {18, 3.830881e-05}, {31, 3.023511e-07}};
    for (auto [i, want] : table) EXPECT_NEAR(f[static_cast<size_t>(i)] / want, 1.0, 1e-5) << i;
    EXPECT_NEAR(rope.concentration(), 1.3465735902799727, 1e-6);
}

TEST(Rope, TruncateRoundsTheCorrectionRange) {
    ModelConfig c = gpt_oss_rope_config();
    c.rope.truncate = true;  // standard YaRN: lo/hi floored/ceiled to 8/18 -> dim 9 differs
    cpu::Rope truncated(c);
    cpu::Rope exact(gpt_oss_rope_config());
    EXPECT_NE(truncated.inv_freq()[9], exact.inv_freq()[9]);
    EXPECT_EQ(truncated.inv_freq()[0], exact.inv_freq()[0]);
}

TEST(Rope, HalfSplitRotationWithConcentration) {
    ModelConfig c = gpt_oss_rope_config();
    cpu::Rope rope(c);
    std::vector<float> x(64, 0.0f);
    x[0] = 1.0f;  // pairs (0, 32)
    rope.apply(x.data(), 1, 3);
    const double m = rope.concentration(), a = 3.0 * rope.inv_freq()[0];
    EXPECT_NEAR(x[0], m * std::cos(a), 1e-5);
    EXPECT_NEAR(x[32], m * std::sin(a), 1e-5);
    for (int i = 1; i < 64; ++i) {
        if (i != 32) {
            EXPECT_EQ(x[static_cast<size_t>(i)], 0.0f) << i;
        }
    }
    // position 0 only scales by m
    std::vector<float> y(64, 1.0f);
    rope.apply(y.data(), 1, 0);
    for (float v : y) EXPECT_NEAR(v, m, 1e-6);
}

// The angles' sin and cos come from double arithmetic alone (not the C library's sinf / cosf,
// whose bits differ between runtimes): within one float ulp of the double sin / cos rounded to
// float at every 64 positions up to 2^20 (gpt-oss: 131,072), for every frequency of the table.
TEST(Rope, SinAndCosAreTheFloatRoundedAnglesAtEveryPosition) {
    ModelConfig c = gpt_oss_rope_config();
    c.rope = RopeScaling{};  // concentration 1: the rotated unit vector is (cos, sin) itself
    cpu::Rope rope(c);
    int off = 0, checked = 0;
    for (std::int64_t pos = 0; pos <= (std::int64_t{1} << 20); pos += 61) {
        for (int i = 0; i < 32; ++i) {
            std::vector<float> x(64, 0.0f);
            x[static_cast<size_t>(i)] = 1.0f;
            rope.apply(x.data(), 1, pos);
            const float angle = static_cast<float>(pos) * rope.inv_freq()[static_cast<size_t>(i)];
            const float want_c = static_cast<float>(std::cos(static_cast<double>(angle)));
            const float want_s = static_cast<float>(std::sin(static_cast<double>(angle)));
            const float got_c = x[static_cast<size_t>(i)], got_s = x[static_cast<size_t>(i + 32)];
            for (auto [got, want] : {std::pair{got_c, want_c}, std::pair{got_s, want_s}}) {
                ++checked;
                if (got == want) continue;
                ++off;
                EXPECT_TRUE(got == std::nextafter(want, 2.0f) || got == std::nextafter(want, -2.0f))
                    << "pos " << pos << " i " << i << " got " << got << " want " << want;
            }
        }
    }
    // The double rounding of a correctly rounded double leaves ties only: a handful at most.
    EXPECT_LT(off, checked / 100000 + 3) << off << " of " << checked;
}

TEST(Rope, PlainRopeWithoutScaling) {
    ModelConfig c = gpt_oss_rope_config();
    c.rope = RopeScaling{};
    cpu::Rope rope(c);
    EXPECT_FLOAT_EQ(rope.concentration(), 1.0f);
    EXPECT_NEAR(rope.inv_freq()[1] / std::pow(150000.0, -2.0 / 64.0), 1.0, 1e-6);
}

}  // namespace
}  // namespace neural
