// Sampler: greedy paths, seeding, the vocabulary limit, each filter, the empirical distribution
// and parameter validation.
#include <algorithm>
#include <cmath>
#include <functional>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "neural/error.h"
#include "runtime/sampler.h"
#include "support/fixtures.h"

namespace neural {
namespace {

using test::error_of;

using ::testing::HasSubstr;

// Deterministic, irregular logits with a unique maximum at `peak`.
std::vector<float> wavy_logits(std::size_t n, std::size_t peak) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(1.7 * double(i)));
    v[peak] = 1.5f;
    return v;
}

SamplingParams params(float temperature, std::uint64_t seed = 0) {
    SamplingParams p;
    p.temperature = temperature;
    p.seed = seed;
    return p;
}

TEST(Argmax, LowestIndexWinsTies) {
    std::vector<float> v = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
    EXPECT_EQ(argmax(v), 1);
    std::vector<float> neg = {-5.0f, -1.0f, -1.0f};
    EXPECT_EQ(argmax(neg), 1);
    std::vector<float> one = {42.0f};
    EXPECT_EQ(argmax(one), 0);
}

// argmax against the plain single pass (the definition: the first value no later one exceeds)
// over lengths around the vector width, ties, NaNs (skipped unless first), signed zeros and
// infinities.
TEST(Argmax, MatchesThePlainSinglePass) {
    auto plain = [](const std::vector<float>& v) {
        std::int32_t best = 0;
        for (std::size_t i = 1; i < v.size(); ++i) {
            if (v[i] > v[static_cast<std::size_t>(best)]) best = static_cast<std::int32_t>(i);
        }
        return best;
    };
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float inf = std::numeric_limits<float>::infinity();
    std::mt19937 rng(17);
    const float specials[] = {nan, inf, -inf, 0.0f, -0.0f, 3.0f};
    for (int trial = 0; trial < 4000; ++trial) {
        const std::size_t n = trial < 3000 ? 1 + trial % 13 : 201088 - trial % 7;
        if (trial >= 3000 && trial % 50 != 0) continue;  // 20 vocabulary-sized arrays
        std::vector<float> v(n);
        // Few distinct values, so ties are common.
        for (float& x : v) x = static_cast<float>(static_cast<int>(rng() % 7) - 3);
        const int extra = static_cast<int>(rng() % 3);
        for (int j = 0; j < extra; ++j) v[rng() % n] = specials[rng() % 6];
        ASSERT_EQ(argmax(v), plain(v)) << "trial " << trial << " n " << n;
    }
}

TEST(Sampler, TemperatureZeroIsArgmax) {
    Sampler s(params(0.0f, 123));
    const auto logits = wavy_logits(100, 37);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(logits), 37);
}

TEST(Sampler, TopK1IsArgmax) {
    SamplingParams p = params(5.0f, 9);
    p.top_k = 1;
    Sampler s(p);
    const auto logits = wavy_logits(100, 61);
    for (int i = 0; i < 200; ++i) EXPECT_EQ(s.sample(logits), 61);
}

TEST(Sampler, SameSeedSameSequence) {
    const auto logits = wavy_logits(64, 3);
    auto draw = [&](std::uint64_t seed) {
        Sampler s(params(1.0f, seed));
        std::vector<std::int32_t> out;
        for (int i = 0; i < 200; ++i) out.push_back(s.sample(logits));
        return out;
    };
    const auto a = draw(42);
    EXPECT_EQ(a, draw(42));
    const auto b = draw(43);
    EXPECT_NE(a, b);
    // The sequence really is random: many distinct tokens.
    EXPECT_GT(std::set<std::int32_t>(a.begin(), a.end()).size(), 20u);
}

