// The default CPU path keeps the published arithmetic (docs/USER_GUIDE.md "What each setting does
// to the answers"): on the fixture (safetensors, with and without an expert store) and on its
// GGUF, the default settings pick the same token as the fp32 reference path (`--kernel
// reference`) at every position of every golden prompt, through a prompt pass and token by
// token, and continue each prompt with the same 16 greedy tokens (also where a greedy step lets
// the screened lm_head skip the logits that cannot win). Each prompt is the context of a first
// turn (ForwardOptions::context_end at its end, as a chat session passes it), so the default
// runs its positions on the bf16 expert GEMM with split activations and the tile-order dense
// calls (docs/KERNELS.md "Context prompts") -- in one pass and token by token -- and the
// continuation with decode's bits; ctest runs the checkpoint case again as on CPUs without AMX,
// AVX-512 and AVX2 (tests/cpu/CMakeLists.txt).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "cpu/reference_model.h"
#include "runtime/model.h"
#include "store/repack.h"
#include "support/fixtures.h"

namespace neural {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kContinuation = 16;

// The defaults but for the kernel, the store and one thread (results are the same bits for any
// thread count: docs/ARCHITECTURE.md; one keeps the test quick on a busy machine).
std::unique_ptr<Model> load(const fs::path& model, const std::string& kernel = "auto",
                            const fs::path& store = {}, const std::string& prompt_kernel = "auto") {
    LoadOptions o;
    o.kernel = kernel;
    o.store = store;
    o.prompt_kernel = prompt_kernel;
    o.threads = 1;
    return Model::load(model, o);
}

TokenId argmax(const float* logits, std::size_t n) {
    return static_cast<TokenId>(std::max_element(logits, logits + n) - logits);
}

// Every forward call below passes the prompt's length as the context's end: a first turn.
ForwardOptions first_turn(const std::vector<TokenId>& prompt) {
    ForwardOptions fo;
    fo.context_end = static_cast<std::int64_t>(prompt.size());
    return fo;
}

// The argmax at every position of a prompt pass (all logits at once).
std::vector<TokenId> prompt_argmax(Model& m, const std::vector<TokenId>& prompt) {
    KvCache cache = m.new_cache();
    ForwardOptions all = first_turn(prompt);
    all.all_logits = true;
    const std::vector<float> logits = m.forward(prompt, cache, all);
    const std::size_t vocab = logits.size() / prompt.size();
    std::vector<TokenId> out;
    for (std::size_t p = 0; p < prompt.size(); ++p)
        out.push_back(argmax(logits.data() + p * vocab, vocab));
    return out;
}

// Token by token (the decode path): the argmax after each prompt token, then 16 greedy tokens.
std::vector<TokenId> decode_argmax_and_continue(Model& m, const std::vector<TokenId>& prompt) {
    KvCache cache = m.new_cache();
    std::vector<TokenId> out;
    std::vector<float> logits;
    const ForwardOptions fo = first_turn(prompt);
    for (TokenId t : prompt) {
        logits = m.forward(std::span<const TokenId>(&t, 1), cache, fo);
        out.push_back(argmax(logits.data(), logits.size()));
    }
    for (int k = 0; k < kContinuation; ++k) {
        const TokenId next = out.back();
        logits = m.forward(std::span<const TokenId>(&next, 1), cache, fo);
        out.push_back(argmax(logits.data(), logits.size()));
    }
    return out;
}

// Greedy continuation after a prompt pass (the prompt path, then decode).
std::vector<TokenId> prompt_then_continue(Model& m, const std::vector<TokenId>& prompt) {
    KvCache cache = m.new_cache();
    const ForwardOptions fo = first_turn(prompt);
    std::vector<float> logits = m.forward(prompt, cache, fo);
    std::vector<TokenId> out;
    for (int k = 0; k < kContinuation; ++k) {
        out.push_back(argmax(logits.data(), logits.size()));
        const TokenId next = out.back();
        logits = m.forward(std::span<const TokenId>(&next, 1), cache, fo);
    }
    return out;
}

// The same as a sampler's greedy step asks for it (ForwardOptions::screen): the default CPU path
// then computes only the logits that can be the argmax (docs/KERNELS.md "Screened lm_head").
std::vector<TokenId> screened_continue(Model& m, const std::vector<TokenId>& prompt) {
    KvCache cache = m.new_cache();
    LogitsScreen greedy;
    greedy.valid = m.sampleable_vocab();
    ForwardOptions fo = first_turn(prompt);
    fo.screen = &greedy;
    std::vector<float> logits = m.forward(prompt, cache, fo);
    std::vector<TokenId> out;
    for (int k = 0; k < kContinuation; ++k) {
        out.push_back(argmax(logits.data(), greedy.valid));
        const TokenId next = out.back();
        logits = m.forward(std::span<const TokenId>(&next, 1), cache, fo);
    }
    return out;
}

class DefaultPathTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        golden_ = new json(test::read_json(test::tiny_model_dir() / "golden.json"));
    }
    static void TearDownTestSuite() { delete golden_; }

    // Every golden prompt: `candidate` (default settings) against `reference`.
    static void expect_same_choices(Model& reference, Model& candidate) {
        for (const auto& [name, p] : (*golden_)["prompts"].items()) {
            SCOPED_TRACE(name);
            const auto prompt = p["ids"].get<std::vector<TokenId>>();
            EXPECT_EQ(prompt_argmax(candidate, prompt), prompt_argmax(reference, prompt));
            EXPECT_EQ(decode_argmax_and_continue(candidate, prompt),
                      decode_argmax_and_continue(reference, prompt));
            EXPECT_EQ(prompt_then_continue(candidate, prompt),
                      prompt_then_continue(reference, prompt));
            EXPECT_EQ(screened_continue(candidate, prompt),
                      prompt_then_continue(reference, prompt));
        }
    }
    static json* golden_;
};
json* DefaultPathTest::golden_ = nullptr;

