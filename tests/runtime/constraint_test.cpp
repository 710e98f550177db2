// Constrained sampling on the tiny fixture (random weights, the real o200k vocabulary): the
// prefix-sharing mask equals the token-by-token one, and a session's constrained answers and
// strict tool arguments always parse and match their schema, though the model's own output
// never would; the sampling fast path and the full-mask reference choose the same greedy tokens.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>

#include "cpu/parallel.h"
#include "runtime/constraint.h"
#include "runtime/session.h"
#include "chat/lark_grammar.h"
#include "support/codex_grammar.h"
#include "support/utf8.h"
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

// A text grammar (a freeform tool's input) too: the same mask both ways, inside a line and in
// the middle of a multi-byte character.
TEST_F(ConstraintTest, TextGrammarMasksEqualThePlainMask) {
    const TokenVocabulary vocab(model_->tokenizer(), model_->sampleable_vocab());
    const auto g = chat::JsonSchemaGrammar::text(
        chat::RegexAutomaton::compile("^(?:" + chat::lark_to_regex(test::kApplyPatchLark) + ")$"));
    for (const char* prefix :
         {"", "*** Be", "*** Begin Patch\n", "*** Begin Patch\n*** Add File: a\n+",
          "*** Begin Patch\n*** Update File: caf\xc3"}) {
        chat::JsonRecognizer r(*g);
        ASSERT_TRUE(r.feed(prefix)) << prefix;
        std::vector<std::uint8_t> fast, plain;
        vocab.mask(r, fast);
        vocab.mask_plain(r, plain);
        EXPECT_EQ(fast, plain) << prefix;
        EXPECT_GT(std::count(fast.begin(), fast.end(), 1), 0) << prefix;
    }
}

// A freeform tool with Codex's Lark grammar: the random model's call text always follows the
// grammar (closed by its shortest completion when the budget runs out), with the header a
// freeform call has (no <|constrain|>json) allowed by the framing.
TEST_F(ConstraintTest, FreeformToolInputFollowsItsLarkGrammar) {
    const auto re =
        chat::RegexAutomaton::compile("^(?:" + chat::lark_to_regex(test::kApplyPatchLark) + ")$");
    auto c = std::make_shared<OutputConstraint>();
    c->function_arguments["apply_patch"] = chat::JsonSchemaGrammar::text(re);
    c->functions = {"apply_patch"};
    c->text_functions = {"apply_patch"};
    for (std::uint64_t seed = 1; seed <= 2; ++seed) {
        ChatSession s(*model_);
        s.add_user("Fix the typo.");
        TurnResult r = s.respond(
            options("<|channel|>commentary to=functions.apply_patch<|message|>", 120, seed, c));
        ASSERT_EQ(r.tool_calls.size(), 1u);
        const std::string& text = r.tool_calls[0].arguments;
        SCOPED_TRACE("seed " + std::to_string(seed) + ": " + text);
        EXPECT_TRUE(text.starts_with("*** Begin Patch\n"));
        EXPECT_TRUE(re->matches(test::code_points(text)));
        EXPECT_EQ(r.finish, chat::FinishReason::tool_calls);
    }
    // The framing: a freeform call's header has no <|constrain|>json; a namespace tool's is
    // addressed by its namespace.
    const Tokenizer& tok = model_->tokenizer();
    const TokenVocabulary vocab(tok, model_->sampleable_vocab());
    auto walk = [&](const std::string& header) {
        ReplyFraming f(tok, {"apply_patch", "multi_agent_v1.spawn"}, {"apply_patch"});
        for (TokenId t : tok.encode(header, true)) {
            if (!f.accept(vocab, t)) return false;
        }
        return f.part() == ReplyFraming::Part::body;
    };
    EXPECT_TRUE(walk("<|channel|>commentary to=functions.apply_patch<|message|>"));
    EXPECT_FALSE(
        walk("<|channel|>commentary to=functions.apply_patch <|constrain|>json<|message|>"));
    EXPECT_TRUE(walk("<|channel|>commentary to=multi_agent_v1.spawn <|constrain|>json<|message|>"));
    EXPECT_FALSE(walk(
        "<|channel|>commentary to=functions.multi_agent_v1.spawn <|constrain|>json<|message|>"));
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
    c->functions = {"get_weather"};
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

// Strings with patterns (and a pattern with a format, as zod writes them): the random model's
// answers under the constraint always match, checked against std::regex; without it they do not.
TEST_F(ConstraintTest, PatternedStringsMatchTheirPatterns) {
    const Json schema = Json::parse(R"({
      "type": "object",
      "properties": {
        "code": {"type": "string", "pattern": "^[A-Z]{3}-\\d{2,4}$"},
        "tag": {"type": "string", "pattern": "x+y|z", "maxLength": 8},
        "word": {"type": "string", "pattern": "^\\w+$", "minLength": 3, "maxLength": 12},
        "id": {"type": "string", "format": "uuid",
               "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"}
      },
      "required": ["code", "tag", "word", "id"],
      "additionalProperties": false
    })");
    auto grammar = chat::JsonSchemaGrammar::compile(schema);
    auto c = std::make_shared<OutputConstraint>();
    c->final_answer = grammar;
    for (std::uint64_t seed = 1; seed <= 2; ++seed) {
        ChatSession s(*model_);
        s.add_user("A code, a tag, a word and an id as JSON.");
        TurnResult r = s.respond(options("<|channel|>final<|message|>", 160, seed, c));
        SCOPED_TRACE("seed " + std::to_string(seed) + ": " + r.content);
        chat::JsonRecognizer rec(*grammar);
        EXPECT_TRUE(rec.feed(r.content) && rec.complete());
        const Json v = Json::parse(r.content);
        for (const char* key : {"code", "tag", "word", "id"}) {
            const std::string value = v.at(key).get<std::string>();
            const std::string pattern = schema["properties"][key]["pattern"].get<std::string>();
            EXPECT_TRUE(std::regex_search(value, std::regex(pattern))) << key << ": " << value;
        }
        // Lengths count code points.
        auto code_points = [](const std::string& t) {
            return std::count_if(t.begin(), t.end(), [](char c) {
                return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
            });
        };
        EXPECT_LE(code_points(v["tag"].get<std::string>()), 8);
        EXPECT_GE(code_points(v["word"].get<std::string>()), 3);
        EXPECT_EQ(r.finish, chat::FinishReason::stop);
        EXPECT_GT(r.stats.constraint.steps, 0);
    }
}

