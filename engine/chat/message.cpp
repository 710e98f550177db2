#include "chat/message.h"

#include <algorithm>
#include <cctype>

#include "neural/error.h"

namespace neural::chat {

std::string_view role_name(Role role) {
    switch (role) {
        case Role::system:
            return "system";
        case Role::developer:
            return "developer";
        case Role::user:
            return "user";
        case Role::assistant:
            return "assistant";
        case Role::tool:
            return "tool";
    }
    return "user";
}

std::optional<Role> role_from_name(std::string_view name) {
    for (Role role : {Role::system, Role::developer, Role::user, Role::assistant, Role::tool}) {
        if (role_name(role) == name) return role;
    }
    return std::nullopt;
}

std::string_view reasoning_effort_name(ReasoningEffort effort) {
    switch (effort) {
        case ReasoningEffort::low:
            return "low";
        case ReasoningEffort::medium:
            return "medium";
        case ReasoningEffort::high:
            return "high";
    }
    return "medium";
}

ReasoningEffort reasoning_effort_from_name(std::string_view name) {
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (lower == "low") return ReasoningEffort::low;
    if (lower == "medium") return ReasoningEffort::medium;
    if (lower == "high") return ReasoningEffort::high;
    fail("unknown reasoning effort '{}' (expected low, medium or high)", name);
}

ToolNamespace ToolNamespace::functions(std::vector<ToolDescription> tools) {
    return ToolNamespace{"functions", std::nullopt, std::move(tools)};
}

// The texts below are harmony's built-in tool descriptions, byte for byte (the model was
// trained on exactly these); 【 † 】 are spelled as UTF-8 escapes to keep the source ASCII.
ToolNamespace ToolNamespace::browser() {
    ToolNamespace ns;
    ns.name = "browser";
    ns.description =
        "Tool for browsing.\n"
        "The `cursor` appears in brackets before each browsing display: `[{cursor}]`.\n"
        "Cite information from the tool using the following format:\n"
        "`\xE3\x80\x90{cursor}\xE2\x80\xA0L{line_start}(-L{line_end})?\xE3\x80\x91`, "
        "for example: `\xE3\x80\x90"
        "6\xE2\x80\xA0L9-L11\xE3\x80\x91` or "
        "`\xE3\x80\x90"
        "8\xE2\x80\xA0L3\xE3\x80\x91`.\n"
        "Do not quote more than 10 words directly from the tool output.\n"
        "sources=web (default: web)";
    ns.tools.push_back(ToolDescription{
        "search", "Searches for information related to `query` and displays `topn` results.",
        nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
            "query": {"type": "string"},
            "topn": {"type": "number", "default": 10},
            "source": {"type": "string"}}, "required": ["query"]})")});
    ns.tools.push_back(ToolDescription{
        "open",
        "Opens the link `id` from the page indicated by `cursor` starting at line number `loc`, "
        "showing `num_lines` lines.\n"
        "Valid link ids are displayed with the formatting: "
        "`\xE3\x80\x90{id}\xE2\x80\xA0.*\xE3\x80\x91`.\n"
        "If `cursor` is not provided, the most recent page is implied.\n"
        "If `id` is a string, it is treated as a fully qualified URL associated with `source`.\n"
        "If `loc` is not provided, the viewport will be positioned at the beginning of the "
        "document or centered on the most relevant passage, if available.\n"
        "Use this function without `id` to scroll to a new location of an opened page.",
        nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
            "id": {"type": ["number", "string"], "default": -1},
            "cursor": {"type": "number", "default": -1},
            "loc": {"type": "number", "default": -1},
            "num_lines": {"type": "number", "default": -1},
            "view_source": {"type": "boolean", "default": false},
            "source": {"type": "string"}}})")});
    ns.tools.push_back(ToolDescription{
        "find",
        "Finds exact matches of `pattern` in the current page, or the page given by `cursor`.",
        nlohmann::ordered_json::parse(R"({"type": "object", "properties": {
            "pattern": {"type": "string"},
            "cursor": {"type": "number", "default": -1}}, "required": ["pattern"]})")});
    return ns;
}

ToolNamespace ToolNamespace::python() {
    ToolNamespace ns;
    ns.name = "python";
    ns.description =
        "Use this tool to execute Python code in your chain of thought. The code will not be "
        "shown to the user. This tool should be used for internal reasoning, but not for code "
        "that is intended to be visible to the user (e.g. when creating plots, tables, or "
        "files).\n"
        "\n"
        "When you send a message containing Python code to python, it will be executed in a "
        "stateful Jupyter notebook environment. python will respond with the output of the "
        "execution or time out after 120.0 seconds. The drive at '/mnt/data' can be used to "
        "save and persist user files. Internet access for this session is UNKNOWN. Depends on "
        "the cluster.";
    return ns;
}

bool DeveloperContent::has_function_tools() const {
    return std::any_of(tools.begin(), tools.end(),
                       [](const ToolNamespace& ns) { return ns.name == "functions"; });
}

Message Message::system(SystemContent content) {
    Message m;
    m.role = Role::system;
    m.content = std::move(content);
    return m;
}

Message Message::developer(DeveloperContent content) {
    Message m;
    m.role = Role::developer;
    m.content = std::move(content);
    return m;
}

Message Message::user(std::string text) {
    Message m;
    m.role = Role::user;
    m.content = std::move(text);
    return m;
}

Message Message::assistant(std::string channel, std::string text) {
    Message m;
    m.role = Role::assistant;
    m.channel = std::move(channel);
    m.content = std::move(text);
    return m;
}

Message Message::function_call(const std::string& function_name, std::string arguments) {
    Message m;
    m.role = Role::assistant;
    m.recipient = "functions." + function_name;
    m.channel = "commentary";
    m.content_type = "<|constrain|>json";
    m.content = std::move(arguments);
    return m;
}

Message Message::tool_result(std::string tool, std::string output) {
    Message m;
    m.role = Role::tool;
    m.name = std::move(tool);
    m.recipient = "assistant";
    m.channel = "commentary";
    m.content = std::move(output);
    return m;
}

const std::string& Message::text() const {
    if (const auto* text = std::get_if<std::string>(&content)) return *text;
    fail("the {} message has structured content, not text", role_name(role));
}

bool Message::is_tool_call() const {
    return role == Role::assistant && recipient.has_value() && !recipient->empty() &&
           *recipient != "all";
}

}  // namespace neural::chat