TEST(Sampler, ValidLimitNeverReturnsIdsPastIt) {
    // The rows past `valid` hold by far the largest logits; they must never be chosen.
    std::vector<float> logits(20, 0.0f);
    for (std::size_t i = 0; i < 20; ++i) logits[i] = 0.1f * static_cast<float>(i % 5);
    logits[16] = 50.0f;
    logits[19] = 60.0f;
    const std::size_t valid = 16;

    Sampler greedy(params(0.0f));
    EXPECT_EQ(greedy.sample(logits, valid), 4);  // first 0.4 among [0, 16)

    SamplingParams k1 = params(1.0f);
    k1.top_k = 1;
    Sampler topk(k1);
    EXPECT_EQ(topk.sample(logits, valid), 4);

    for (float t : {0.5f, 1.0f, 3.0f}) {
        SamplingParams p = params(t, 7);
        p.top_p = 0.9f;
        p.top_k = 10;
        Sampler s(p);
        Sampler plain(params(t, 8));
        for (int i = 0; i < 2000; ++i) {
            EXPECT_LT(s.sample(logits, valid), 16);
            EXPECT_LT(plain.sample(logits, valid), 16);
        }
    }
}

TEST(Sampler, ValidLargerThanLogitsIsClipped) {
    std::vector<float> logits = {0.0f, 2.0f, 1.0f};
    Sampler s(params(0.0f));
    EXPECT_EQ(s.sample(logits, 1000), 1);
}

TEST(Sampler, EmptyDistributionIsAnError) {
    Sampler s(params(1.0f));
    std::vector<float> none;
    EXPECT_THAT(error_of([&] { s.sample(none); }),
                HasSubstr("cannot sample from an empty distribution"));
    std::vector<float> logits = {1.0f, 2.0f};
    EXPECT_THAT(error_of([&] { s.sample(logits, 0); }),
                HasSubstr("cannot sample from an empty distribution"));
}

TEST(Sampler, TinyTopPIsArgmax) {
    SamplingParams p = params(1.0f, 11);
    p.top_p = 1e-6f;
    Sampler s(p);
    const auto logits = wavy_logits(100, 12);
    for (int i = 0; i < 500; ++i) EXPECT_EQ(s.sample(logits), 12);
}

TEST(Sampler, MinP1IsArgmax) {
    SamplingParams p = params(2.0f, 11);
    p.min_p = 1.0f;
    Sampler s(p);
    const auto logits = wavy_logits(100, 88);
    for (int i = 0; i < 500; ++i) EXPECT_EQ(s.sample(logits), 88);
}

// Counts of each id over `n` draws.
std::vector<int> histogram(Sampler& s, const std::vector<float>& logits, int n) {
    std::vector<int> counts(logits.size(), 0);
    for (int i = 0; i < n; ++i) {
        const auto id = s.sample(logits);
        EXPECT_GE(id, 0);
        EXPECT_LT(static_cast<std::size_t>(id), logits.size());
        if (id >= 0 && static_cast<std::size_t>(id) < logits.size()) ++counts[size_t(id)];
    }
    return counts;
}

TEST(Sampler, EmpiricalFrequenciesMatchSoftmax) {
    const std::vector<float> logits = {1.0f, 2.0f, 0.5f};
    for (float t : {0.7f, 1.0f, 1.8f}) {
        Sampler s(params(t, 2024));
        const int n = 20000;
        const auto counts = histogram(s, logits, n);
        double z = 0;
        for (float l : logits) z += std::exp(l / t);
        for (std::size_t i = 0; i < logits.size(); ++i) {
            const double want = std::exp(logits[i] / t) / z;
            const double got = double(counts[i]) / n;
            EXPECT_NEAR(got, want, 0.015) << "T=" << t << " id " << i;
        }
    }
}

TEST(Sampler, TopKRestrictsAndRenormalizes) {
    // Probabilities 0.4, 0.3, 0.2, 0.1 at T=1; top-2 keeps ids 0 and 1 at 4:3.
    const std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f),
                                       std::log(0.1f)};
    SamplingParams p = params(1.0f, 5);
    p.top_k = 2;
    Sampler s(p);
    const auto counts = histogram(s, logits, 20000);
    EXPECT_EQ(counts[2], 0);
    EXPECT_EQ(counts[3], 0);
    EXPECT_NEAR(counts[0] / 20000.0, 4.0 / 7.0, 0.015);
}

