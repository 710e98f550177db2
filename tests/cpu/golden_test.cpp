// The CPU reference forward pass against Hugging Face transformers' own outputs
// (shared/fixtures/tiny-gptoss-a/golden.json, fp32 eager attention).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <set>

#include "cpu/parallel.h"
#include "cpu/reference_model.h"
#include "neural/error.h"
#include "runtime/model.h"
#include "runtime/sampler.h"
#include "support/fixtures.h"

namespace neural {
namespace {

using nlohmann::json;

struct RouterLog : RouterObserver {
    std::vector<std::vector<std::vector<int>>> experts;  // [layer][pos]
    explicit RouterLog(int layers) : experts(static_cast<size_t>(layers)) {}
    void on_route(int layer, std::int64_t pos, std::span<const int> e,
                  std::span<const float>) override {
        auto& l = experts[static_cast<size_t>(layer)];
        if (l.size() <= static_cast<size_t>(pos)) l.resize(static_cast<size_t>(pos) + 1);
        l[static_cast<size_t>(pos)].assign(e.begin(), e.end());
    }
};

class GoldenTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        LoadOptions reference;
        reference.kernel = "reference";  // the fp32 reference path (the fast path: fast_path_test)
        model_ = Model::load(test::tiny_model_dir(), reference).release();
        golden_ = new json(test::read_json(test::tiny_model_dir() / "golden.json"));
    }
    static void TearDownTestSuite() {
        delete model_;
        delete golden_;
    }
    static Model* model_;
    static json* golden_;
};
Model* GoldenTest::model_ = nullptr;
json* GoldenTest::golden_ = nullptr;

TEST_F(GoldenTest, AllPromptsMatchTransformers) {
    const auto V = static_cast<size_t>(model_->config().vocab_size);
    const auto probes = (*golden_)["probe_ids"].get<std::vector<int>>();
    ASSERT_EQ((*golden_)["prompts"].size(), 5u);
    for (const auto& [name, ref] : (*golden_)["prompts"].items()) {
        SCOPED_TRACE(name);
        const auto ids = ref["ids"].get<std::vector<TokenId>>();
        KvCache cache = model_->new_cache();
        RouterLog router(model_->config().num_layers);
        ForwardOptions fo;
        fo.all_logits = true;
        fo.observer = &router;
        std::vector<float> logits = model_->cpu().forward(ids, cache, fo);
        ASSERT_EQ(logits.size(), ids.size() * V);
        for (size_t t = 0; t < ids.size(); ++t) {
            const float* lt = logits.data() + t * V;
            // top-8 and probe logits within 1e-3 absolute
            const auto top_ids = ref["top8_ids"][t].get<std::vector<int>>();
            const auto top_vals = ref["top8_logits"][t].get<std::vector<double>>();
            for (size_t i = 0; i < 8; ++i) {
                EXPECT_NEAR(lt[top_ids[i]], top_vals[i], 1e-3) << "pos " << t << " top " << i;
            }
            const auto probe_vals = ref["probe_logits"][t].get<std::vector<double>>();
            for (size_t i = 0; i < probes.size(); ++i) {
                EXPECT_NEAR(lt[probes[i]], probe_vals[i], 1e-3)
                    << "pos " << t << " probe " << probes[i];
            }
            const double m = *std::max_element(lt, lt + V);
            double s = 0;
            for (size_t i = 0; i < V; ++i) s += std::exp(lt[i] - m);
            EXPECT_NEAR(m + std::log(s), ref["logsumexp"][t].get<double>(), 1e-3) << "pos " << t;
            // argmax equal wherever the reference's top-2 margin exceeds 1e-2
            if (top_vals[0] - top_vals[1] > 1e-2) {
                EXPECT_EQ(argmax(std::span<const float>(lt, V)), ref["argmax"][t].get<int>())
                    << "pos " << t;
            }
            for (int l = 0; l < model_->config().num_layers; ++l) {
                auto want = ref["router"][l]["experts"][t].get<std::vector<int>>();
                auto got = router.experts[static_cast<size_t>(l)][t];
                EXPECT_EQ(std::set<int>(want.begin(), want.end()),
                          std::set<int>(got.begin(), got.end()))
                    << "layer " << l << " pos " << t;
            }
        }
        // Greedy continuation (KV-cached decode), over the full lm_head like the reference.
        if (ref.contains("greedy")) {
            const auto want = ref["greedy"].get<std::vector<TokenId>>();
            std::vector<float> last(logits.end() - static_cast<std::ptrdiff_t>(V), logits.end());
            std::vector<TokenId> got;
            for (size_t s = 0; s < want.size(); ++s) {
                TokenId next = argmax(last);
                got.push_back(next);
                if (s + 1 < want.size())
                    last = model_->cpu().forward(std::span<const TokenId>(&next, 1), cache);
            }
            EXPECT_EQ(got, want);
        }
    }
}