// The framing alone: the headers the format allows, token by token.
TEST_F(ConstraintTest, FramingAllowsOnlyTheHarmonyHeaders) {
    const Tokenizer& tok = model_->tokenizer();
    const TokenVocabulary vocab(tok, model_->sampleable_vocab());
    auto id = [&](const char* special) { return *tok.special_id(special); };
    auto ids = [&](const char* text) { return tok.encode(text, true); };
    ReplyFraming f(tok, {"get_weather"});
    // The reply starts with a channel: not with text, a stop token or another message.
    EXPECT_TRUE(f.allows(vocab, id("<|channel|>")));
    for (const char* bad : {"<|return|>", "<|message|>", "<|start|>", "<|end|>", "<|call|>"})
        EXPECT_FALSE(f.allows(vocab, id(bad))) << bad;
    EXPECT_FALSE(f.allows(vocab, ids("Hello")[0]));
    ASSERT_TRUE(f.accept(vocab, id("<|channel|>")));
    // Channel words: analysis, final, commentary with a recipient; no other word.
    EXPECT_TRUE(f.allows(vocab, ids("analysis")[0]));
    EXPECT_TRUE(f.allows(vocab, ids("final")[0]));
    EXPECT_TRUE(f.allows(vocab, ids("commentary")[0]));
    EXPECT_FALSE(f.allows(vocab, ids("json")[0]));
    EXPECT_FALSE(f.allows(vocab, id("<|message|>")));
    for (TokenId t : ids("commentary to=functions.get_weather ")) ASSERT_TRUE(f.accept(vocab, t));
    EXPECT_FALSE(f.allows(vocab, id("<|message|>")));  // the content type comes first
    for (TokenId t : ids("<|constrain|>json<|message|>")) ASSERT_TRUE(f.accept(vocab, t));
    EXPECT_EQ(f.part(), ReplyFraming::Part::body);
    EXPECT_TRUE(f.allows(vocab, id("<|call|>")));
    EXPECT_FALSE(f.allows(vocab, id("<|return|>")));
    EXPECT_FALSE(f.allows(vocab, id("<|end|>")));

    // Without functions no commentary; a recipient that is not a function is refused.
    ReplyFraming plain(tok, {});
    ASSERT_TRUE(plain.accept(vocab, id("<|channel|>")));
    EXPECT_FALSE(plain.allows(vocab, ids("commentary")[0]));
    ReplyFraming other(tok, {"get_weather"});
    bool refused = false;
    for (TokenId t : ids("<|channel|>commentary to=functions.rm_rf ")) {
        if (!other.accept(vocab, t)) refused = true;
    }
    EXPECT_TRUE(refused);

    // Reasoning takes text and <|end|>, then the next header starts with <|start|>assistant.
    ReplyFraming r(tok, {});
    for (TokenId t : ids("<|channel|>analysis<|message|>Let me think."))
        ASSERT_TRUE(r.accept(vocab, t));
    EXPECT_EQ(r.part(), ReplyFraming::Part::reasoning);
    EXPECT_FALSE(r.allows(vocab, id("<|return|>")));
    ASSERT_TRUE(r.accept(vocab, id("<|end|>")));
    EXPECT_FALSE(r.allows(vocab, id("<|channel|>")));
    EXPECT_TRUE(r.allows(vocab, id("<|start|>")));
    // Once the budget's step is reached the reasoning ends and the final header is forced.
    ReplyFraming b(tok, {});
    b.set_final_from(4);
    for (TokenId t : ids("<|channel|>analysis<|message|>")) ASSERT_TRUE(b.accept(vocab, t));
    EXPECT_FALSE(b.forced(3).has_value());
    std::vector<TokenId> forced;
    for (std::int64_t step = 4; step < 40; ++step) {
        const std::optional<TokenId> t = b.forced(step);
        if (!t) break;
        forced.push_back(*t);
        ASSERT_TRUE(b.accept(vocab, *t));
    }
    EXPECT_EQ(tok.decode(forced), "<|end|><|start|>assistant<|channel|>final<|message|>");
    EXPECT_EQ(b.part(), ReplyFraming::Part::body);
}