TEST(Sampler, TopPKeepsTheSmallestPrefixReachingP) {
    // 0.5 + 0.3 >= 0.7: ids 0 and 1 stay (5:3), id 2 never appears.
    const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
    SamplingParams p = params(1.0f, 6);
    p.top_p = 0.7f;
    Sampler s(p);
    const auto counts = histogram(s, logits, 20000);
    EXPECT_EQ(counts[2], 0);
    EXPECT_NEAR(counts[0] / 20000.0, 5.0 / 8.0, 0.015);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
    // min_p 0.5: the floor is 0.25; 0.3 stays, 0.2 goes.
    const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
    SamplingParams p = params(1.0f, 7);
    p.min_p = 0.5f;
    Sampler s(p);
    const auto counts = histogram(s, logits, 20000);
    EXPECT_EQ(counts[2], 0);
    EXPECT_GT(counts[1], 0);
    EXPECT_NEAR(counts[0] / 20000.0, 5.0 / 8.0, 0.015);
}

TEST(Sampler, HugeLogitsDoNotOverflow) {
    const std::vector<float> logits = {1e30f, 1e30f - 1e24f, -1e30f};
    Sampler s(params(1.0f, 3));
    for (int i = 0; i < 100; ++i) EXPECT_EQ(s.sample(logits), 0);
}

// Logits shaped like a language model's over a vocabulary of n: a few clear favourites over a
// long tail (peaky), or a flat normal spread (the hardest case for top-p: a large head).
std::vector<float> model_like_logits(std::size_t n, std::uint32_t seed, bool peaky) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> spread(0.0f, peaky ? 2.0f : 3.0f);
    std::vector<float> v(n);
    for (float& x : v) x = spread(rng);
    if (peaky) {
        for (int j = 0; j < 8; ++j) v[rng() % n] = 14.0f - 1.5f * static_cast<float>(j);
    }
    return v;
}

// The fast path against the reference for one set of logits and parameters over many draws.
// The reference's token is monotone in the draw along its candidate order (by logit, then id,
// where top-k or top-p sort; else by id): the fast path's token must be the reference's, or lie
// in that order between the reference's tokens at u - 1e-5 and u + 1e-5 (its float weights
// move the boundaries by less). Returns the number of draws where the two differ.
int compare_with_reference(const std::vector<float>& logits, std::size_t valid,
                           const SamplingParams& p, int draws) {
    const bool ranked = (p.top_k > 0 && static_cast<std::size_t>(p.top_k) < valid) || p.top_p < 1;
    auto not_after = [&](std::int32_t a, std::int32_t b) {  // a comes before b, or is b
        if (!ranked) return a <= b;
        const float la = logits[static_cast<std::size_t>(a)],
                    lb = logits[static_cast<std::size_t>(b)];
        return la > lb || (la == lb && a <= b);
    };
    Sampler fast(p);
    std::mt19937_64 rng(99);
    int differ = 0;
    for (int i = 0; i < draws; ++i) {
        const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
        const std::int32_t got = fast.pick(logits, valid, u);
        const std::int32_t want = sample_reference(p, logits, valid, u);
        if (got == want) continue;
        ++differ;
        const std::int32_t below = sample_reference(p, logits, valid, std::max(0.0, u - 1e-5));
        const std::int32_t above =
            sample_reference(p, logits, valid, std::min(1.0 - 0x1.0p-53, u + 1e-5));
        EXPECT_TRUE(not_after(below, got) && not_after(got, above))
            << "u " << u << " fast " << got << " reference " << want << " (" << below << ", "
            << above << ") T " << p.temperature << " top_k " << p.top_k << " top_p " << p.top_p
            << " min_p " << p.min_p;
    }
    return differ;
}

TEST(Sampler, FastPathPicksTheReferencesTokensAwayFromBoundaries) {
    // A gpt-oss-sized vocabulary (the lm_head's padded rows past `valid`) and a small odd one.
    for (const std::size_t n : {std::size_t{201088}, std::size_t{1003}}) {
        const std::size_t valid = n == 201088 ? 200000 : n;
        for (const bool peaky : {true, false}) {
            const auto logits = model_like_logits(n, static_cast<std::uint32_t>(n), peaky);
            // The reference sorts the large vocabulary on every draw: fewer cases there.
            const std::vector<float> temps =
                n == 201088 ? std::vector<float>{1.0f} : std::vector<float>{0.3f, 1.0f, 1.7f};
            for (const float t : temps) {
                for (const int top_k : {0, 40}) {
                    for (const float top_p : {1.0f, 0.9f, 0.5f}) {
                        for (const float min_p : {0.0f, 0.05f}) {
                            SamplingParams p = params(t, 1);
                            p.top_k = top_k;
                            p.top_p = top_p;
                            p.min_p = min_p;
                            const int draws = n == 201088 ? 12 : 100;
                            const int boundary = compare_with_reference(logits, valid, p, draws);
                            if (top_k > 0) {
                                EXPECT_EQ(boundary, 0);  // the same double path
                            }
                            // A peaky distribution has few boundaries near any draw; a flat one
                            // with a large top-p head has tens of thousands.
                            EXPECT_LE(boundary, peaky ? 1 : draws / 4);
                        }
                    }
                }
            }
        }
    }
}

