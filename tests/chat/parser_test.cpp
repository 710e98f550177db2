// Streaming parser behaviour beyond the fixture cases: event routing, finish reasons, and the
// recovery paths for malformed model output.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "chat/harmony_cases.h"
#include "chat/parser.h"
#include "chat/utf8_stream.h"
#include "neural/error.h"

namespace neural::chat {
namespace {

const std::string kFffd(kReplacementCharacter);

struct Outcome {
    std::vector<ParserEvent> events;
    std::vector<Message> messages;
    std::optional<FinishReason> finish;

    std::string joined(EventType type) const {
        std::string out;
        for (const auto& e : events) {
            if (e.type == type) out += e.text;
        }
        return out;
    }
    std::vector<EventType> types() const {
        std::vector<EventType> out;
        for (const auto& e : events) out.push_back(e.type);
        return out;
    }
    std::vector<FinishReason> finishes() const {
        std::vector<FinishReason> out;
        for (const auto& e : events) {
            if (e.type == EventType::finish) out.push_back(e.finish_reason);
        }
        return out;
    }
};

Outcome parse_text(const std::string& text, ParseOptions options = {}, bool eos = true) {
    const Tokenizer& tokenizer = test::harmony_tokenizer();
    StreamParser parser(tokenizer, options);
    Outcome r;
    for (TokenId id : tokenizer.encode(text, true)) parser.feed(id, r.events);
    if (eos) parser.end_of_stream(r.events);
    r.messages = parser.messages();
    r.finish = parser.finish_reason();
    return r;
}

ParseOptions strict() {
    ParseOptions options;
    options.strict = true;
    return options;
}

TEST(Utf8Stream, HoldsBackIncompleteSequences) {
    Utf8Stream s;
    EXPECT_EQ(s.push("a\xF0\x9F"), "a");
    EXPECT_TRUE(s.pending());
    EXPECT_EQ(s.push("\x92"), "");
    EXPECT_EQ(s.push("\x96!"), "\xF0\x9F\x92\x96!");
    EXPECT_FALSE(s.pending());
}

TEST(Utf8Stream, ReplacesMaximalInvalidSubparts) {
    Utf8Stream s;
    EXPECT_EQ(s.push("\xF0\x9F "), kFffd + " ");
    EXPECT_EQ(s.push("\x80"), kFffd);              // lone continuation byte
    EXPECT_EQ(s.push("\xC0\xAF"), kFffd + kFffd);  // overlong lead: each byte on its own
    EXPECT_EQ(s.push("\xED\xA0\x80"), kFffd + kFffd + kFffd);  // surrogate
    EXPECT_EQ(s.push("\xE2\x82"), "");
    EXPECT_EQ(s.flush(), kFffd);
    EXPECT_EQ(s.flush(), "");
}

TEST(HarmonyParser, AnalysisThenFinal) {
    Outcome r = parse_text(
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>final"
        "<|message|>Answer.<|return|>");
    EXPECT_EQ(r.joined(EventType::reasoning), "Think.");
    EXPECT_EQ(r.joined(EventType::content), "Answer.");
    EXPECT_EQ(r.finishes(), std::vector<FinishReason>{FinishReason::stop});
    ASSERT_EQ(r.messages.size(), 2u);
    EXPECT_EQ(r.messages[1].channel, "final");
    std::vector<EventType> expected{EventType::message_start, EventType::reasoning,
                                    EventType::message_end,   EventType::message_start,
                                    EventType::content,       EventType::message_end,
                                    EventType::finish};
    std::vector<EventType> types = r.types();
    types.erase(std::unique(types.begin(), types.end()), types.end());
    EXPECT_EQ(types, expected);
}

TEST(HarmonyParser, FunctionCallInTheModelsUsualForm) {
    Outcome r = parse_text(
        "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        "{\"city\":\"Paris\"}<|call|>",
        strict());
    ASSERT_GE(r.events.size(), 2u);
    EXPECT_EQ(r.events[0].type, EventType::message_start);
    EXPECT_EQ(r.events[0].message.recipient, "functions.get_weather");
    EXPECT_EQ(r.events[0].message.content_type, "<|constrain|>json");
    EXPECT_EQ(r.events[1].type, EventType::tool_call_start);
    EXPECT_EQ(r.events[1].recipient, "functions.get_weather");
    EXPECT_EQ(r.events[1].function_name, "get_weather");
    EXPECT_EQ(r.joined(EventType::tool_call_arguments), "{\"city\":\"Paris\"}");
    EXPECT_EQ(r.joined(EventType::content), "");
    EXPECT_EQ(r.finishes(), std::vector<FinishReason>{FinishReason::tool_calls});
    EXPECT_EQ(r.finish, FinishReason::tool_calls);
}

TEST(HarmonyParser, BuiltinToolCallHasNoFunctionName) {
    Outcome r = parse_text(
        "<|channel|>analysis to=browser.search code<|message|>{\"query\":\"x\"}<|call|>");
    ASSERT_GE(r.events.size(), 2u);
    EXPECT_EQ(r.events[1].type, EventType::tool_call_start);
    EXPECT_EQ(r.events[1].recipient, "browser.search");
    EXPECT_EQ(r.events[1].function_name, "");
}

TEST(HarmonyParser, PreambleOnCommentaryWithoutRecipient) {
    Outcome r = parse_text("<|channel|>commentary<|message|>Checking the weather.<|end|>");
    EXPECT_EQ(r.joined(EventType::preamble), "Checking the weather.");
    EXPECT_EQ(r.finishes(), std::vector<FinishReason>{FinishReason::length});
}

TEST(HarmonyParser, CallWithoutRecipientIsAStop) {
    Outcome r = parse_text("<|channel|>final<|message|>Hi<|call|>");
    EXPECT_EQ(r.finishes(), std::vector<FinishReason>{FinishReason::stop});
}

TEST(HarmonyParser, CutMidMessageFinishesWithLength) {
    const Tokenizer& tokenizer = test::harmony_tokenizer();
    StreamParser parser(tokenizer);
    std::vector<ParserEvent> events;
    for (TokenId id : tokenizer.encode("<|channel|>final<|message|>Hello wor", true)) {
        parser.feed(id, events);
    }
    EXPECT_EQ(parser.current_content(), "Hello wor");
    EXPECT_FALSE(parser.stopped());
    parser.end_of_stream(events);
    ASSERT_EQ(parser.messages().size(), 1u);
    EXPECT_EQ(parser.messages()[0].text(), "Hello wor");
    EXPECT_EQ(parser.finish_reason(), FinishReason::length);
    EXPECT_EQ(events.back().type, EventType::finish);
    EXPECT_THROW(parser.feed(1, events), Error);
}

TEST(HarmonyParser, StopTokenThenEndOfStreamFinishesOnce) {
    Outcome r = parse_text("<|channel|>final<|message|>Done.<|return|>");
    EXPECT_EQ(r.finishes(), std::vector<FinishReason>{FinishReason::stop});
}

TEST(HarmonyParser, StrayReturnAfterEnd) {
    Outcome r = parse_text("<|channel|>final<|message|>Done.<|end|><|return|>");
    ASSERT_EQ(r.messages.size(), 1u);
    EXPECT_EQ(r.finishes(), std::vector<FinishReason>{FinishReason::stop});
    EXPECT_THROW(parse_text("<|channel|>final<|message|>Done.<|end|><|return|>", strict()), Error);
}

TEST(HarmonyParser, MissingStartAfterEnd) {
    const std::string text =
        "<|channel|>analysis<|message|>a<|end|><|channel|>final<|message|>b<|return|>";
    Outcome r = parse_text(text);
    ASSERT_EQ(r.messages.size(), 2u);
    EXPECT_EQ(r.messages[1].role, Role::assistant);
    EXPECT_EQ(r.messages[1].channel, "final");
    EXPECT_EQ(r.joined(EventType::content), "b");
    EXPECT_THROW(parse_text(text, strict()), Error);
}

TEST(HarmonyParser, ControlTokensInContentAreNotText) {
    const std::string text = "<|channel|>final<|message|>a<|channel|>b<|constrain|>c<|return|>";
    Outcome r = parse_text(text);
    EXPECT_EQ(r.joined(EventType::content), "abc");
    EXPECT_THROW(parse_text(text, strict()), Error);
}

TEST(HarmonyParser, StartInsideContentClosesTheMessage) {
    Outcome r = parse_text(
        "<|channel|>analysis<|message|>a<|start|>assistant<|channel|>final<|message|>b"
        "<|return|>");
    ASSERT_EQ(r.messages.size(), 2u);
    EXPECT_EQ(r.messages[0].text(), "a");
    EXPECT_EQ(r.messages[1].text(), "b");
}

TEST(HarmonyParser, UnknownChannelIsContent) {
    Outcome r = parse_text(
        "<|channel|>?"
        "?<|message|>x<|return|>");
    ASSERT_EQ(r.messages.size(), 1u);
    EXPECT_EQ(r.messages[0].channel, "??");
    EXPECT_EQ(r.joined(EventType::content), "x");
}

TEST(HarmonyParser, HeaderThatNeverEndsBecomesContent) {
    ParseOptions options;
    options.max_header_tokens = 8;
    const std::string text =
        "<|channel|>final The answer is that there is no header end in this output at all";
    Outcome r = parse_text(text + "<|return|>", options);
    ASSERT_EQ(r.messages.size(), 1u);
    EXPECT_EQ(r.messages[0].channel, "final");
    EXPECT_EQ(r.messages[0].text(),
              "The answer is that there is no header end in this output at all");
    EXPECT_EQ(r.joined(EventType::content), r.messages[0].text());
    EXPECT_EQ(r.finishes(), std::vector<FinishReason>{FinishReason::stop});

    // The content streams before the stop token arrives.
    Outcome open = parse_text(text, options, false);
    EXPECT_FALSE(open.joined(EventType::content).empty());

    options.strict = true;
    EXPECT_THROW(parse_text(text, options), Error);
}

TEST(HarmonyParser, HeaderCutByEndOfStream) {
    Outcome r = parse_text("<|channel|>final Hello");
    ASSERT_EQ(r.messages.size(), 1u);
    EXPECT_EQ(r.messages[0].channel, "final");
    EXPECT_EQ(r.messages[0].text(), "Hello");
    EXPECT_EQ(r.finishes(), std::vector<FinishReason>{FinishReason::length});
    EXPECT_THROW(parse_text("<|channel|>final Hello", strict()), Error);
}

TEST(HarmonyParser, NothingGenerated) {
    Outcome r = parse_text("");
    EXPECT_TRUE(r.messages.empty());
    EXPECT_EQ(r.finishes(), std::vector<FinishReason>{FinishReason::length});
}

TEST(HarmonyParser, ParseMessagesHelper) {
    const Tokenizer& tokenizer = test::harmony_tokenizer();
    auto ids = tokenizer.encode(
        "<|start|>user<|message|>Hi<|end|><|start|>assistant<|channel|>final<|message|>Hello"
        "<|end|>",
        true);
    ParseOptions options;
    options.role.reset();
    std::vector<Message> messages = parse_messages(tokenizer, ids, options);
    ASSERT_EQ(messages.size(), 2u);
    EXPECT_EQ(messages[0].role, Role::user);
    EXPECT_EQ(messages[0].text(), "Hi");
    EXPECT_EQ(messages[1].channel, "final");
}

TEST(HarmonyCompletion, CollectsChatCompletionFields) {
    Outcome r = parse_text(
        "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary"
        "<|message|>Let me check.<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Oslo\"}<|call|>");
    Completion completion;
    for (const auto& e : r.events) completion.add(e);
    EXPECT_EQ(completion.reasoning, "Think.");
    EXPECT_EQ(completion.content, "Let me check.");
    ASSERT_EQ(completion.tool_calls.size(), 1u);
    EXPECT_EQ(completion.tool_calls[0].name, "get_weather");
    EXPECT_EQ(completion.tool_calls[0].arguments, "{\"city\":\"Oslo\"}");
    EXPECT_EQ(completion.finish_reason, FinishReason::tool_calls);

    Outcome builtin = parse_text("<|channel|>analysis to=python code<|message|>print(1)<|call|>");
    Completion b;
    for (const auto& e : builtin.events) b.add(e);
    EXPECT_TRUE(b.tool_calls.empty());
    EXPECT_EQ(b.reasoning, "print(1)");
    EXPECT_EQ(b.finish_reason, FinishReason::stop);
}

TEST(HarmonyHeader, Forms) {
    Message a = parse_header("<|channel|>commentary to=functions.f <|constrain|>json",
                             Role::assistant, true);
    EXPECT_EQ(a.recipient, "functions.f");
    EXPECT_EQ(a.channel, "commentary");
    EXPECT_EQ(a.content_type, "<|constrain|>json");

    Message b = parse_header("assistant to=functions.f<|channel|>commentary json", {}, true);
    EXPECT_EQ(b.role, Role::assistant);
    EXPECT_EQ(b.recipient, "functions.f");
    EXPECT_EQ(b.content_type, "json");

    Message c = parse_header("functions.f to=assistant<|channel|>commentary", {}, true);
    EXPECT_EQ(c.role, Role::tool);
    EXPECT_EQ(c.name, "functions.f");
    EXPECT_EQ(c.recipient, "assistant");

    Message d = parse_header("user:alice", {}, true);
    EXPECT_EQ(d.role, Role::user);
    EXPECT_EQ(d.name, "alice");

    Message e = parse_header("<|channel|>final", Role::assistant, true);
    EXPECT_EQ(e.channel, "final");
    EXPECT_FALSE(e.recipient.has_value());
    EXPECT_FALSE(e.content_type.has_value());

    EXPECT_THROW(parse_header("<|channel|>final a b c", Role::assistant, true), Error);
    Message f = parse_header("<|channel|>final a b c", Role::assistant, false);
    EXPECT_EQ(f.content_type, "c");
}

}  // namespace
}  // namespace neural::chat
