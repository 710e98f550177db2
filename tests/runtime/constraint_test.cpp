// Constrained sampling on the tiny fixture (random weights, the real o200k vocabulary): the
// prefix-sharing mask equals the token-by-token one, and a session's constrained answers and
// strict tool arguments always parse and match their schema, though the model's own output
// never would; the sampling fast path and the full-mask reference choose the same greedy tokens.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cpu/parallel.h"
#include "runtime/constraint.h"
#include "runtime/session.h"
#include "support/fixtures.h"

namespace neural {
namespace {

using Json = nlohmann::ordered_json;

const Json kSchema = Json::parse(R"({
  "type": "object",
  "properties": {
    "city": {"type": "string"},
    "days": {"type": "integer"},
    "unit": {"enum": ["celsius", "fahrenheit"]},
    "hours": {"type": "array", "items": {"type": "number"}, "maxItems": 4},
    "where": {"type": "object", "properties": {"lat": {"type": "number"}, "ok": {"type": "boolean"}},
              "required": ["lat", "ok"], "additionalProperties": false}
  },
  "required": ["city", "days", "unit", "where"],
  "additionalProperties": false
})");

class ConstraintTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        cpu::set_threads(1);
        model_ = Model::load(test::tiny_model_dir()).release();
        grammar_ = chat::JsonSchemaGrammar::compile(kSchema);
    }
    static void TearDownTestSuite() {
        delete model_;
        grammar_.reset();
    }
    static TurnOptions options(const std::string& forced, int max_tokens, std::uint64_t seed,
                               std::shared_ptr<const OutputConstraint> c) {
        TurnOptions o;
        o.max_tokens = max_tokens;
        o.sampling.temperature = 1;
        o.sampling.seed = seed;
        o.forced_tokens = model_->tokenizer().encode(forced, true);
        o.constraint = std::move(c);
        return o;
    }
    static std::shared_ptr<const OutputConstraint> final_answer(bool full_mask = false) {
        auto c = std::make_shared<OutputConstraint>();
        c->final_answer = grammar_;
        c->full_mask = full_mask;
        return c;
    }
    static bool matches(const std::string& text) {
        chat::JsonRecognizer r(*grammar_);
        return r.feed(text) && r.complete();
    }
    static Model* model_;
    static std::shared_ptr<const chat::JsonSchemaGrammar> grammar_;
};
Model* ConstraintTest::model_ = nullptr;
std::shared_ptr<const chat::JsonSchemaGrammar> ConstraintTest::grammar_;

TEST_F(ConstraintTest, PrefixSharingMaskEqualsThePlainMask) {
    const TokenVocabulary vocab(model_->tokenizer(), model_->sampleable_vocab());
    for (const char* prefix :
         {"", "{", "{\"ci", "{\"city\":\"Pa", "{\"city\":\"x\",\"days\":1",
          "{\"city\":\"x\",\"days\":12,\"unit\":\"c", "{\"where\":{\"lat\":-"}) {
        chat::JsonRecognizer r(*grammar_);
        ASSERT_TRUE(r.feed(prefix)) << prefix;
        std::vector<std::uint8_t> fast, plain;
        vocab.mask(r, fast);
        vocab.mask_plain(r, plain);
        EXPECT_EQ(fast, plain) << prefix;
        EXPECT_GT(std::count(fast.begin(), fast.end(), 1), 0) << prefix;
    }
}

TEST_F(ConstraintTest, ConstrainedAnswersParseAndMatchUnconstrainedOnesDoNot) {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        ChatSession s(*model_);
        s.add_user("Weather as JSON, please.");
        TurnResult loose = s.respond(options("<|channel|>final<|message|>", 80, seed, nullptr));
        EXPECT_FALSE(matches(loose.content)) << loose.content;

        ChatSession c(*model_);
        c.add_user("Weather as JSON, please.");
        TurnResult r = c.respond(options("<|channel|>final<|message|>", 80, seed, final_answer()));
        EXPECT_TRUE(matches(r.content)) << "seed " << seed << ": " << r.content;
        const Json value = Json::parse(r.content);
        EXPECT_TRUE(value["days"].is_number_integer());
        EXPECT_TRUE(value["unit"] == "celsius" || value["unit"] == "fahrenheit");
        EXPECT_TRUE(value["where"]["ok"].is_boolean());
        EXPECT_EQ(r.finish, chat::FinishReason::stop);
        EXPECT_GT(r.stats.constraint.steps, 0);
    }
}

TEST_F(ConstraintTest, ShortBudgetClosesTheValue) {
    // 3 forced header tokens, then too few tokens for a free walk: the shortest completion
    // closes the object so the answer still parses.
    ChatSession s(*model_);
    s.add_user("JSON!");
    TurnResult r = s.respond(options("<|channel|>final<|message|>", 40, 9, final_answer()));
    EXPECT_TRUE(matches(r.content)) << r.content;
    EXPECT_EQ(r.stats.constraint.completions, 1);
    EXPECT_EQ(r.finish, chat::FinishReason::stop);
}

TEST_F(ConstraintTest, FastPathAndFullMaskChooseTheSameGreedyTokens) {
    auto run = [&](bool full) {
        ChatSession s(*model_);
        s.add_user("Give me JSON.");
        // Room for free steps before the budget closes the value (its shortest completion is
        // 65 bytes).
        TurnOptions o = options("<|channel|>final<|message|>", 110, 0, final_answer(full));
        o.sampling.temperature = 0;
        return s.respond(o);
    };
    const TurnResult fast = run(false);
    const TurnResult full = run(true);
    EXPECT_EQ(fast.content, full.content);
    EXPECT_TRUE(matches(fast.content)) << fast.content;
    EXPECT_GT(full.stats.constraint.full_masks, 0);
    // Random weights rarely put a valid token on top, so the fast path may mask as often.
    EXPECT_LE(fast.stats.constraint.full_masks, full.stats.constraint.full_masks);
}

TEST_F(ConstraintTest, StrictToolArgumentsMatchTheirSchemaAndReasoningStaysFree) {
    auto c = std::make_shared<OutputConstraint>();
    c->function_arguments["get_weather"] = grammar_;
    ChatSession s(*model_);
    s.add_user("weather?");
    TurnResult r = s.respond(options(
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.get_weather <|constrain|>json<|message|>",
        90, 3, c));
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_TRUE(matches(r.tool_calls[0].arguments)) << r.tool_calls[0].arguments;
    EXPECT_EQ(r.finish, chat::FinishReason::tool_calls);
    EXPECT_EQ(r.reasoning, "Think.");
    // <|channel|>analysis<|message|>Think.<|end|>: the header, the text and the end.
    EXPECT_GE(r.stats.reasoning_tokens, 5);
    EXPECT_LT(r.stats.reasoning_tokens, r.stats.generated_tokens);
}

}  // namespace
}  // namespace neural