TEST(Sampler, TopKIsTheReferencePathForEveryDraw) {
    const auto logits = model_like_logits(20000, 3, true);
    for (const int top_k : {2, 40, 1000}) {
        SamplingParams p = params(0.8f, 4);
        p.top_k = top_k;
        p.top_p = 0.95f;
        Sampler fast(p);
        for (int i = 0; i <= 300; ++i) {
            const double u = i / 300.0 * (1.0 - 1e-9);
            ASSERT_EQ(fast.pick(logits, logits.size(), u),
                      sample_reference(p, logits, logits.size(), u))
                << "top_k " << top_k << " u " << u;
        }
    }
}

TEST(Sampler, SampleIsPickWithTheSeededDraw) {
    const auto logits = model_like_logits(4099, 8, false);
    SamplingParams p = params(1.0f, 77);
    Sampler a(p);
    std::mt19937_64 rng(77);
    Sampler b(p);
    for (int i = 0; i < 100; ++i) {
        const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
        EXPECT_EQ(a.sample(logits), b.pick(logits, logits.size(), u));
    }
}

// Masked tokens (a constraint sets them to -infinity) and rows past `valid` are never picked,
// whatever the draw, on every path; nor is a token whose weight is below float's range.
TEST(Sampler, MaskedAndNegligibleTokensAreNeverPicked) {
    constexpr float kMasked = -std::numeric_limits<float>::infinity();
    std::vector<float> logits = model_like_logits(20011, 5, true);
    for (std::size_t i = 0; i < logits.size(); ++i) {
        if (i % 3 != 0) logits[i] = kMasked;
    }
    logits[20010] = 1000.0f;  // past valid
    logits[3] = -500.0f;      // 1e-200 of the others at T = 1: weight 0
    const std::size_t valid = 20010;
    for (const float top_p : {1.0f, 0.9f}) {
        for (const int top_k : {0, 100}) {
            SamplingParams p = params(1.0f, 2);
            p.top_p = top_p;
            p.top_k = top_k;
            Sampler s(p);
            for (const double u : {0.0, 1e-12, 0.25, 0.5, 0.999, 1.0 - 0x1.0p-53}) {
                const std::int32_t id = s.pick(logits, valid, u);
                ASSERT_GE(id, 0);
                ASSERT_LT(static_cast<std::size_t>(id), valid);
                EXPECT_NE(logits[static_cast<std::size_t>(id)], kMasked) << u;
                EXPECT_NE(id, 3) << u;
            }
        }
    }
    // Everything masked but one id: that id.
    std::vector<float> one(1000, kMasked);
    one[417] = -3.0f;
    Sampler s(params(1.3f, 9));
    for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(one), 417);
}

// The fast path's probabilities: the frequencies of a small vocabulary over many draws match
// the softmax with top-p and min-p applied (top-p before renormalizing min-p, as the reference).
TEST(Sampler, FastPathFrequenciesMatchTheFilteredSoftmax) {
    const std::vector<float> logits = {std::log(0.4f), std::log(0.25f), std::log(0.2f),
                                       std::log(0.1f), std::log(0.05f)};
    SamplingParams p = params(1.0f, 31);
    p.top_p = 0.8f;  // 0.4 + 0.25 + 0.2 = 0.85 >= 0.8: ids 0, 1, 2
    Sampler s(p);
    const auto counts = histogram(s, logits, 30000);
    EXPECT_EQ(counts[3], 0);
    EXPECT_EQ(counts[4], 0);
    EXPECT_NEAR(counts[0] / 30000.0, 0.4 / 0.85, 0.015);
    EXPECT_NEAR(counts[2] / 30000.0, 0.2 / 0.85, 0.015);
}