// No forced output at all: the random model writes its own headers, and the framing and the
// reasoning budget still bring every reply to a final answer that matches the schema.
TEST_F(ConstraintTest, WithoutForcedOutputTheAnswerStillParses) {
    int reasoned = 0;
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        ChatSession c(*model_);
        c.add_user("Weather as JSON, please.");
        TurnResult r = c.respond(options("", 100, seed, final_answer()));
        EXPECT_TRUE(matches(r.content)) << "seed " << seed << ": " << r.content;
        EXPECT_EQ(r.finish, chat::FinishReason::stop) << "seed " << seed;
        if (!r.reasoning.empty()) ++reasoned;
    }
    // Which channel the random model opens varies by seed (the budget test below makes it reason).
    RecordProperty("replies_with_reasoning", reasoned);
}

// The budget ends the reasoning before the token limit: the answer comes, and parses.
TEST_F(ConstraintTest, ReasoningBudgetForcesTheAnswerBeforeTheTokenLimit) {
    ChatSession c(*model_);
    c.add_user("Think, then answer in JSON.");
    TurnOptions o = options("<|channel|>analysis<|message|>", 120, 11, final_answer());
    o.reasoning_budget = 40;
    TurnResult r = c.respond(o);
    EXPECT_FALSE(r.reasoning.empty());
    EXPECT_TRUE(matches(r.content)) << r.content;
    EXPECT_EQ(r.finish, chat::FinishReason::stop);
    EXPECT_LE(r.stats.generated_tokens, 120);
    EXPECT_GT(r.stats.constraint.forced, 0);
    // Reasoning up to the budget's step (headers included; a header under way at step 40 is
    // finished by the model, at most a token a byte), then the forced end and final header.
    EXPECT_LE(r.stats.reasoning_tokens, 40 + 20);
    // The automatic budget: the same reasoning, left to the random model, is ended in time too.
    ChatSession d(*model_);
    d.add_user("Think, then answer in JSON.");
    o.reasoning_budget = -1;
    TurnResult auto_budget = d.respond(o);
    EXPECT_TRUE(matches(auto_budget.content)) << auto_budget.content;
    EXPECT_EQ(auto_budget.finish, chat::FinishReason::stop);
    EXPECT_GT(auto_budget.stats.constraint.forced, 0);
}

}  // namespace
}  // namespace neural
