// Data model of the harmony chat format (gpt-oss): messages, system / developer content, tools.
// Rendering is in chat/render.h, parsing of generated tokens in chat/parser.h.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace neural::chat {

enum class Role { system, developer, user, assistant, tool };

// "system", "developer", "user", "assistant", "tool".
std::string_view role_name(Role role);
// The role spelled by `name`, if it is one of the five role names.
std::optional<Role> role_from_name(std::string_view name);

enum class ReasoningEffort { low, medium, high };

std::string_view reasoning_effort_name(ReasoningEffort effort);
// Accepts "low" / "medium" / "high" (case-insensitive); throws neural::Error otherwise.
ReasoningEffort reasoning_effort_from_name(std::string_view name);

// One tool of a namespace: rendered as `type NAME = (_: {...}) => any;` with the description
// as `// ` comment lines above it.
struct ToolDescription {
    std::string name;
    std::string description;
    // JSON Schema of the arguments. ordered_json because the rendering follows the key order
    // of the schema as given. Absent: the tool takes no arguments (`() => any`).
    std::optional<nlohmann::ordered_json> parameters;
};

// A `## NAME` section of `# Tools`. Function tools live in the namespace "functions" of the
// developer message; the built-in browser / python tools are namespaces of the system message.
struct ToolNamespace {
    std::string name;
    std::optional<std::string> description;
    std::vector<ToolDescription> tools;

    static ToolNamespace functions(std::vector<ToolDescription> tools);
    // harmony's built-in browsing tool (search / open / find), exact text of the reference.
    static ToolNamespace browser();
    // harmony's built-in stateful python tool (prose only, no functions).
    static ToolNamespace python();
};

struct ChannelConfig {
    std::vector<std::string> valid_channels{"analysis", "commentary", "final"};
    bool channel_required = true;
};

// Content of the system message. Every field that is empty / nullopt is left out of the
// rendering; the defaults are harmony's SystemContent defaults (no date).
struct SystemContent {
    std::optional<std::string> model_identity =
        std::string("You are ChatGPT, a large language model trained by OpenAI.");
    std::optional<ReasoningEffort> reasoning_effort = ReasoningEffort::medium;
    std::optional<std::string> knowledge_cutoff = std::string("2024-06");
    std::optional<std::string> conversation_start_date;  // "YYYY-MM-DD"
    std::optional<ChannelConfig> channel_config = ChannelConfig{};
    // Built-in tool namespaces (browser, python), in the order they are rendered.
    std::vector<ToolNamespace> tools;
};

// Structured output: rendered under `# Response Formats` of the developer message.
struct ResponseFormat {
    std::string name;
    std::string description;
    nlohmann::ordered_json schema;
};

// Content of the developer message (the API caller's "system prompt" and function tools).
struct DeveloperContent {
    std::optional<std::string> instructions;
    // Normally one namespace named "functions"; rendered in the given order.
    std::vector<ToolNamespace> tools;
    std::optional<ResponseFormat> response_format;

    bool has_function_tools() const;
};

using MessageContent = std::variant<std::string, SystemContent, DeveloperContent>;

// One harmony message. Optional header fields that are nullopt are not rendered.
struct Message {
    Role role = Role::user;
    // Author name. Tool messages are authored by the tool ("functions.get_weather",
    // "browser.search"); for other roles it renders as "role:name".
    std::optional<std::string> name;
    std::optional<std::string> recipient;     // "functions.get_weather", "assistant"; "all" = none
    std::optional<std::string> channel;       // "analysis", "commentary", "final"
    std::optional<std::string> content_type;  // "<|constrain|>json", "json", "code"
    MessageContent content = std::string();

    static Message system(SystemContent content);
    static Message developer(DeveloperContent content);
    static Message user(std::string text);
    // An assistant message on `channel` ("analysis", "final", "commentary").
    static Message assistant(std::string channel, std::string text);
    // An assistant call of function `function_name` (without the "functions." prefix) with
    // raw JSON `arguments`: commentary channel, `<|constrain|>json`, ends with <|call|>.
    static Message function_call(const std::string& function_name, std::string arguments);
    // The result of a call to `tool` ("functions.get_weather"), addressed to the assistant on
    // the commentary channel, content inserted verbatim.
    static Message tool_result(std::string tool, std::string output);

    // The text content; throws neural::Error for system / developer structured content.
    const std::string& text() const;
    bool has_text() const { return std::holds_alternative<std::string>(content); }
    // True for an assistant message addressed to a tool (rendered with <|call|>).
    bool is_tool_call() const;
};

struct Conversation {
    std::vector<Message> messages;
};

}  // namespace neural::chat
