// The sampler's weights (engine/cpu/kernels/sampler_weights.h): the exp against std::exp, every
// ISA variant bit-identical to the scalar one, the sums, the largest value and its first index.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/kernels/expert_kernel.h"
#include "cpu/kernels/sampler_weights.h"

namespace neural::cpu {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(SamplerWeights, ExpIsWithin4e6OfStdExpAndZeroBelowItsRange) {
    double worst = 0;
    for (double x = -87.0; x <= 0.0; x += 1.73e-4) {
        const auto xf = static_cast<float>(x);
        const double rel = std::fabs(exp_nonpositive(xf) / std::exp(static_cast<double>(xf)) - 1);
        worst = std::max(worst, rel);
    }
    EXPECT_LT(worst, 4e-6);
    EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);  // the largest logit weighs exactly 1 (min-p)
    EXPECT_EQ(exp_nonpositive(-0.0f), 1.0f);
    EXPECT_NEAR(exp_nonpositive(-1e-3f), std::exp(-1e-3), 2e-7);
    EXPECT_EQ(exp_nonpositive(-87.5f), 0.0f);
    EXPECT_EQ(exp_nonpositive(-kInf), 0.0f);
    EXPECT_EQ(exp_nonpositive(kNan), 0.0f);
    // Monotone across the polynomial's segments (within float rounding: never 2 ulp back).
    float prev = 0;
    for (float x = -80.0f; x <= 0.0f; x += 0.01f) {
        const float w = exp_nonpositive(x);
        EXPECT_GE(w, prev * (1 - 2.5e-7f)) << x;
        prev = w;
    }
}

// Logits with the specials a sampler sees: masked ids (-inf), NaN from a broken model, ties.
std::vector<float> logits(std::size_t n, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> spread(0.0f, 3.0f);
    std::vector<float> v(n);
    for (float& x : v) x = spread(rng);
    if (seed % 3 == 0) v[rng() % n] = kNan;
    if (seed % 4 == 0) {
        for (std::size_t i = 0; i < n; i += 3) v[i] = -kInf;
    }
    if (n > 2 && seed % 5 == 0) v[n / 2] = v[n - 1];
    return v;
}

TEST(SamplerWeights, EveryVariantWritesTheScalarWeightsAndTheirSumsBitForBit) {
    int variants = 0;
    for (const KernelIsa isa : {KernelIsa::avx2, KernelIsa::avx512}) {
        if (!kernel_isa_available(isa)) continue;
        ++variants;
        std::uint32_t seed = 1;
        // Lengths around every vector width and chunk, and gpt-oss's vocabulary.
        std::vector<std::size_t> lengths;
        for (std::size_t n = 1; n <= 300; n += (n < 70 ? 1 : 37)) lengths.push_back(n);
        lengths.push_back(2048);
        lengths.push_back(201088);
        for (const std::size_t n : lengths) {
            for (const float t : {0.3f, 1.0f, 1.7f}) {
                for (const float min_p : {0.0f, 0.05f}) {
                    const auto v = logits(n, ++seed);
                    const float top = max_value(v.data(), n);
                    std::vector<float> want(n), got(n);
                    const WeightSums a = sampler_weights(KernelIsa::scalar, v.data(), want.data(),
                                                         n, top, 1 / t, min_p);
                    const WeightSums b =
                        sampler_weights(isa, v.data(), got.data(), n, top, 1 / t, min_p);
                    ASSERT_EQ(std::memcmp(want.data(), got.data(), n * 4), 0)
                        << kernel_isa_name(isa) << " n " << n << " T " << t;
                    double kept = 0, raw = 0;
                    for (std::size_t i = 0; i < n; ++i) {
                        kept += want[i];
                        const float w = exp_nonpositive((v[i] - top) * (1 / t));
                        raw += w;
                        // min-p: a weight below it is 0, every other is the plain exp.
                        EXPECT_EQ(want[i], w >= min_p ? w : 0.0f) << i;
                    }
                    for (const WeightSums& s : {a, b}) {
                        EXPECT_NEAR(s.kept, kept, 1e-6 * kept + 1e-30);
                        EXPECT_NEAR(s.raw, raw, 1e-6 * raw + 1e-30);
                    }
                    // The sums in one order on every variant: the draw compares against them,
                    // so a seed picks the same token on every CPU.
                    EXPECT_EQ(std::memcmp(&a.kept, &b.kept, sizeof(double)), 0)
                        << kernel_isa_name(isa) << " n " << n << " " << a.kept << " " << b.kept;
                    EXPECT_EQ(std::memcmp(&a.raw, &b.raw, sizeof(double)), 0)
                        << kernel_isa_name(isa) << " n " << n;
                }
            }
        }
    }
    if (variants == 0) GTEST_SKIP() << "this CPU runs neither the AVX2 nor the AVX-512 variant";
}

TEST(SamplerWeights, MaxValueAndFirstEqualMatchThePlainLoops) {
    std::mt19937 rng(5);
    const float specials[] = {kNan, kInf, -kInf, 0.0f, -0.0f};
    for (int trial = 0; trial < 3000; ++trial) {
        const std::size_t n = 1 + static_cast<std::size_t>(trial % 37);
        std::vector<float> v(n);
        for (float& x : v) x = static_cast<float>(static_cast<int>(rng() % 9) - 4);
        if (trial % 2 == 0) v[rng() % n] = specials[rng() % 5];
        float top = v[0];
        for (const float x : v) top = x > top ? x : top;
        const float got = max_value(v.data(), n);
        if (std::isnan(top)) {
            EXPECT_TRUE(std::isnan(got));
            continue;
        }
        ASSERT_EQ(got, top) << trial;
        std::size_t first = n;
        for (std::size_t i = 0; i < n && first == n; ++i) {
            if (v[i] == top) first = i;
        }
        EXPECT_EQ(first_equal(v.data(), n, top), first) << trial;
    }
    const std::vector<float> none = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
    EXPECT_EQ(first_equal(none.data(), none.size(), 7.0f), none.size());
}

}  // namespace
}  // namespace neural::cpu
