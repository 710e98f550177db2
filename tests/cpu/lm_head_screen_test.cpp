// The screened lm_head through the whole CPU backend (docs/KERNELS.md "Screened lm_head"): with
// --lm-head-screen on (the default) and off, the same tokens for greedy continuations, top-k,
// top-k with top-p, min-p and penalised sampling with the same seed, and forced tokens, on the
// shared fixture and on a synthetic checkpoint of another width; the screen did run (counted,
// with fewer exact rows than the vocabulary), full-logits consumers (no screen asked) get every
// logit, and the reference path stays the whole head.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/generate.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "support/fixtures.h"
#include "synth/synth.h"

namespace neural {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<Model> load(const fs::path& dir, const std::string& screen,
                            const std::string& kernel = "auto") {
    LoadOptions o;
    o.kernel = kernel;
    o.lm_head_screen = screen;
    o.threads = 1;  // the same bits for any count; one keeps it quick on a busy machine
    return Model::load(dir, o);
}

constexpr int kTokens = 12;

std::vector<TokenId> continuation(Model& m, const SamplingParams& p, int n = kTokens) {
    KvCache cache = m.new_cache();
    const std::vector<TokenId> prompt = {200006, 17360, 200008, 12194, 11, 1495, 382, 261, 1746};
    GenerateOptions o;
    o.max_tokens = n;
    o.sampling = p;
    return generate(m, cache, prompt, o).tokens;
}

std::vector<SamplingParams> sampling_cases() {
    std::vector<SamplingParams> cases;
    SamplingParams greedy;
    greedy.temperature = 0;
    cases.push_back(greedy);
    SamplingParams top_k;
    top_k.temperature = 0.9f;
    top_k.top_k = 40;
    top_k.seed = 7;
    cases.push_back(top_k);
    SamplingParams top_k_p = top_k;
    top_k_p.top_p = 0.8f;
    top_k_p.seed = 11;
    cases.push_back(top_k_p);
    SamplingParams min_p;
    min_p.temperature = 1.0f;
    min_p.min_p = 0.2f;
    min_p.seed = 3;
    cases.push_back(min_p);
    return cases;
}

std::uint64_t screened(const Model& m) { return m.telemetry().moe.screened_tokens.load(); }

// Every sampling case, screen on against off: the same tokens, and the screen ran with fewer
// exact rows than the vocabulary.
void expect_same_tokens(Model& on, Model& off) {
    for (const SamplingParams& p : sampling_cases()) {
        SCOPED_TRACE(testing::Message() << "temperature " << p.temperature << " top_k " << p.top_k
                                        << " top_p " << p.top_p << " min_p " << p.min_p);
        const std::uint64_t before = screened(on);
        const std::uint64_t rows0 = on.telemetry().moe.screened_exact_rows.load();
        const std::uint64_t full0 = on.telemetry().moe.screened_full.load();
        EXPECT_EQ(continuation(on, p), continuation(off, p));
        const std::uint64_t tokens = screened(on) - before;
        EXPECT_EQ(tokens, static_cast<std::uint64_t>(kTokens));  // the prompt's last position
                                                                 // and every decode step
        const std::uint64_t full = on.telemetry().moe.screened_full.load() - full0;
        EXPECT_LT(full, tokens);
        const std::uint64_t rows = on.telemetry().moe.screened_exact_rows.load() - rows0;
        EXPECT_LT(rows, tokens * static_cast<std::uint64_t>(on.config().vocab_size));
    }
    EXPECT_EQ(screened(off), 0u);
}

TEST(LmHeadScreenModel, FixtureTokensAreTheSameWithAndWithoutTheScreen) {
    const auto on = load(test::tiny_model_dir(), "on");
    const auto off = load(test::tiny_model_dir(), "off");
    EXPECT_NE(on->describe_backend().find("screened lm_head"), std::string::npos)
        << on->describe_backend();
    EXPECT_EQ(off->describe_backend().find("screened"), std::string::npos);
    expect_same_tokens(*on, *off);
    // The scalar kernels (scalar int8 screen, scalar bf16 rows) too.
    const auto on_scalar = load(test::tiny_model_dir(), "on", "scalar");
    SamplingParams greedy;
    greedy.temperature = 0;
    EXPECT_EQ(continuation(*on_scalar, greedy, 6), continuation(*off, greedy, 6));
    EXPECT_GT(screened(*on_scalar), 0u);
}

TEST(LmHeadScreenModel, SyntheticCheckpointOfAnotherWidth) {
    // 160 columns: the int8 copy pads to 192, the bf16 operand to 160.
    test::TempDir tmp;
    synth::Options so;
    so.shape = synth::shape_named("tiny");
    so.shape.hidden_size = 160;
    so.shape.num_layers = 2;
    so.seed = 5;
    synth::WriteOptions w;
    w.tokenizer = test::tiny_model_dir() / "tokenizer.json";
    synth::write_checkpoint(synth::make_plan(so), tmp / "m", w);
    const auto on = load(tmp / "m", "on");
    const auto off = load(tmp / "m", "off");
    expect_same_tokens(*on, *off);
}

TEST(LmHeadScreenModel, SessionsWithPenaltiesAndForcedTokensMatch) {
    const auto on = load(test::tiny_model_dir(), "on");
    const auto off = load(test::tiny_model_dir(), "off");
    auto reply = [](Model& m, const TurnOptions& t) {
        ChatSession s(m);
        s.system().conversation_start_date = "2026-01-01";
        s.add_user("Count the stars.");
        const TurnResult r = s.respond(t);
        return r.reasoning + "|" + r.content + "|" + std::to_string(r.stats.generated_tokens);
    };
    TurnOptions t;
    t.max_tokens = 12;
    t.sampling.temperature = 0;
    t.sampling.presence_penalty = -1.5f;  // raises the logits of tokens that came
    t.sampling.frequency_penalty = 0.5f;
    t.sampling.repetition_penalty = 1.3f;
    const std::uint64_t before = screened(*on);
    EXPECT_EQ(reply(*on, t), reply(*off, t));
    EXPECT_GT(screened(*on), before);
    t.sampling.temperature = 0.8f;
    t.sampling.top_k = 20;
    t.sampling.seed = 9;
    EXPECT_EQ(reply(*on, t), reply(*off, t));
    t.forced_tokens = {200005};  // <|channel|>: its step reads no logits
    EXPECT_EQ(reply(*on, t), reply(*off, t));
    // Logprobs read every logit: no screen.
    const std::uint64_t at = screened(*on);
    t.forced_tokens.clear();
    t.logprobs = 3;
    EXPECT_EQ(reply(*on, t), reply(*off, t));
    EXPECT_EQ(screened(*on), at);
}

TEST(LmHeadScreenModel, FullLogitsWithoutAScreenAndOnTheReferencePath) {
    const auto on = load(test::tiny_model_dir(), "on");
    const auto off = load(test::tiny_model_dir(), "off");
    const auto reference = load(test::tiny_model_dir(), "on", "reference");
    EXPECT_EQ(reference->describe_backend().find("screened"), std::string::npos);
    const std::vector<TokenId> ids = {1, 7, 42, 3};
    KvCache a = on->new_cache(), b = off->new_cache(), c = reference->new_cache();
    const std::vector<float> la = on->forward(ids, a, {}), lb = off->forward(ids, b, {});
    ASSERT_EQ(la.size(), lb.size());
    EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0);
    // With a greedy screen: the argmax row exact, the rows it leaves out at -infinity.
    LogitsScreen greedy;
    greedy.valid = on->sampleable_vocab();
    ForwardOptions fo;
    fo.screen = &greedy;
    const TokenId next = 5;
    const std::vector<float> sa = on->forward(std::span<const TokenId>(&next, 1), a, fo);
    const std::vector<float> sb = off->forward(std::span<const TokenId>(&next, 1), b, {});
    std::size_t exact = 0, dropped = 0;
    for (std::size_t i = 0; i < sa.size(); ++i) {
        if (sa[i] == -std::numeric_limits<float>::infinity()) {
            ++dropped;
        } else {
            ++exact;
            EXPECT_EQ(std::memcmp(&sa[i], &sb[i], 4), 0) << "row " << i;
        }
    }
    EXPECT_GT(dropped, 0u);
    EXPECT_GT(exact, 0u);
    EXPECT_EQ(argmax(sa), argmax(std::span<const float>(sb).first(greedy.valid)));
    // The reference path ignores the screen: every logit.
    const std::vector<float> sc = reference->forward(std::span<const TokenId>(&next, 1), c, fo);
    for (float v : sc) ASSERT_TRUE(std::isfinite(v));
}

TEST(LmHeadScreenModel, OnlyOnAndOffAreAccepted) {
    LoadOptions o;
    o.lm_head_screen = "maybe";
    const std::string msg = test::error_of([&] { Model::load(test::tiny_model_dir(), o); });
    EXPECT_NE(msg.find("lm-head-screen"), std::string::npos) << msg;
}

}  // namespace
}  // namespace neural
