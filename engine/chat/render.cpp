#include "chat/render.h"

#include <algorithm>
#include <string_view>

#include "neural/error.h"

namespace neural::chat {

namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kConstrain = "<|constrain|>";

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
    std::string out;
    for (std::size_t i = 0; i < parts.size(); ++i) {
        if (i > 0) out += separator;
        out += parts[i];
    }
    return out;
}

// Lines of a description the way Rust's str::lines() yields them: split on '\n', a trailing
// '\r' removed, no empty last line for text that ends in a newline.
std::vector<std::string> split_lines(std::string_view text) {
    std::vector<std::string> lines;
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(start, end - start);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        lines.emplace_back(line);
        start = end + 1;
    }
    return lines;
}

bool is_enum(const Json& schema) {
    auto it = schema.find("enum");
    return it != schema.end() && it->is_array() && !it->empty();
}

const std::string* string_field(const Json& schema, const char* key) {
    auto it = schema.find(key);
    if (it == schema.end() || !it->is_string()) return nullptr;
    return it->get_ptr<const std::string*>();
}

// The value of `default` as harmony writes it after "default: ": strings quoted, except on enum
// properties where the value is already one of the listed literals.
std::string default_text(const Json& schema, const Json& value) {
    if (value.is_string()) {
        const auto& text = value.get_ref<const std::string&>();
        return is_enum(schema) ? text : "\"" + text + "\"";
    }
    return value.dump();
}

bool has_null_member(const std::string& type_text) {
    std::size_t start = 0;
    while (true) {
        std::size_t end = type_text.find(" | ", start);
        std::string_view member =
            std::string_view(type_text).substr(start, end == std::string::npos ? end : end - start);
        if (member == "null") return true;
        if (end == std::string::npos) return false;
        start = end + 3;
    }
}

std::string with_nullable(const Json& schema, std::string type_text) {
    auto it = schema.find("nullable");
    if (it != schema.end() && it->is_boolean() && it->get<bool>() && !has_null_member(type_text)) {
        type_text += " | null";
    }
    return type_text;
}

std::string type_name_from_list(const Json& types) {
    std::vector<std::string> names;
    for (const auto& type : types) {
        if (!type.is_string()) continue;
        const auto& name = type.get_ref<const std::string&>();
        names.push_back(name == "integer" ? "number" : name);
    }
    return join(names, " | ");
}

std::string render_object(const Json& schema, const std::string& indent);

// Trailing `// description default: V` comment of a oneOf variant.
std::string variant_comment(const Json& variant) {
    std::vector<std::string> comments;
    if (const auto* description = string_field(variant, "description")) {
        comments.push_back(*description);
    }
    if (auto it = variant.find("default"); it != variant.end()) {
        comments.push_back("default: " + default_text(variant, *it));
    }
    return comments.empty() ? std::string() : " // " + join(comments, " ");
}

void render_property(std::string& out, const std::string& name, const Json& property, bool required,
                     const std::string& indent) {
    const std::string optional_mark = required ? "" : "?";
    if (!property.is_object()) {
        out += indent + name + optional_mark + ": any,\n";
        return;
    }
    auto one_of = property.find("oneOf");
    bool is_one_of = one_of != property.end() && one_of->is_array();

    if (const auto* title = string_field(property, "title")) {
        out += indent + "// " + *title + "\n" + indent + "//\n";
    }
    if (!is_one_of) {
        if (const auto* description = string_field(property, "description")) {
            out += indent + "// " + *description + "\n";
        }
    }
    if (auto examples = property.find("examples");
        examples != property.end() && examples->is_array() && !examples->empty()) {
        out += indent + "// Examples:\n";
        for (const auto& example : *examples) {
            std::string text = example.is_string() ? example.get<std::string>() : example.dump();
            out += indent + "// - \"" + text + "\"\n";
        }
    }

    if (is_one_of) {
        // A union of schemas gets one line per variant so that each can carry its own comment.
        if (const auto* description = string_field(property, "description")) {
            out += indent + "// " + *description + "\n";
        }
        if (auto it = property.find("default"); it != property.end()) {
            out += indent + "// default: " + default_text(property, *it) + "\n";
        }
        out += indent + name + optional_mark + ":\n";
        for (const auto& variant : *one_of) {
            out += indent + " | " +
                   with_nullable(variant, json_schema_to_typescript(variant, indent + "    ")) +
                   variant_comment(variant) + "\n";
        }
        out += indent + ",\n";
        return;
    }

    out += indent + name + optional_mark + ": " +
           with_nullable(property, json_schema_to_typescript(property, indent + "    ")) + ",";
    if (auto it = property.find("default"); it != property.end()) {
        out += " // default: " + default_text(property, *it);
    }
    out += "\n";
}