// What a draw reads of the logits (the screened lm_head's request: docs/KERNELS.md "Screened
// lm_head"): only where it is provable, and penalties passed on only when active.
TEST(LogitsScreenFor, OnlyWhereTheDrawProvablyReadsFewLogits) {
    SamplingParams p;
    p.temperature = 0;
    auto s = logits_screen_for(p, 1000, nullptr);
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->top_k, 1);
    EXPECT_EQ(s->window, 0.0);
    EXPECT_EQ(s->valid, 1000u);
    p.temperature = 0.7f;
    p.top_k = 1;
    EXPECT_EQ(logits_screen_for(p, 1000, nullptr)->top_k, 1);
    p.top_k = 40;
    p.top_p = 0.9f;  // inside the top k: still only the k best are read
    EXPECT_EQ(logits_screen_for(p, 1000, nullptr)->top_k, 40);
    p.top_k = 1000;  // not fewer than the vocabulary: the whole distribution
    EXPECT_FALSE(logits_screen_for(p, 1000, nullptr).has_value());
    p.top_k = 0;
    EXPECT_FALSE(logits_screen_for(p, 1000, nullptr).has_value());  // top-p alone
    p.top_p = 1.0f;
    EXPECT_FALSE(logits_screen_for(p, 1000, nullptr).has_value());  // plain temperature
    p.min_p = 0.1f;
    s = logits_screen_for(p, 1000, nullptr);
    ASSERT_TRUE(s.has_value());
    EXPECT_NEAR(s->window, 0.7 * (0.01 - std::log(0.1)), 1e-6);
    p.top_p = 0.95f;  // top-p reads every weight's sum
    EXPECT_FALSE(logits_screen_for(p, 1000, nullptr).has_value());
    SamplingParams pen;
    pen.temperature = 0;
    TokenPenalties off(pen);
    EXPECT_EQ(logits_screen_for(pen, 10, &off)->penalties, nullptr);
    pen.presence_penalty = 0.5f;
    TokenPenalties on(pen);
    EXPECT_EQ(logits_screen_for(pen, 10, &on)->penalties, &on);
}

// The logits a screen leaves (the ids that can matter exact, the rest -infinity) give the
// sampler's token for every draw: top-k keeps the k best, min-p the ids within the window.
TEST(LogitsScreenFor, ScreenedLogitsGiveTheSameTokenForEveryDraw) {
    std::mt19937 rng(17);
    std::normal_distribution<float> d(0.0f, 3.0f);
    const std::size_t n = 5000;
    for (int round = 0; round < 6; ++round) {
        std::vector<float> logits(n);
        for (auto& v : logits) v = d(rng);
        SamplingParams p;
        p.temperature = round % 2 ? 0.6f : 1.3f;
        if (round < 3) {
            p.top_k = 7 + round * 20;
            p.top_p = round == 2 ? 0.7f : 1.0f;
        } else {
            p.min_p = round == 3 ? 0.05f : round == 4 ? 0.3f : 1.0f;
        }
        const auto s = logits_screen_for(p, n, nullptr);
        ASSERT_TRUE(s.has_value());
        std::vector<float> screened(n, -std::numeric_limits<float>::infinity());
        std::vector<float> sorted = logits;
        std::sort(sorted.begin(), sorted.end(), std::greater<>());
        // The least a kept id may have: the k-th value, or the top minus the window.
        const float keep = s->window > 0 ? static_cast<float>(sorted[0] - s->window)
                                         : sorted[static_cast<std::size_t>(s->top_k) - 1];
        std::size_t kept = 0;
        for (std::size_t i = 0; i < n; ++i) {
            if (logits[i] >= keep) {
                screened[i] = logits[i];
                ++kept;
            }
        }
        EXPECT_LT(kept, n);
        Sampler full(p), part(p);
        for (int k = 0; k < 200; ++k) {
            const double u = (k + 0.5) / 200.0;
            EXPECT_EQ(part.pick(screened, n, u), full.pick(logits, n, u)) << "u " << u;
        }
    }
}

TEST(SamplingParams, DefaultsAreValid) {
    SamplingParams p;
    EXPECT_NO_THROW(p.validate());
    EXPECT_FLOAT_EQ(p.temperature, 1.0f);
    EXPECT_EQ(p.top_k, 0);
    EXPECT_FLOAT_EQ(p.top_p, 1.0f);
    EXPECT_FLOAT_EQ(p.min_p, 0.0f);
}

