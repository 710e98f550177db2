// The ChatSession features the server relies on (tiny fixture model): forced tokens drive the
// real parser path, text stop sequences, replacing the conversation keeps the prompt cache, and
// a caller-owned cancel flag.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "neural/error.h"
#include "runtime/session.h"
#include "support/fixtures.h"

namespace neural {
namespace {

class SessionFeatures : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        // One thread: results do not depend on it, and it keeps a shared 2-core machine from
        // stalling OpenMP barriers.
        LoadOptions one_thread;
        one_thread.threads = 1;
        model_ = Model::load(test::tiny_model_dir(), one_thread).release();
    }
    static void TearDownTestSuite() { delete model_; }
    static TurnOptions forced(const std::string& harmony, int max_tokens = 200) {
        TurnOptions o;
        o.max_tokens = max_tokens;
        o.sampling.temperature = 0;
        o.forced_tokens = model_->tokenizer().encode(harmony, true);
        return o;
    }
    static Model* model_;
};
Model* SessionFeatures::model_ = nullptr;

TEST(SessionStops, HarmonyStopTokensEndATurnEvenWithoutGenerationConfig) {
    // A checkpoint without generation_config.json (config.json names only <|return|> as eos, and
    // a GGUF import has no such file) must still end a tool call at <|call|>: the harmony stop
    // tokens come from the tokenizer, whatever the configs list.
    test::TempDir dir;
    const auto fixture = test::tiny_model_dir();
    for (const char* f :
         {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"})
        std::filesystem::copy_file(fixture / f, dir / f);  // no symlinks: Windows may refuse them
    LoadOptions one_thread;
    one_thread.threads = 1;
    auto model = Model::load(dir.path(), one_thread);
    const std::vector<TokenId> stops = model->stop_tokens();
    const TokenId call = *model->tokenizer().special_id("<|call|>");
    const TokenId ret = *model->tokenizer().special_id("<|return|>");
    EXPECT_NE(std::find(stops.begin(), stops.end(), call), stops.end());
    EXPECT_NE(std::find(stops.begin(), stops.end(), ret), stops.end());

    ChatSession s(*model);
    s.add_user("weather?");
    const std::string call_text =
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{}<|call|>";
    TurnOptions o;
    o.max_tokens = 200;
    o.sampling.temperature = 0;
    o.forced_tokens = model->tokenizer().encode(call_text +
                                                    "<|start|>assistant<|channel|>final"
                                                    "<|message|>this must not be generated",
                                                true);
    TurnResult r = s.respond(o);
    EXPECT_EQ(r.finish, chat::FinishReason::tool_calls);
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.stats.generated_tokens,
              static_cast<std::int64_t>(model->tokenizer().encode(call_text, true).size()));
    EXPECT_EQ(r.content, "");
}

TEST_F(SessionFeatures, ForcedTokensGoThroughTheParser) {
    ChatSession s(*model_);
    s.add_user("weather?");
    std::vector<chat::EventType> seen;
    TurnResult r = s.respond(
        forced(
            "<|channel|>analysis<|message|>Need a "
            "tool.<|end|><|start|>assistant<|channel|>commentary"
            " to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}<|call|>"),
        [&](const chat::ParserEvent& e) { seen.push_back(e.type); });
    EXPECT_EQ(r.reasoning, "Need a tool.");
    ASSERT_EQ(r.tool_calls.size(), 1u);
    EXPECT_EQ(r.tool_calls[0].name, "get_weather");
    EXPECT_EQ(r.tool_calls[0].arguments, "{\"city\":\"Paris\"}");
    EXPECT_EQ(r.finish, chat::FinishReason::tool_calls);
    EXPECT_NE(std::find(seen.begin(), seen.end(), chat::EventType::tool_call_start), seen.end());
    ASSERT_EQ(s.history().size(), 3u);
    EXPECT_TRUE(s.history().back().is_tool_call());
}

TEST_F(SessionFeatures, SamplingContinuesAfterTheForcedPrefix) {
    ChatSession s(*model_);
    s.add_user("hi");
    TurnResult r = s.respond(forced("<|channel|>final<|message|>Hello", 12));
    EXPECT_EQ(r.stats.generated_tokens, 12);
    EXPECT_EQ(r.content.rfind("Hello", 0), 0u) << r.content;
}

TEST_F(SessionFeatures, ForcedTokensOutsideTheVocabularyAreRefused) {
    ChatSession s(*model_);
    s.add_user("hi");
    TurnOptions o;
    o.forced_tokens = {static_cast<TokenId>(model_->sampleable_vocab())};
    EXPECT_THROW(s.respond(o), Error);
}

TEST_F(SessionFeatures, StopSequenceEndsTheAnswerBeforeIt) {
    ChatSession s(*model_);
    s.add_user("hi");
    TurnOptions o = forced("<|channel|>final<|message|>Hello world. STOP here and more<|return|>");
    o.stop_sequences = {"STOP", "never"};
    std::string streamed;
    TurnResult r = s.respond(o, [&](const chat::ParserEvent& e) {
        if (e.type == chat::EventType::content) streamed += e.text;
    });
    EXPECT_EQ(r.content, "Hello world. ");
    EXPECT_EQ(streamed, "Hello world. ");
    EXPECT_EQ(r.finish, chat::FinishReason::stop);
    EXPECT_LT(r.stats.generated_tokens, static_cast<std::int64_t>(o.forced_tokens.size()));
    EXPECT_EQ(s.history().back().text(), "Hello world. ");
}

TEST_F(SessionFeatures, HeldBackTextIsReleasedWhenNoStopMatches) {
    ChatSession s(*model_);
    s.add_user("hi");
    TurnOptions o = forced("<|channel|>final<|message|>abc ST<|return|>");
    o.stop_sequences = {"STOP"};
    std::string streamed;
    TurnResult r = s.respond(o, [&](const chat::ParserEvent& e) {
        if (e.type == chat::EventType::content) streamed += e.text;
    });
    EXPECT_EQ(r.content, "abc ST");
    EXPECT_EQ(streamed, "abc ST");
    EXPECT_EQ(r.finish, chat::FinishReason::stop);
}

TEST(StopMatcher, HoldsBackPossibleStarts) {
    StopMatcher m({"</end>", "xyz"});
    EXPECT_EQ(m.push("hello </e"), "hello ");
    EXPECT_EQ(m.push("nd"), "");
    EXPECT_FALSE(m.stopped());
    EXPECT_EQ(m.push(">tail"), "");
    EXPECT_TRUE(m.stopped());
    StopMatcher n({"xyz"});
    EXPECT_EQ(n.push("ax"), "a");
    EXPECT_EQ(n.push("b"), "xb");
    EXPECT_EQ(n.flush(), "");
    StopMatcher off({});
    EXPECT_FALSE(off.active());
}

TEST_F(SessionFeatures, ReplacingTheConversationKeepsThePromptCache) {
    ChatSession s(*model_);
    chat::SystemContent sys;
    sys.conversation_start_date = "2026-01-01";
    chat::DeveloperContent dev;
    dev.instructions = "Be brief.";
    std::vector<chat::Message> history{chat::Message::user("first")};
    s.set_conversation(sys, dev, history);
    TurnOptions o;
    o.max_tokens = 4;
    o.sampling.temperature = 0;
    TurnResult first = s.respond(o);
    EXPECT_EQ(first.stats.cached_tokens, 0);
    // A client resends the history with the answer it got and a new question.
    history.push_back(chat::Message::assistant("final", first.content));
    history.push_back(chat::Message::user("second"));
    s.set_conversation(sys, dev, history);
    TurnResult second = s.respond(o);
    EXPECT_GE(second.stats.cached_tokens, first.stats.prompt_tokens);
    // Another conversation entirely shares only the system message.
    dev.instructions = "Different.";
    s.set_conversation(sys, dev, {chat::Message::user("other")});
    TurnResult third = s.respond(o);
    EXPECT_GT(third.stats.cached_tokens, 0);
    EXPECT_LT(third.stats.cached_tokens, first.stats.prompt_tokens);
}

TEST_F(SessionFeatures, CallerCancelFlagSetBeforeTheTurnStopsIt) {
    ChatSession s(*model_);
    s.add_user("hi");
    std::atomic<bool> cancel{true};
    TurnOptions o;
    o.max_tokens = 20;
    o.sampling.temperature = 0;
    o.cancel = &cancel;
    TurnResult r = s.respond(o);
    EXPECT_TRUE(r.cancelled);
    EXPECT_LE(r.stats.generated_tokens, 1);
    cancel = false;
    TurnResult again = s.respond(o);
    EXPECT_FALSE(again.cancelled);
}

}  // namespace
}  // namespace neural