std::string render_object(const Json& schema, const std::string& indent) {
    std::string out;
    if (const auto* description = string_field(schema, "description")) {
        out += "// " + *description + "\n" + indent;
    }
    out += "{\n";
    auto properties = schema.find("properties");
    if (properties != schema.end() && properties->is_object()) {
        std::vector<std::string> required;
        if (auto it = schema.find("required"); it != schema.end() && it->is_array()) {
            for (const auto& name : *it) {
                if (name.is_string()) required.push_back(name.get<std::string>());
            }
        }
        for (const auto& [name, property] : properties->items()) {
            bool is_required = std::find(required.begin(), required.end(), name) != required.end();
            render_property(out, name, property, is_required, indent);
        }
    }
    out += indent + "}";
    return out;
}

// Which policy-dropped messages to leave out; true = render.
std::vector<bool> messages_to_render(const std::vector<Message>& messages, AnalysisPolicy policy) {
    std::vector<bool> keep(messages.size(), true);
    auto is_analysis = [](const Message& m) { return m.channel && *m.channel == "analysis"; };
    auto is_final = [](const Message& m) { return m.channel && *m.channel == "final"; };

    if (policy == AnalysisPolicy::harmony) {
        const Message* last_assistant = nullptr;
        for (const auto& m : messages) {
            if (m.role == Role::assistant) last_assistant = &m;
        }
        if (last_assistant == nullptr || !is_final(*last_assistant)) return keep;
        auto first_final = std::find_if(messages.begin(), messages.end(), is_final);
        auto end = static_cast<std::size_t>(first_final - messages.begin());
        for (std::size_t i = 0; i < end; ++i) {
            if (is_analysis(messages[i])) keep[i] = false;
        }
    } else if (policy == AnalysisPolicy::finished_turns) {
        // A turn is everything after a user / system / developer message up to the next one.
        std::size_t turn_start = 0;
        auto close_turn = [&](std::size_t turn_end) {
            const Message* last_assistant = nullptr;
            for (std::size_t i = turn_start; i < turn_end; ++i) {
                if (messages[i].role == Role::assistant) last_assistant = &messages[i];
            }
            if (last_assistant == nullptr || !is_final(*last_assistant)) return;
            for (std::size_t i = turn_start; i < turn_end; ++i) {
                if (is_analysis(messages[i])) keep[i] = false;
            }
        };
        for (std::size_t i = 0; i < messages.size(); ++i) {
            Role role = messages[i].role;
            if (role == Role::user || role == Role::system || role == Role::developer) {
                close_turn(i);
                turn_start = i + 1;
            }
        }
        close_turn(messages.size());
    }
    return keep;
}

bool conversation_has_functions(const Conversation& conversation) {
    return std::any_of(conversation.messages.begin(), conversation.messages.end(),
                       [](const Message& m) {
                           const auto* dev = std::get_if<DeveloperContent>(&m.content);
                           return m.role == Role::developer && dev && dev->has_function_tools();
                       });
}

std::string message_body(const Message& message, bool has_functions) {
    if (const auto* system = std::get_if<SystemContent>(&message.content)) {
        return render_system_content(*system, has_functions);
    }
    if (const auto* developer = std::get_if<DeveloperContent>(&message.content)) {
        return render_developer_content(*developer);
    }
    return std::get<std::string>(message.content);
}

}  // namespace

std::string Prompt::text() const {
    std::string out;
    for (const auto& segment : segments_) out += segment.text;
    return out;
}

std::vector<TokenId> Prompt::tokens(const Tokenizer& tokenizer) const {
    std::vector<TokenId> ids;
    for (const auto& segment : segments_) {
        if (segment.special) {
            auto id = tokenizer.special_id(segment.text);
            if (!id) fail("the tokenizer has no special token {}", segment.text);
            ids.push_back(*id);
        } else {
            auto piece = tokenizer.encode(segment.text, false);
            ids.insert(ids.end(), piece.begin(), piece.end());
        }
    }
    return ids;
}

