// Every case of shared/fixtures/harmony/cases.json: render cases byte-exact as text and as token
// ids, parse cases through the streaming parser (with checkpoints and round trips).
#include <gtest/gtest.h>

#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include "chat/harmony_cases.h"
#include "chat/parser.h"
#include "chat/render.h"
#include "neural/error.h"

namespace neural::chat {
namespace {

using Json = nlohmann::ordered_json;
using test::harmony_case;
using test::harmony_tokenizer;

std::string case_name(const testing::TestParamInfo<std::string>& info) { return info.param; }

Prompt render_case(const Json& c) {
    Conversation conversation = test::conversation_from_fixture(c.at("conversation"));
    const Json& options = c.at("render_options");
    RenderOptions render_options = test::render_options_from_fixture(options);
    if (options.at("next_turn_role").is_null()) {
        return render_conversation(conversation, render_options);
    }
    auto role = role_from_name(options.at("next_turn_role").get<std::string>());
    return render_for_completion(conversation, role.value(), render_options);
}

// ---------------------------------------------------------------------------------------------
// Render cases

class HarmonyRenderCase : public testing::TestWithParam<std::string> {};

TEST_P(HarmonyRenderCase, Text) {
    const Json& c = harmony_case(GetParam());
    std::string expected = test::harmony_expected_text(c.at("expected_file").get<std::string>());
    EXPECT_EQ(render_case(c).text(), expected);
}

TEST_P(HarmonyRenderCase, Tokens) {
    const Json& c = harmony_case(GetParam());
    const Tokenizer& tokenizer = harmony_tokenizer();
    std::vector<TokenId> tokens = render_case(c).tokens(tokenizer);
    EXPECT_EQ(tokens, test::token_ids_from_fixture(c.at("expected_tokens")));
    // Decoding the ids (special tokens as their text) gives the expected file back.
    std::string expected = test::harmony_expected_text(c.at("expected_file").get<std::string>());
    EXPECT_EQ(tokenizer.decode(tokens), expected);
}

INSTANTIATE_TEST_SUITE_P(Fixture, HarmonyRenderCase,
                         testing::ValuesIn(test::harmony_case_names({"render_for_completion",
                                                                     "render_conversation"})),
                         case_name);

// ---------------------------------------------------------------------------------------------
// Parse cases

std::optional<Role> preset_role(const Json& c) {
    const Json& role = c.at("parse_options").at("role");
    if (role.is_null()) return std::nullopt;
    return role_from_name(role.get<std::string>()).value();
}

ParseOptions parse_options(const Json& c) {
    ParseOptions options;
    options.role = preset_role(c);
    options.strict = c.at("parse_options").at("strict").get<bool>();
    return options;
}

std::optional<std::string> optional_field(const Json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    return it->get<std::string>();
}

void expect_message(const Message& actual, const Json& expected, std::size_t index) {
    SCOPED_TRACE("message " + std::to_string(index));
    EXPECT_EQ(role_name(actual.role), expected.at("role").get<std::string>());
    EXPECT_EQ(actual.name, optional_field(expected, "name"));
    EXPECT_EQ(actual.recipient, optional_field(expected, "recipient"));
    EXPECT_EQ(actual.channel, optional_field(expected, "channel"));
    EXPECT_EQ(actual.content_type, optional_field(expected, "content_type"));
    ASSERT_TRUE(actual.has_text());
    EXPECT_EQ(actual.text(), expected.at("content").get<std::string>());
}

struct ParseRun {
    std::vector<Message> messages;
    bool failed = false;
    std::string error;
};

// Feeds the case's tokens one at a time, checking the checkpoints on the way.
ParseRun run_parse_case(const Json& c) {
    const Tokenizer& tokenizer = harmony_tokenizer();
    std::vector<TokenId> tokens = test::token_ids_from_fixture(c.at("input_tokens"));
    const bool eos = c.at("eos").get<bool>();
    Json checkpoints = c.contains("checkpoints") ? c.at("checkpoints") : Json::array();

    ParseRun run;
    StreamParser parser(tokenizer, parse_options(c));
    std::string deltas_joined;
    auto check = [&](std::size_t fed, bool after_eos) {
        for (const auto& point : checkpoints) {
            if (point.at("after_tokens").get<std::size_t>() != fed) continue;
            if (point.value("after_eos", false) != after_eos) continue;
            SCOPED_TRACE("checkpoint after " + std::to_string(fed) + " tokens" +
                         (after_eos ? " and eos" : ""));
            if (point.contains("last_content_delta")) {
                EXPECT_EQ(parser.last_content_delta(), optional_field(point, "last_content_delta"));
            }
            if (point.contains("current_content")) {
                EXPECT_EQ(parser.current_content(), point.at("current_content").get<std::string>());
            }
            if (point.contains("content_deltas_joined")) {
                EXPECT_EQ(deltas_joined, point.at("content_deltas_joined").get<std::string>());
            }
        }
    };
    try {
        std::vector<ParserEvent> events;
        for (std::size_t i = 0; i < tokens.size(); ++i) {
            parser.feed(tokens[i], events);
            if (parser.last_content_delta()) deltas_joined += *parser.last_content_delta();
            check(i + 1, false);
        }
        if (eos) {
            parser.end_of_stream(events);
            if (parser.last_content_delta()) deltas_joined += *parser.last_content_delta();
            check(tokens.size(), true);
        }
    } catch (const Error& e) {
        run.failed = true;
        run.error = e.what();
    }
    run.messages = parser.messages();
    return run;
}

class HarmonyParseCase : public testing::TestWithParam<std::string> {};

TEST_P(HarmonyParseCase, Messages) {
    const Json& c = harmony_case(GetParam());
    ParseRun run = run_parse_case(c);
    if (c.contains("expected_error")) {
        EXPECT_TRUE(run.failed) << "expected a parse error: "
                                << c.at("expected_error").get<std::string>();
        return;
    }
    ASSERT_FALSE(run.failed) << run.error;
    const Json& expected = c.at("expected_messages");
    ASSERT_EQ(run.messages.size(), expected.size());
    for (std::size_t i = 0; i < expected.size(); ++i) {
        expect_message(run.messages[i], expected[i], i);
    }
}

// Our tokenizer turns the case's input (file or segments) into the recorded input_tokens.
TEST_P(HarmonyParseCase, InputTokenization) {
    const Json& c = harmony_case(GetParam());
    const Tokenizer& tokenizer = harmony_tokenizer();
    std::string format = c.at("input_format").get<std::string>();
    std::vector<TokenId> tokens;
    if (format == "token_ids") {
        // The file holds the ids themselves; check that it agrees with input_tokens.
        std::string file = test::harmony_expected_text(c.at("expected_file").get<std::string>());
        std::size_t pos = 0;
        while (pos < file.size()) {
            while (pos < file.size() && std::isspace(static_cast<unsigned char>(file[pos]))) ++pos;
            std::size_t end = pos;
            while (end < file.size() && !std::isspace(static_cast<unsigned char>(file[end]))) ++end;
            if (end > pos) tokens.push_back(std::stoi(file.substr(pos, end - pos)));
            pos = end;
        }
    } else if (format == "text") {
        std::string text = test::harmony_expected_text(c.at("expected_file").get<std::string>());
        tokens = tokenizer.encode(text, true);
    } else {
        for (const auto& segment : c.at("input_segments")) {
            std::vector<TokenId> piece;
            if (segment.contains("token_ids")) {
                piece = test::token_ids_from_fixture(segment.at("token_ids"));
            } else {
                piece = tokenizer.encode(segment.at("text").get<std::string>(),
                                         segment.at("special_tokens").get<bool>());
            }
            tokens.insert(tokens.end(), piece.begin(), piece.end());
        }
    }
    EXPECT_EQ(tokens, test::token_ids_from_fixture(c.at("input_tokens")));
}

// Rendering the parsed messages again gives the recorded ids (where the case records them).
class HarmonyRoundTripCase : public testing::TestWithParam<std::string> {};

TEST_P(HarmonyRoundTripCase, RenderParsedMessages) {
    const Json& c = harmony_case(GetParam());
    Conversation conversation;
    for (const auto& m : c.at("expected_messages")) {
        conversation.messages.push_back(test::message_from_fixture(m));
    }
    RenderOptions options;
    options.analysis = AnalysisPolicy::keep;
    EXPECT_EQ(render_conversation(conversation, options).tokens(harmony_tokenizer()),
              test::token_ids_from_fixture(c.at("render_roundtrip_tokens")));
}

INSTANTIATE_TEST_SUITE_P(Fixture, HarmonyParseCase,
                         testing::ValuesIn(test::harmony_case_names({"parse_completion",
                                                                     "streaming_parse"})),
                         case_name);

INSTANTIATE_TEST_SUITE_P(Fixture, HarmonyRoundTripCase,
                         testing::ValuesIn(test::harmony_case_names(
                             {"parse_completion", "streaming_parse"}, "render_roundtrip_tokens")),
                         case_name);

}  // namespace
}  // namespace neural::chat
