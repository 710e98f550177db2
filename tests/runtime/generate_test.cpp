// The token loop on the tiny fixture: greedy tokens match the golden reference, stop tokens,
// cancellation, continuation on the same cache, seeded sampling.
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cpu/reference_model.h"
#include "neural/error.h"
#include "runtime/generate.h"
#include "runtime/model.h"
#include "support/fixtures.h"

namespace neural {
namespace {

using test::error_of;

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// golden.json "single": prompt [200006], greedy continuation (margins >= 0.045 for these four).
const std::vector<TokenId> kPrompt = {200006};
const std::vector<TokenId> kGreedy = {96596, 123955, 105915, 27261};

class Generate : public ::testing::Test {
protected:
    static void SetUpTestSuite() { model_ = Model::load(test::tiny_model_dir()).release(); }
    static void TearDownTestSuite() {
        delete model_;
        model_ = nullptr;
    }
    static GenerateOptions greedy(int max_tokens) {
        GenerateOptions o;
        o.max_tokens = max_tokens;
        o.sampling.temperature = 0.0f;
        return o;
    }
    static Model* model_;
};

Model* Generate::model_ = nullptr;

TEST_F(Generate, GreedyMatchesGolden) {
    KvCache cache = model_->new_cache();
    std::vector<TokenId> streamed;
    auto r = generate(*model_, cache, kPrompt, greedy(4), [&](TokenId id) {
        streamed.push_back(id);
        return true;
    });
    EXPECT_EQ(r.tokens, kGreedy);
    EXPECT_EQ(streamed, kGreedy);
    EXPECT_EQ(r.finish, FinishReason::kLength);
    EXPECT_STREQ(finish_reason_name(r.finish), "length");
    // The prompt and every generated token but the last were processed.
    EXPECT_EQ(cache.size(), 4);
}

TEST_F(Generate, ContinuesOnTheSameCache) {
    KvCache cache = model_->new_cache();
    auto first = generate(*model_, cache, kPrompt, greedy(2));
    ASSERT_EQ(first.tokens, std::vector<TokenId>(kGreedy.begin(), kGreedy.begin() + 2));
    EXPECT_EQ(cache.size(), 2);
    // Feed the last token back as the new "prompt": the continuation is the same greedy path.
    const std::vector<TokenId> next = {first.tokens.back()};
    auto second = generate(*model_, cache, next, greedy(2));
    EXPECT_THAT(second.tokens, ElementsAre(kGreedy[2], kGreedy[3]));
}

TEST_F(Generate, TruncatedCacheRegeneratesTheSameTokens) {
    KvCache cache = model_->new_cache();
    generate(*model_, cache, kPrompt, greedy(4));
    cache.truncate(0);
    auto again = generate(*model_, cache, kPrompt, greedy(4));
    EXPECT_EQ(again.tokens, kGreedy);
}

TEST_F(Generate, StopsOnAStopToken) {
    KvCache cache = model_->new_cache();
    GenerateOptions o = greedy(10);
    o.stop_tokens = {kGreedy[1]};
    auto r = generate(*model_, cache, kPrompt, o);
    EXPECT_THAT(r.tokens, ElementsAre(kGreedy[0], kGreedy[1]));  // the stop token is included
    EXPECT_EQ(r.finish, FinishReason::kStop);
    EXPECT_STREQ(finish_reason_name(r.finish), "stop");
}

TEST_F(Generate, CallbackReturningFalseCancels) {
    KvCache cache = model_->new_cache();
    int calls = 0;
    auto r = generate(*model_, cache, kPrompt, greedy(10), [&](TokenId) { return ++calls < 2; });
    EXPECT_EQ(calls, 2);
    EXPECT_THAT(r.tokens, ElementsAre(kGreedy[0], kGreedy[1]));
    EXPECT_EQ(r.finish, FinishReason::kCancelled);
    EXPECT_STREQ(finish_reason_name(r.finish), "cancelled");
    EXPECT_EQ(cache.size(), 2);
}

TEST_F(Generate, CancelFlagBeforeStartLeavesTheCacheUnchanged) {
    KvCache cache = model_->new_cache();
    std::atomic<bool> cancel{true};
    GenerateOptions o = greedy(10);
    o.cancel = &cancel;
    auto r = generate(*model_, cache, kPrompt, o);
    EXPECT_TRUE(r.tokens.empty());
    EXPECT_EQ(r.finish, FinishReason::kCancelled);
    EXPECT_EQ(cache.size(), 0);
}

// A prompt runs in blocks of kPromptBlock tokens; where the blocks start changes no bit.
TEST_F(Generate, PromptBlocksGiveTheSameLogitsWhereverTheyStart) {
    std::vector<TokenId> prompt(2 * kPromptBlock + 44);
    for (std::size_t i = 0; i < prompt.size(); ++i) {
        prompt[i] = static_cast<TokenId>((i * 104729 + 7) % 199998);
    }
    ForwardOptions all;
    all.all_logits = true;
    KvCache whole = model_->new_cache();
    const std::vector<float> a = model_->forward(prompt, whole, all);
    KvCache split = model_->new_cache();
    const std::span<const TokenId> p(prompt);
    std::vector<float> b = model_->forward(p.first(100), split, all);
    const std::vector<float> rest = model_->forward(p.subspan(100), split, all);
    b.insert(b.end(), rest.begin(), rest.end());
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
    EXPECT_EQ(whole.size(), split.size());
}

// Sees every route of a forward pass and takes its time over each: a test-only slow prompt, so
// one layer of a long prompt runs for seconds on any machine.
class SlowObserver : public RouterObserver {
public:
    void on_route(int, std::int64_t, std::span<const int>, std::span<const float>) override {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
};

// A cancel during a long prompt returns within a prompt block's router pass, attention row or
// expert (docs/RELIABILITY.md "Cancelling a prompt"), leaves the cache as it was, and the
// sequence then continues exactly as a fresh one.
TEST_F(Generate, CancelDuringALongPromptReturnsPromptlyAndKeepsTheCache) {
    using Clock = std::chrono::steady_clock;
    KvCache cache = model_->new_cache();
    ASSERT_EQ(generate(*model_, cache, kPrompt, greedy(1)).tokens.front(), kGreedy[0]);
    ASSERT_EQ(cache.size(), 1);
    std::vector<TokenId> prompt(20000);
    for (std::size_t i = 0; i < prompt.size(); ++i) {
        prompt[i] = static_cast<TokenId>((i * 7919 + 13) % 199998);
    }
    std::atomic<bool> cancel{false};
    SlowObserver slow;
    ForwardOptions fo;
    fo.cancel = &cancel;
    fo.observer = &slow;  // at least 2 s per layer of this prompt
    Clock::time_point cancelled_at{};
    std::thread canceller([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        cancelled_at = Clock::now();
        cancel.store(true);
    });
    EXPECT_THROW(model_->forward(prompt, cache, fo), Cancelled);
    const auto returned = Clock::now();
    canceller.join();
    EXPECT_EQ(cache.size(), 1);
    // Liveness, not speed: checked only between layers, the prompt went on to the end of the
    // layer the cancel came in (seconds).
    EXPECT_LT(std::chrono::duration<double>(returned - cancelled_at).count(), 1.5);

    // generate() reports the same cancel as its finish reason.
    GenerateOptions o = greedy(4);
    o.cancel = &cancel;
    const auto r = generate(*model_, cache, prompt, o);
    EXPECT_EQ(r.finish, FinishReason::kCancelled);
    EXPECT_TRUE(r.tokens.empty());
    EXPECT_EQ(cache.size(), 1);

    // The cached prefix is intact: continuing it gives the golden continuation, as a fresh
    // sequence does.
    const std::vector<TokenId> next = {kGreedy[0]};
    EXPECT_THAT(generate(*model_, cache, next, greedy(3)).tokens,
                ElementsAre(kGreedy[1], kGreedy[2], kGreedy[3]));
}

TEST_F(Generate, ZeroMaxTokensOnlyProcessesThePrompt) {
    KvCache cache = model_->new_cache();
    auto r = generate(*model_, cache, kPrompt, greedy(0));
    EXPECT_TRUE(r.tokens.empty());
    EXPECT_EQ(r.finish, FinishReason::kLength);
    EXPECT_EQ(cache.size(), 1);
}

TEST_F(Generate, Errors) {
    KvCache cache = model_->new_cache();
    EXPECT_THAT(error_of([&] { generate(*model_, cache, kPrompt, greedy(-1)); }),
                HasSubstr("max_tokens must be >= 0, got -1"));
    EXPECT_THAT(error_of([&] { generate(*model_, cache, {}, greedy(3)); }),
                HasSubstr("the prompt is empty"));
    const std::vector<TokenId> bad = {201088};
    EXPECT_THAT(error_of([&] { generate(*model_, cache, bad, greedy(3)); }),
                HasSubstr("token id 201088 is outside the model's vocabulary (0..201087)"));
    const std::vector<TokenId> negative = {5, -1};
    EXPECT_THAT(error_of([&] { generate(*model_, cache, negative, greedy(3)); }),
                HasSubstr("token id -1 is outside the model's vocabulary"));
    GenerateOptions o = greedy(3);
    o.sampling.top_p = 2.0f;
    EXPECT_THAT(error_of([&] { generate(*model_, cache, kPrompt, o); }),
                HasSubstr("top_p must be in (0, 1]"));
    EXPECT_EQ(cache.size(), 0);
}

TEST_F(Generate, SeededSamplingIsReproducibleAndStaysInTheVocabulary) {
    auto run = [&](std::uint64_t seed) {
        KvCache cache = model_->new_cache();
        GenerateOptions o;
        o.max_tokens = 6;
        o.sampling.temperature = 1.0f;
        o.sampling.seed = seed;
        return generate(*model_, cache, kPrompt, o).tokens;
    };
    const auto a = run(5);
    ASSERT_EQ(a.size(), 6u);
    EXPECT_EQ(a, run(5));
    EXPECT_NE(a, run(6));
    for (TokenId id : a) {
        EXPECT_GE(id, 0);
        EXPECT_LT(static_cast<std::size_t>(id), model_->sampleable_vocab());
    }
}

}  // namespace
}  // namespace neural

namespace neural {
namespace {

// LoadOptions::on_progress: fractions never fall, start at 0 and end at exactly 1 ("ready"),
// with the steps between named; a load that fails stops short of 1.
TEST(ModelLoadProgress, RisesFromZeroToOneThroughNamedSteps) {
    std::vector<std::pair<double, std::string>> seen;
    LoadOptions o;
    o.on_progress = [&](double f, const std::string& stage) { seen.emplace_back(f, stage); };
    auto model = Model::load(test::tiny_model_dir(), o);
    ASSERT_TRUE(model);
    ASSERT_GE(seen.size(), 4u);
    EXPECT_EQ(seen.front().first, 0.0);
    EXPECT_EQ(seen.back().first, 1.0);
    EXPECT_EQ(seen.back().second, "ready");
    for (std::size_t i = 1; i < seen.size(); ++i) {
        EXPECT_GE(seen[i].first, seen[i - 1].first) << seen[i].second;
        EXPECT_FALSE(seen[i].second.empty());
    }
    std::vector<std::string> stages;
    for (const auto& s : seen) stages.push_back(s.second);
    EXPECT_THAT(stages, ::testing::Contains("weights"));
    EXPECT_THAT(stages, ::testing::Contains("backend"));

    seen.clear();
    EXPECT_THROW(Model::load(test::tiny_model_dir() / "no-such-folder", o), Error);
    for (const auto& s : seen) EXPECT_LT(s.first, 1.0) << s.second;
}

}  // namespace
}  // namespace neural
