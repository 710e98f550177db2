// Access to shared/fixtures/harmony (cases.json and the expected renderings) and the real
// gpt-oss tokenizer, for the chat tests.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/message.h"
#include "chat/render.h"
#include "tokenizer/tokenizer.h"

namespace neural::test {

std::filesystem::path harmony_fixture_dir();

// cases.json, parsed once (order-preserving). Throws if it cannot be read.
const nlohmann::ordered_json& harmony_cases();

// Names of the cases (both sections) whose kind is one of `kinds` and, if `with_field` is not
// empty, that have that field. Used at test registration; returns {"fixture_missing"} if
// cases.json cannot be read so the problem shows up as a failing test rather than zero tests.
std::vector<std::string> harmony_case_names(const std::vector<std::string>& kinds,
                                            const std::string& with_field = "");

// The case named `name` from either section; throws if absent.
const nlohmann::ordered_json& harmony_case(const std::string& name);

// An expected file as the upstream tests compare it: CRLF -> LF, trailing whitespace removed.
std::string harmony_expected_text(const std::string& relative_path);

// The gpt-oss tokenizer of the tiny test model, loaded once per process.
const Tokenizer& harmony_tokenizer();

chat::Message message_from_fixture(const nlohmann::ordered_json& j);
chat::Conversation conversation_from_fixture(const nlohmann::ordered_json& j);
chat::RenderOptions render_options_from_fixture(const nlohmann::ordered_json& j);
// Token ids of a JSON array; ids outside int32 (4294967295) wrap as the engine would see them.
std::vector<TokenId> token_ids_from_fixture(const nlohmann::ordered_json& j);

}  // namespace neural::test