TEST(SamplingParams, NegativeTemperature) {
    SamplingParams p;
    p.temperature = -0.5f;
    EXPECT_THAT(error_of([&] { p.validate(); }),
                HasSubstr("temperature must be a finite number >= 0, got -0.5"));
    // The constructor validates too.
    EXPECT_THAT(error_of([&] { Sampler s(p); }), HasSubstr("temperature"));
}

TEST(SamplingParams, NonFiniteTemperature) {
    SamplingParams p;
    p.temperature = std::numeric_limits<float>::quiet_NaN();
    EXPECT_THAT(error_of([&] { p.validate(); }), HasSubstr("temperature must be a finite number"));
    p.temperature = std::numeric_limits<float>::infinity();
    EXPECT_THAT(error_of([&] { p.validate(); }), HasSubstr("temperature must be a finite number"));
}

TEST(SamplingParams, TopPRange) {
    SamplingParams p;
    p.top_p = 0.0f;
    EXPECT_THAT(error_of([&] { p.validate(); }), HasSubstr("top_p must be in (0, 1], got 0"));
    p.top_p = 1.5f;
    EXPECT_THAT(error_of([&] { p.validate(); }), HasSubstr("top_p must be in (0, 1], got 1.5"));
    p.top_p = -0.1f;
    EXPECT_THAT(error_of([&] { p.validate(); }), HasSubstr("top_p must be in (0, 1]"));
    p.top_p = 1.0f;
    EXPECT_NO_THROW(p.validate());
}

TEST(SamplingParams, MinPRange) {
    SamplingParams p;
    p.min_p = 1.5f;
    EXPECT_THAT(error_of([&] { p.validate(); }), HasSubstr("min_p must be in [0, 1], got 1.5"));
    p.min_p = -0.25f;
    EXPECT_THAT(error_of([&] { p.validate(); }), HasSubstr("min_p must be in [0, 1], got -0.25"));
    p.min_p = 1.0f;
    EXPECT_NO_THROW(p.validate());
}

TEST(SamplingParams, NegativeTopK) {
    SamplingParams p;
    p.top_k = -1;
    EXPECT_THAT(error_of([&] { p.validate(); }), HasSubstr("top_k must be >= 0, got -1"));
}

// Penalties: the counted path (TokenPenalties) gives the reference's logits bit for bit, for
// every mix of the three penalties, and a penalised token loses the greedy pick.
TEST(TokenPenalties, MatchReferenceBitForBit) {
    std::mt19937 gen(7);
    std::uniform_int_distribution<std::int32_t> id(0, 99);
    std::vector<std::int32_t> generated;
    for (int i = 0; i < 300; ++i) generated.push_back(id(gen) % (i % 3 == 0 ? 100 : 10));
    for (const auto& [presence, frequency, repetition] :
         std::vector<std::tuple<float, float, float>>{{0.5f, 0.0f, 1.0f},
                                                      {0.0f, 0.3f, 1.0f},
                                                      {-1.0f, 0.7f, 1.3f},
                                                      {0.0f, 0.0f, 0.8f},
                                                      {2.0f, -2.0f, 1.0f}}) {
        SamplingParams p;
        p.presence_penalty = presence;
        p.frequency_penalty = frequency;
        p.repetition_penalty = repetition;
        std::vector<float> fast = wavy_logits(100, 3), plain = fast;
        TokenPenalties t(p);
        ASSERT_TRUE(t.active());
        for (std::int32_t g : generated) t.add(g);
        t.apply(fast);
        apply_penalties_reference(p, generated, plain);
        for (std::size_t i = 0; i < fast.size(); ++i) {
            EXPECT_EQ(std::memcmp(&fast[i], &plain[i], sizeof(float)), 0)
                << "id " << i << " " << fast[i] << " vs " << plain[i];
        }
    }
    SamplingParams p = params(0.0f);
    EXPECT_FALSE(TokenPenalties(p).active());
    p.presence_penalty = 2.0f;
    std::vector<float> logits = wavy_logits(50, 7);
    TokenPenalties t(p);
    t.add(7);
    t.apply(logits);
    Sampler s(p);
    EXPECT_NE(s.sample(logits), 7);
    EXPECT_FLOAT_EQ(logits[7], 1.5f - 2.0f);
    // HF's repetition penalty: positive logits divided, negative multiplied.
    SamplingParams r;
    r.repetition_penalty = 2.0f;
    std::vector<float> two = {4.0f, -4.0f, 1.0f};
    TokenPenalties rt(r);
    rt.add(0);
    rt.add(1);
    rt.apply(two);
    EXPECT_EQ(two, (std::vector<float>{2.0f, -8.0f, 1.0f}));
    r.repetition_penalty = 0.0f;
    EXPECT_THAT(error_of([&] { r.validate(); }), HasSubstr("repetition_penalty must be in"));
    r.repetition_penalty = 1.0f;
    r.presence_penalty = 2.5f;
    EXPECT_THAT(error_of([&] { r.validate(); }), HasSubstr("presence_penalty must be in [-2, 2]"));
}

