#include "chat/harmony_cases.h"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "support/fixtures.h"

namespace neural::test {

namespace {

using Json = nlohmann::ordered_json;

std::optional<std::string> optional_string(const Json& j, const char* key) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return std::nullopt;
    return it->get<std::string>();
}

chat::ToolNamespace namespace_from_fixture(const Json& j) {
    chat::ToolNamespace ns;
    ns.name = j.at("name").get<std::string>();
    ns.description = optional_string(j, "description");
    for (const auto& tool : j.at("tools")) {
        chat::ToolDescription description;
        description.name = tool.at("name").get<std::string>();
        description.description = optional_string(tool, "description").value_or("");
        if (auto it = tool.find("parameters"); it != tool.end() && !it->is_null()) {
            description.parameters = *it;
        }
        ns.tools.push_back(std::move(description));
    }
    return ns;
}

chat::SystemContent system_from_fixture(const Json& j) {
    chat::SystemContent content;
    content.model_identity = optional_string(j, "model_identity");
    if (auto effort = optional_string(j, "reasoning_effort")) {
        content.reasoning_effort = chat::reasoning_effort_from_name(*effort);
    } else {
        content.reasoning_effort.reset();
    }
    content.knowledge_cutoff = optional_string(j, "knowledge_cutoff");
    content.conversation_start_date = optional_string(j, "conversation_start_date");
    if (auto it = j.find("channel_config"); it != j.end() && !it->is_null()) {
        chat::ChannelConfig config;
        config.valid_channels = it->at("valid_channels").get<std::vector<std::string>>();
        config.channel_required = it->at("channel_required").get<bool>();
        content.channel_config = config;
    } else {
        content.channel_config.reset();
    }
    if (auto it = j.find("tool_namespaces"); it != j.end() && !it->is_null()) {
        for (const auto& ns : *it) content.tools.push_back(namespace_from_fixture(ns));
    }
    return content;
}

chat::DeveloperContent developer_from_fixture(const Json& j) {
    chat::DeveloperContent content;
    content.instructions = optional_string(j, "instructions");
    if (auto it = j.find("tool_namespaces"); it != j.end() && !it->is_null()) {
        for (const auto& ns : *it) content.tools.push_back(namespace_from_fixture(ns));
    }
    return content;
}

}  // namespace

std::filesystem::path harmony_fixture_dir() { return shared_dir() / "fixtures" / "harmony"; }

const Json& harmony_cases() {
    static const Json cases = Json::parse(read_file(harmony_fixture_dir() / "cases.json"));
    return cases;
}

std::vector<std::string> harmony_case_names(const std::vector<std::string>& kinds,
                                            const std::string& with_field) {
    std::vector<std::string> names;
    try {
        for (const char* section : {"cases", "inline_parse_cases"}) {
            for (const auto& c : harmony_cases().at(section)) {
                auto kind = c.at("kind").get<std::string>();
                if (std::find(kinds.begin(), kinds.end(), kind) != kinds.end() &&
                    (with_field.empty() || c.contains(with_field))) {
                    names.push_back(c.at("name").get<std::string>());
                }
            }
        }
    } catch (const std::exception&) {
        return {"fixture_missing"};
    }
    return names;
}

const Json& harmony_case(const std::string& name) {
    for (const char* section : {"cases", "inline_parse_cases"}) {
        for (const auto& c : harmony_cases().at(section)) {
            if (c.at("name") == name) return c;
        }
    }
    throw std::runtime_error("no harmony fixture case named " + name);
}

std::string harmony_expected_text(const std::string& relative_path) {
    std::string raw = read_file(harmony_fixture_dir() / relative_path);
    std::string text;
    text.reserve(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] == '\r' && i + 1 < raw.size() && raw[i + 1] == '\n') continue;
        text.push_back(raw[i]);
    }
    while (!text.empty() && (text.back() == ' ' || text.back() == '\n' || text.back() == '\t' ||
                             text.back() == '\r')) {
        text.pop_back();
    }
    return text;
}

const Tokenizer& harmony_tokenizer() {
    static const Tokenizer tokenizer = Tokenizer::load(tiny_model_dir() / "tokenizer.json");
    return tokenizer;
}

chat::Message message_from_fixture(const Json& j) {
    chat::Message m;
    auto role = chat::role_from_name(j.at("role").get<std::string>());
    if (!role) throw std::runtime_error("unknown role in fixture: " + j.at("role").dump());
    m.role = *role;
    m.name = optional_string(j, "name");
    m.recipient = optional_string(j, "recipient");
    m.channel = optional_string(j, "channel");
    m.content_type = optional_string(j, "content_type");
    const Json& content = j.at("content");
    if (content.is_string()) {
        m.content = content.get<std::string>();
    } else if (content.at("type") == "system_content") {
        m.content = system_from_fixture(content);
    } else if (content.at("type") == "developer_content") {
        m.content = developer_from_fixture(content);
    } else {
        throw std::runtime_error("unknown content in fixture: " + content.dump());
    }
    return m;
}

chat::Conversation conversation_from_fixture(const Json& j) {
    chat::Conversation conversation;
    for (const auto& m : j.at("messages")) {
        conversation.messages.push_back(message_from_fixture(m));
    }
    return conversation;
}

chat::RenderOptions render_options_from_fixture(const Json& j) {
    chat::RenderOptions options;
    bool drop = j.at("auto_drop_analysis").get<bool>();
    options.analysis = drop ? chat::AnalysisPolicy::harmony : chat::AnalysisPolicy::keep;
    return options;
}

std::vector<TokenId> token_ids_from_fixture(const Json& j) {
    std::vector<TokenId> ids;
    for (const auto& id : j) {
        ids.push_back(static_cast<TokenId>(static_cast<std::uint32_t>(id.get<std::uint64_t>())));
    }
    return ids;
}

}  // namespace neural::test