void Prompt::add_special(std::string name) { segments_.push_back(Segment{true, std::move(name)}); }

void Prompt::add_text(std::string text) {
    if (!text.empty()) segments_.push_back(Segment{false, std::move(text)});
}

void Prompt::append(const Prompt& other) {
    segments_.insert(segments_.end(), other.segments_.begin(), other.segments_.end());
}

std::string json_schema_to_typescript(const Json& schema, const std::string& indent) {
    if (!schema.is_object()) return "any";
    if (auto one_of = schema.find("oneOf"); one_of != schema.end() && one_of->is_array()) {
        // Outside a property (which lays variants out on lines) a union is written inline.
        std::vector<std::string> variants;
        for (const auto& variant : *one_of) {
            variants.push_back(with_nullable(variant, json_schema_to_typescript(variant, indent)));
        }
        return join(variants, " | ");
    }
    auto type = schema.find("type");
    if (type == schema.end()) return "any";
    if (type->is_array()) return type_name_from_list(*type);
    if (!type->is_string()) return "any";
    const auto& name = type->get_ref<const std::string&>();
    if (name == "object") return render_object(schema, indent);
    if (name == "string") {
        if (!is_enum(schema)) return "string";
        std::vector<std::string> literals;
        for (const auto& value : schema["enum"]) literals.push_back(value.dump());
        return join(literals, " | ");
    }
    if (name == "number" || name == "integer") return "number";
    if (name == "boolean") return "boolean";
    if (name == "array") {
        auto items = schema.find("items");
        if (items == schema.end() || !items->is_object()) return "Array<any>";
        return json_schema_to_typescript(*items, indent) + "[]";
    }
    return "any";
}

std::string render_tool_namespace(const ToolNamespace& ns) {
    std::vector<std::string> lines{"## " + ns.name, ""};
    if (ns.description) {
        if (ns.tools.empty()) {
            // A namespace without functions (python) is prose; it is not commented out.
            lines.push_back(*ns.description);
        } else {
            for (const auto& line : split_lines(*ns.description)) lines.push_back("// " + line);
        }
    }
    if (!ns.tools.empty()) {
        lines.push_back("namespace " + ns.name + " {");
        lines.push_back("");
        for (const auto& tool : ns.tools) {
            for (const auto& line : split_lines(tool.description)) lines.push_back("// " + line);
            if (tool.parameters && !tool.parameters->is_null()) {
                lines.push_back("type " + tool.name + " = (_: " +
                                json_schema_to_typescript(*tool.parameters) + ") => any;");
            } else {
                lines.push_back("type " + tool.name + " = () => any;");
            }
            lines.push_back("");
        }
        lines.push_back("} // namespace " + ns.name);
    }
    return join(lines, "\n");
}

std::string render_system_content(const SystemContent& content, bool conversation_has_functions) {
    std::vector<std::string> sections;

    std::vector<std::string> top;
    if (content.model_identity) top.push_back(*content.model_identity);
    if (content.knowledge_cutoff) top.push_back("Knowledge cutoff: " + *content.knowledge_cutoff);
    if (content.conversation_start_date) {
        top.push_back("Current date: " + *content.conversation_start_date);
    }
    if (!top.empty()) sections.push_back(join(top, "\n"));

    if (content.reasoning_effort) {
        sections.push_back("Reasoning: " +
                           std::string(reasoning_effort_name(*content.reasoning_effort)));
    }

    if (!content.tools.empty()) {
        std::vector<std::string> blocks;
        for (const auto& ns : content.tools) blocks.push_back(render_tool_namespace(ns));
        sections.push_back("# Tools\n\n" + join(blocks, "\n\n"));
    }

    const std::string calls_line =
        "Calls to these tools must go to the commentary channel: 'functions'.";
    if (content.channel_config && !content.channel_config->valid_channels.empty()) {
        std::string channels =
            "# Valid channels: " + join(content.channel_config->valid_channels, ", ") + ".";
        if (content.channel_config->channel_required) {
            channels += " Channel must be included for every message.";
        }
        if (conversation_has_functions) channels += "\n" + calls_line;
        sections.push_back(std::move(channels));
    } else if (conversation_has_functions) {
        sections.push_back(calls_line);
    }
    return join(sections, "\n\n");
}