// Prefill N tokens then decode one at a time == one full forward pass over all tokens. The
// "long" prompt (120 tokens) runs far past the sliding window (16), so q_len = 1 decode steps
// against a long cache exercise the window alignment.
TEST_F(GoldenTest, KvCachedDecodeEqualsFullRecompute) {
    const auto ids = (*golden_)["prompts"]["long"]["ids"].get<std::vector<TokenId>>();
    const auto V = static_cast<size_t>(model_->config().vocab_size);
    KvCache full = model_->new_cache();
    ForwardOptions all;
    all.all_logits = true;
    std::vector<float> ref = model_->cpu().forward(ids, full, all);

    for (size_t prefill : {size_t{1}, size_t{17}, size_t{64}}) {
        SCOPED_TRACE(prefill);
        KvCache cache = model_->new_cache();
        std::vector<float> got =
            model_->cpu().forward(std::span<const TokenId>(ids.data(), prefill), cache, all);
        for (size_t t = prefill; t < ids.size(); ++t) {
            std::vector<float> step =
                model_->cpu().forward(std::span<const TokenId>(&ids[t], 1), cache);
            got.insert(got.end(), step.begin(), step.end());
        }
        ASSERT_EQ(got.size(), ref.size());
        float worst = 0;
        for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::abs(got[i] - ref[i]));
        EXPECT_LT(worst, 1e-4f);
        EXPECT_EQ(cache.size(), static_cast<std::int64_t>(ids.size()));
    }
    (void)V;
}

// Truncating the cache rewinds the sequence: re-running the tail gives the same logits.
TEST_F(GoldenTest, TruncateAndReprocessIsExact) {
    const auto ids = (*golden_)["prompts"]["code"]["ids"].get<std::vector<TokenId>>();
    KvCache cache = model_->new_cache();
    std::vector<float> a = model_->cpu().forward(ids, cache);
    cache.truncate(10);
    std::vector<float> b =
        model_->cpu().forward(std::span<const TokenId>(ids.data() + 10, ids.size() - 10), cache);
    EXPECT_EQ(a, b);
}

// Every output is reduced by one thread in a fixed order: any thread count, same bits.
TEST_F(GoldenTest, ResultsAreBitIdenticalForAnyThreadCount) {
    const auto ids = (*golden_)["prompts"]["random"]["ids"].get<std::vector<TokenId>>();
    ForwardOptions all;
    all.all_logits = true;
    std::vector<float> ref;
    for (int threads : {1, 2, 3, 8}) {
        cpu::set_threads(threads);
        KvCache cache = model_->new_cache();
        std::vector<float> got = model_->cpu().forward(ids, cache, all);
        if (ref.empty()) {
            ref = got;
        } else {
            EXPECT_EQ(0, std::memcmp(ref.data(), got.data(), ref.size() * sizeof(float)))
                << threads;
        }
    }
    cpu::set_threads(0);
}

TEST_F(GoldenTest, CancelLeavesTheCacheUnchanged) {
    const auto ids = (*golden_)["prompts"]["code"]["ids"].get<std::vector<TokenId>>();
    KvCache cache = model_->new_cache();
    model_->cpu().forward(std::span<const TokenId>(ids.data(), 5), cache);
    std::atomic<bool> cancel{true};
    ForwardOptions fo;
    fo.cancel = &cancel;
    EXPECT_THROW(model_->cpu().forward(std::span<const TokenId>(ids.data() + 5, 5), cache, fo),
                 Cancelled);
    EXPECT_EQ(cache.size(), 5);
    // and the sequence continues exactly as if nothing happened
    std::vector<float> a =
        model_->cpu().forward(std::span<const TokenId>(ids.data() + 5, 5), cache);
    KvCache fresh = model_->new_cache();
    std::vector<float> b = model_->cpu().forward(std::span<const TokenId>(ids.data(), 10), fresh);
    EXPECT_EQ(a, b);
}

TEST_F(GoldenTest, RejectsTokensOutsideTheVocabulary) {
    KvCache cache = model_->new_cache();
    std::vector<TokenId> bad = {1, model_->config().vocab_size};
    try {
        model_->cpu().forward(bad, cache);
        FAIL() << "expected an error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("outside the model's vocabulary"), std::string::npos)
            << e.what();
    }
    EXPECT_EQ(cache.size(), 0);
}

}  // namespace
}  // namespace neural