// logprobs: the fast path (one log-sum-exp, a partial sort for the top list) against the plain
// log-softmax, on the real vocabulary size.
TEST(TokenLogprobs, MatchTheReferenceLogSoftmax) {
    constexpr std::size_t kVocab = 201088;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.0f, 3.0f);
    std::vector<float> logits(kVocab);
    for (float& l : logits) l = normal(rng);
    logits[1234] = logits[4321] = 14.0f;    // a tie at the top: the lower id first
    const std::size_t valid = kVocab - 88;  // ids past the tokenizer's are never counted
    logits[kVocab - 1] = 100.0f;
    const std::vector<double> ref = log_softmax_reference(logits, valid);
    double total = 0;
    for (double l : ref) total += std::exp(l);
    EXPECT_NEAR(total, 1.0, 1e-9);
    std::vector<std::pair<std::int32_t, double>> top;
    for (std::int32_t chosen : {0, 1234, 4321, 99999, static_cast<std::int32_t>(valid) - 1}) {
        const double lp = token_logprobs(logits, valid, chosen, 20, top);
        EXPECT_NEAR(lp, ref[static_cast<std::size_t>(chosen)], 1e-9) << chosen;
        ASSERT_EQ(top.size(), 20u);
        EXPECT_EQ(top[0].first, 1234);
        EXPECT_EQ(top[1].first, 4321);
        for (std::size_t i = 0; i < top.size(); ++i) {
            EXPECT_NEAR(top[i].second, ref[static_cast<std::size_t>(top[i].first)], 1e-9);
            if (i > 0) {
                EXPECT_GE(top[i - 1].second, top[i].second);
            }
        }
        // The list is the 20 most likely ids: nothing outside it is likelier than its last.
        std::vector<double> sorted = ref;
        std::nth_element(sorted.begin(), sorted.begin() + 19, sorted.end(), std::greater<>());
        EXPECT_NEAR(top.back().second, sorted[19], 1e-9);
        // The chosen token's rank (ties: the lower id first): listed at that place when it is
        // among the 20 likeliest, else not listed.
        std::size_t rank = 0;
        const float own = logits[static_cast<std::size_t>(chosen)];
        for (std::size_t j = 0; j < valid; ++j) {
            if (logits[j] > own || (logits[j] == own && static_cast<std::int32_t>(j) < chosen))
                ++rank;
        }
        auto at =
            std::find_if(top.begin(), top.end(), [&](const auto& t) { return t.first == chosen; });
        if (rank < 20) {
            ASSERT_NE(at, top.end()) << chosen;
            EXPECT_EQ(static_cast<std::size_t>(at - top.begin()), rank);
        } else {
            EXPECT_EQ(at, top.end()) << chosen;
        }
    }
    EXPECT_EQ(token_logprobs(logits, valid, 0, 0, top), ref[0]);
    EXPECT_TRUE(top.empty());
    // Logprobs do not depend on the sampling temperature: they are the model's distribution.
    std::vector<float> small = {1.0f, 2.0f, 3.0f};
    const double lp = token_logprobs(small, 3, 2, 3, top);
    EXPECT_NEAR(lp, 3.0 - std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), 1e-12);
    EXPECT_EQ(top[0].first, 2);
    EXPECT_EQ(top[2].first, 0);
}

}  // namespace
}  // namespace neural