std::string render_developer_content(const DeveloperContent& content) {
    std::vector<std::string> sections;
    if (content.instructions && !content.instructions->empty()) {
        sections.push_back("# Instructions\n\n" + *content.instructions);
    }
    if (!content.tools.empty()) {
        std::vector<std::string> blocks;
        for (const auto& ns : content.tools) blocks.push_back(render_tool_namespace(ns));
        sections.push_back("# Tools\n\n" + join(blocks, "\n\n"));
    }
    if (content.response_format) {
        const auto& format = *content.response_format;
        std::string section = "# Response Formats\n\n## " + format.name + "\n\n";
        if (!format.description.empty()) section += "// " + format.description + "\n";
        section += format.schema.dump();
        sections.push_back(std::move(section));
    }
    return join(sections, "\n\n");
}

Prompt render_message(const Message& message, bool conversation_has_functions) {
    Prompt prompt;
    prompt.add_special("<|start|>");
    if (message.role == Role::tool) {
        if (!message.name || message.name->empty()) {
            fail("a tool message needs the tool's name as its author (e.g. functions.get_weather)");
        }
        prompt.add_text(*message.name);
    } else if (message.name && !message.name->empty()) {
        prompt.add_text(std::string(role_name(message.role)) + ":" + *message.name);
    } else {
        prompt.add_text(std::string(role_name(message.role)));
    }
    if (message.recipient && !message.recipient->empty() && *message.recipient != "all") {
        prompt.add_text(" to=" + *message.recipient);
    }
    if (message.channel) {
        prompt.add_special("<|channel|>");
        prompt.add_text(*message.channel);
    }
    if (message.content_type && !message.content_type->empty()) {
        std::string_view type = *message.content_type;
        if (type.starts_with(kConstrain)) {
            prompt.add_text(" ");
            prompt.add_special(std::string(kConstrain));
            prompt.add_text(std::string(type.substr(kConstrain.size())));
        } else {
            prompt.add_text(" " + std::string(type));
        }
    }
    prompt.add_special("<|message|>");
    prompt.add_text(message_body(message, conversation_has_functions));
    prompt.add_special(message.is_tool_call() ? "<|call|>" : "<|end|>");
    return prompt;
}

Prompt render_reply_start(const std::string& reasoning, const std::string& content) {
    Prompt prompt;
    if (!reasoning.empty()) {
        prompt.add_special("<|channel|>");
        prompt.add_text("analysis");
        prompt.add_special("<|message|>");
        prompt.add_text(reasoning);
        if (content.empty()) return prompt;  // cut while thinking: the reasoning goes on
        prompt.add_special("<|end|>");
        prompt.add_special("<|start|>");
        prompt.add_text("assistant");
    }
    if (content.empty()) return prompt;
    prompt.add_special("<|channel|>");
    prompt.add_text("final");
    prompt.add_special("<|message|>");
    prompt.add_text(content);
    return prompt;
}

Prompt render_conversation(const Conversation& conversation, const RenderOptions& options) {
    const bool has_functions = conversation_has_functions(conversation);
    const auto keep = messages_to_render(conversation.messages, options.analysis);
    Prompt prompt;
    for (std::size_t i = 0; i < conversation.messages.size(); ++i) {
        if (!keep[i]) continue;
        const Message& message = conversation.messages[i];
        // A developer message with nothing to say is left out rather than rendered empty.
        if (const auto* dev = std::get_if<DeveloperContent>(&message.content);
            dev && render_developer_content(*dev).empty()) {
            continue;
        }
        prompt.append(render_message(message, has_functions));
    }
    return prompt;
}

Prompt render_for_completion(const Conversation& conversation, Role next_role,
                             const RenderOptions& options) {
    Prompt prompt = render_conversation(conversation, options);
    prompt.add_special("<|start|>");
    prompt.add_text(std::string(role_name(next_role)));
    return prompt;
}

std::int64_t context_end(std::span<const TokenId> tokens, const Tokenizer& tokenizer) {
    const std::optional<TokenId> start = tokenizer.special_id("<|start|>");
    if (!start) return 0;
    const std::vector<TokenId> role = tokenizer.encode("assistant", false);
    for (std::size_t i = 0; i + role.size() < tokens.size(); ++i) {
        if (tokens[i] == *start && std::equal(role.begin(), role.end(),
                                              tokens.begin() + static_cast<std::ptrdiff_t>(i + 1)))
            return static_cast<std::int64_t>(i + 1 + role.size());
    }
    return 0;
}

}  // namespace neural::chat