TEST_F(DefaultPathTest, CheckpointMatchesTheReference) {
    const auto reference = load(test::tiny_model_dir(), "reference");
    const auto fast = load(test::tiny_model_dir());
    ASSERT_TRUE(fast->cpu().context_prompts());
    std::printf("default path compared: %s\n", fast->describe_backend().c_str());
    expect_same_choices(*reference, *fast);
}

// The fixture's experts repacked into a packed store in `dir`.
fs::path packed_store(const test::TempDir& dir) {
    store::RepackOptions o;
    o.checkpoint = test::tiny_model_dir();
    o.out = dir / "experts.nstore";
    o.kind = store::StoreKind::kPacked;
    store::repack(o);
    return o.out;
}

TEST_F(DefaultPathTest, StoreMatchesTheReference) {
    test::TempDir dir;
    const auto reference = load(test::tiny_model_dir(), "reference");
    const auto fast = load(test::tiny_model_dir(), "auto", packed_store(dir));
    expect_same_choices(*reference, *fast);
}

// The whole prompt on the default's context path (the bf16 expert GEMM on hi + lo activations),
// by name, is held to the same choices, with the checkpoint and with a store.
TEST_F(DefaultPathTest, Bf16x2PromptsMatchTheReference) {
    test::TempDir dir;
    const auto reference = load(test::tiny_model_dir(), "reference");
    for (const fs::path& store : {fs::path{}, packed_store(dir)}) {
        SCOPED_TRACE(store.empty() ? "checkpoint" : "store");
        const auto bf16x2 = load(test::tiny_model_dir(), "auto", store, "bf16x2");
        std::printf("bf16x2 path compared: %s\n", bf16x2->describe_backend().c_str());
        expect_same_choices(*reference, *bf16x2);
    }
}

TEST_F(DefaultPathTest, GgufMatchesTheReference) {
    const fs::path gguf = test::shared_dir() / "fixtures" / "tiny-gptoss-a-gguf" / "model.gguf";
    const auto reference = load(gguf, "reference");
    const auto fast = load(gguf);
    expect_same_choices(*reference, *fast);
}

}  // namespace
}  // namespace neural
