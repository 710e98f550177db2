#include "api/responses.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <utility>

#include "api/openai_fields.h"
#include "chat/lark_grammar.h"
#include "chat/regex_automaton.h"

namespace neural::openai {

using namespace detail;

namespace {

// Text of a content field: a string, or an array of text parts (input_text, output_text, text,
// reasoning_text, summary_text, refusal) joined with newlines.
std::string parts_text(const Json& content, const std::string& param) {
    if (content.is_string()) return content.get<std::string>();
    if (!content.is_array()) wrong_type(param, "a string or an array of content parts", content);
    std::string text;
    for (std::size_t i = 0; i < content.size(); ++i) {
        const Json& part = content[i];
        const std::string pp = fmt::format("{}[{}]", param, i);
        if (!part.is_object()) wrong_type(pp, "an object", part);
        auto type = get_string(part, "type", pp + ".type");
        if (!type) missing(pp + ".type");
        static const std::set<std::string> text_types = {"input_text", "output_text", "text",
                                                         "reasoning_text", "summary_text"};
        std::optional<std::string> t;
        if (text_types.count(*type)) {
            check_keys(part, {"type", "text", "annotations", "logprobs"}, pp);
            t = get_string(part, "text", pp + ".text");
        } else if (*type == "refusal") {
            check_keys(part, {"type", "refusal"}, pp);
            t = get_string(part, "refusal", pp + ".refusal");
        } else {
            unsupported(pp + ".type",
                        fmt::format("content part type '{}' is not supported (text only)", *type));
        }
        if (!t) missing(pp + ".text");
        if (i > 0) text += "\n";
        text += *t;
    }
    return text;
}

// Rewrites a Chat Completions parameter path into the Responses field it came from.
struct PathMap {
    std::vector<std::string> messages;  // messages[k] -> "input[i]" / "instructions"

    std::string map(const std::string& text) const {
        std::string out = text;
        for (std::size_t k = messages.size(); k-- > 0;) {
            const std::string from = fmt::format("messages[{}]", k);
            for (std::size_t at = out.find(from); at != std::string::npos;
                 at = out.find(from, at + messages[k].size())) {
                // messages[1] must not match inside messages[12]
                const std::size_t end = at + from.size();
                if (end < out.size() && out[end] >= '0' && out[end] <= '9') continue;
                out.replace(at, from.size(), messages[k]);
            }
        }
        static const std::pair<const char*, const char*> renames[] = {
            {"response_format.json_schema.schema", "text.format.schema"},
            {"response_format.json_schema", "text.format"},
            {"response_format", "text.format"},
            {"max_completion_tokens", "max_output_tokens"},
            {"reasoning_effort", "reasoning.effort"},
            {".function.", "."},
            {"tool_choice.function.name", "tool_choice.name"},
        };
        for (const auto& [from, to] : renames) {
            for (std::size_t at = out.find(from); at != std::string::npos;
                 at = out.find(from, at + std::string_view(to).size())) {
                out.replace(at, std::string_view(from).size(), to);
            }
        }
        return out;
    }
};

// Input item types of tools this server does not run; dropped from the conversation.
const std::set<std::string>& hosted_item_types() {
    static const std::set<std::string> types = {"web_search_call",
                                                "file_search_call",
                                                "computer_call",
                                                "computer_call_output",
                                                "code_interpreter_call",
                                                "image_generation_call",
                                                "local_shell_call",
                                                "local_shell_call_output",
                                                "shell_call",
                                                "shell_call_output",
                                                "apply_patch_call",
                                                "apply_patch_call_output",
                                                "mcp_call",
                                                "mcp_list_tools",
                                                "mcp_approval_request",
                                                "mcp_approval_response",
                                                "compaction",
                                                "tool_search_call",
                                                "tool_search_output"};
    return types;
}

// Namespace and tool names go into harmony headers ("to=NAMESPACE.NAME"): letters, digits, '_'
// and '-' only.
void check_tool_name(const std::string& name, const std::string& param) {
    const bool ok =
        !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '_' || c == '-';
        });
    if (!ok) {
        throw RequestError(fmt::format("'{}' must be 1 to 64 letters, digits, '_' or '-'", param),
                           param, "invalid_value");
    }
}

std::string item_suffix(const std::string& response_id) {
    const std::size_t at = response_id.find('_');
    return at == std::string::npos ? response_id : response_id.substr(at + 1);
}

}  // namespace

std::optional<std::string> previous_response_id(const Json& body) {
    if (!body.is_object()) return std::nullopt;
    return get_string(body, "previous_response_id", "previous_response_id");
}

ResponsesRequest parse_responses_request(const Json& body, const ChatRequestOptions& options,
                                         const ConversationState* previous,
                                         const ItemLookup& items) {
    if (!body.is_object())
        throw RequestError("the request body must be a JSON object", {}, "invalid_json");
    ResponsesRequest r;
    std::vector<std::string> ignored;
    LenientScope lenient(options.strict, ignored);
    std::set<std::string_view> allowed = {"model",
                                          "input",
                                          "instructions",
                                          "previous_response_id",
                                          "tools",
                                          "tool_choice",
                                          "parallel_tool_calls",
                                          "text",
                                          "reasoning",
                                          "max_output_tokens",
                                          "temperature",
                                          "top_p",
                                          "top_k",
                                          "min_p",
                                          "seed",
                                          "stream",
                                          "stream_options",
                                          "store",
                                          "metadata",
                                          "user",
                                          "service_tier",
                                          "include",
                                          "truncation",
                                          "background",
                                          "prompt_cache_key",
                                          "safety_identifier",
                                          "max_tool_calls",
                                          "top_logprobs",
                                          "conversation",
                                          "prompt",
                                          "presence_penalty",
                                          "frequency_penalty",
                                          "repetition_penalty"};
    if (options.allow_test_options) allowed.insert("neural_forced_output");
    check_keys(body, allowed, "");

    Json chat{{"messages", Json::array()}};
    PathMap paths;
    // Calls of namespace / custom tools in the input: the chat layer sees placeholder names
    // ("neural-item-K"), replaced by `tool` (the harmony recipient or tool author) afterwards.
    struct Fixup {
        std::string tool;
        bool json = true;  // the call's content is JSON (<|constrain|>json); false: custom tools
    };
    std::vector<Fixup> fixups;
    auto add_message = [&](Json m, std::string path) {
        chat["messages"].push_back(std::move(m));
        paths.messages.push_back(std::move(path));
    };
    if (previous) r.call_names = previous->call_names;

    if (auto instructions = get_string(body, "instructions", "instructions"))
        add_message(Json{{"role", "developer"}, {"content", *instructions}}, "instructions");

    const Json* input = field(body, "input");
    if (!input && !previous) missing("input");
    if (input && input->is_string()) {
        add_message(Json{{"role", "user"}, {"content", input->get<std::string>()}}, "input");
        r.input_items.push_back(Json{
            {"id", "msg_in0"},
            {"type", "message"},
            {"role", "user"},
            {"content",
             Json::array({Json{{"type", "input_text"}, {"text", input->get<std::string>()}}})}});
    } else if (input && input->is_array()) {
        if (input->size() > options.limits.max_messages) {
            throw RequestError(
                fmt::format("at most {} input items are supported", options.limits.max_messages),
                "input", "invalid_value");
        }
        for (std::size_t i = 0; i < input->size(); ++i) {
            const std::string where = fmt::format("input[{}]", i);
            const Json* given = &(*input)[i];
            if (!given->is_object()) wrong_type(where, "an object", *given);
            if (given->value("type", Json()) == "item_reference") {
                check_keys(*given, {"type", "id"}, where);
                auto id = get_string(*given, "id", where + ".id");
                if (!id) missing(where + ".id");
                const Json* found = items ? items(*id) : nullptr;
                if (!found) {
                    throw RequestError(
                        fmt::format("Item with id '{}' not found ('{}' refers to it; this "
                                    "server keeps the items of its last stored responses)",
                                    *id, where),
                        where + ".id", "item_not_found");
                }
                given = found;
            }
            const Json& item = *given;
            std::string type = get_string(item, "type", where + ".type").value_or("message");
            Json stored = item;
            if (!stored.contains("type")) stored["type"] = type;
            if (!stored.contains("id") || !stored["id"].is_string())
                stored["id"] = fmt::format("{}_in{}", type == "message" ? "msg" : "item", i);
            r.input_items.push_back(std::move(stored));
            if (type == "message") {
                check_keys(item, {"type", "role", "content", "id", "status", "name"}, where);
                auto role = get_string(item, "role", where + ".role");
                if (!role) missing(where + ".role");
                const Json* content = field(item, "content");
                if (!content) missing(where + ".content");
                Json m{{"role", *role}, {"content", parts_text(*content, where + ".content")}};
                if (*role != "user" && *role != "assistant" && *role != "system" &&
                    *role != "developer") {
                    throw RequestError(
                        fmt::format("'{}.role' is '{}'; expected user, assistant, system or "
                                    "developer",
                                    where, *role),
                        where + ".role", "invalid_value");
                }
                add_message(std::move(m), where);
            } else if (type == "function_call" || type == "custom_tool_call") {
                const bool custom = type == "custom_tool_call";
                if (custom) {
                    check_keys(item, {"type", "id", "call_id", "name", "input", "status"}, where);
                } else {
                    check_keys(
                        item, {"type", "id", "call_id", "name", "namespace", "arguments", "status"},
                        where);
                }
                auto call_id = get_string(item, "call_id", where + ".call_id");
                if (!call_id) missing(where + ".call_id");
                auto name = get_string(item, "name", where + ".name");
                if (!name) missing(where + ".name");
                auto ns =
                    custom ? std::nullopt : get_string(item, "namespace", where + ".namespace");
                std::string args = custom ? "" : "{}";
                if (const Json* a = field(item, custom ? "input" : "arguments"))
                    args = a->is_string() ? a->get<std::string>() : a->dump();
                if (ns) check_tool_name(*ns, where + ".namespace");
                const std::string qualified = ns ? *ns + "." + *name : *name;
                r.call_names[*call_id] = qualified;
                std::string chat_name = *name;
                if (ns || custom) {
                    // Harmony spells these calls differently from function calls: the chat
                    // layer writes a placeholder, replaced once the history is built.
                    check_tool_name(*name, where + ".name");
                    chat_name = fmt::format("neural-item-{}", fixups.size());
                    fixups.push_back(Fixup{ns ? qualified : "functions." + *name, !custom});
                }
                add_message(Json{{"role", "assistant"},
                                 {"tool_calls",
                                  Json::array({Json{{"id", *call_id},
                                                    {"type", "function"},
                                                    {"function", Json{{"name", chat_name},
                                                                      {"arguments", args}}}}})}},
                            where);
            } else if (type == "function_call_output" || type == "custom_tool_call_output") {
                check_keys(item, {"type", "id", "call_id", "output", "status"}, where);
                auto call_id = get_string(item, "call_id", where + ".call_id");
                if (!call_id) missing(where + ".call_id");
                const Json* output = field(item, "output");
                if (!output) missing(where + ".output");
                auto it = r.call_names.find(*call_id);
                if (it == r.call_names.end()) {
                    throw RequestError(
                        fmt::format("'{}.call_id' is '{}', but no function_call with that call_id "
                                    "is in the input or the previous response",
                                    where, *call_id),
                        where + ".call_id", "invalid_value");
                }
                std::string chat_name = it->second;
                if (chat_name.find('.') != std::string::npos) {
                    chat_name = fmt::format("neural-item-{}", fixups.size());
                    fixups.push_back(Fixup{it->second, false});
                }
                add_message(Json{{"role", "tool"},
                                 {"tool_call_id", *call_id},
                                 {"name", chat_name},
                                 {"content", parts_text(*output, where + ".output")}},
                            where);
            } else if (type == "reasoning") {
                check_keys(item,
                           {"type", "id", "content", "summary", "encrypted_content", "status"},
                           where);
                std::string text;
                if (const Json* c = field(item, "content"))
                    text = parts_text(*c, where + ".content");
                if (text.empty()) {
                    if (const Json* s = field(item, "summary"))
                        text = parts_text(*s, where + ".summary");
                }
                if (!text.empty())
                    add_message(Json{{"role", "assistant"}, {"reasoning_content", text}}, where);
            } else if (hosted_item_types().count(type)) {
                // Calls of tools this server does not run, their results, and compacted
                // history: nothing harmony can render.
                r.chat.notices.push_back(fmt::format(
                    "dropping input items of type '{}': this server does not run that tool", type));
            } else {
                unsupported(where + ".type",
                            fmt::format("input item type '{}' is not supported (message, "
                                        "function_call, function_call_output, custom_tool_call, "
                                        "custom_tool_call_output, reasoning, item_reference)",
                                        type));
            }
        }
    } else if (input) {
        wrong_type("input", "a string or an array of input items", *input);
    }
    if (chat["messages"].empty() && !previous) {
        throw RequestError("'input' must not be empty", "input", "invalid_value");
    }

    // Tools: the flat Responses form. Function tools and freeform (custom) tools go to the
    // chat layer as functions; namespace tools become harmony namespaces of their own; tools
    // this server does not run (web search, file search, ...) are dropped.
    std::vector<chat::ToolNamespace> namespaces;
    std::map<std::string, std::shared_ptr<const chat::JsonSchemaGrammar>> namespace_strict;
    // Freeform tools whose grammar the sampler enforces on the call's text.
    std::map<std::string, std::shared_ptr<const chat::JsonSchemaGrammar>> custom_grammars;
    if (const Json* tools = field(body, "tools")) {
        if (!tools->is_array()) wrong_type("tools", "an array", *tools);
        Json out = Json::array();
        auto function_tool = [&](const Json& t, const std::string& tp) {
            check_keys(t, {"type", "name", "description", "parameters", "strict"}, tp);
            Json fn = Json::object();
            for (const char* key : {"name", "description", "parameters", "strict"}) {
                if (auto it = t.find(key); it != t.end()) fn[key] = *it;
            }
            return fn;
        };
        for (std::size_t i = 0; i < tools->size(); ++i) {
            const Json& t = (*tools)[i];
            const std::string tp = fmt::format("tools[{}]", i);
            if (!t.is_object()) wrong_type(tp, "an object", t);
            auto type = get_string(t, "type", tp + ".type");
            if (!type) missing(tp + ".type");
            if (*type == "function") {
                out.push_back(Json{{"type", "function"}, {"function", function_tool(t, tp)}});
            } else if (*type == "custom") {
                check_keys(t, {"type", "name", "description", "format"}, tp);
                auto name = get_string(t, "name", tp + ".name");
                if (!name) missing(tp + ".name");
                std::string description =
                    get_string(t, "description", tp + ".description").value_or("");
                if (const Json* f = field(t, "format")) {
                    if (!f->is_object()) wrong_type(tp + ".format", "an object", *f);
                    const std::string ftype = f->value("type", std::string("text"));
                    if (ftype == "grammar") {
                        const std::string syntax = f->value("syntax", std::string("lark"));
                        const std::string definition = f->value("definition", std::string());
                        // The grammar is shown to the model, and the sampler enforces it on the
                        // call's text where one automaton expresses it (lark_grammar.h); else
                        // the call is free and the log says why.
                        description += fmt::format(
                            "{}The input is plain text (not JSON) in this {} grammar:\n{}",
                            description.empty() ? "" : "\n", syntax, definition);
                        try {
                            if (syntax != "lark" && syntax != "regex")
                                throw chat::RegexError("the syntax is neither lark nor regex",
                                                       true);
                            const std::string expr =
                                syntax == "lark" ? chat::lark_to_regex(definition) : definition;
                            custom_grammars[*name] = chat::JsonSchemaGrammar::text(
                                chat::RegexAutomaton::compile("^(?:" + expr + ")$"));
                        } catch (const chat::RegexError& e) {
                            r.chat.notices.push_back(fmt::format(
                                "custom tool '{}': its {} grammar is shown to the model but not "
                                "enforced while sampling: {}",
                                *name, syntax, e.what()));
                        }
                    } else {
                        description += std::string(description.empty() ? "" : "\n") +
                                       "The input is plain text (not JSON).";
                    }
                }
                r.tool_kinds.custom.insert(*name);
                out.push_back(Json{{"type", "function"},
                                   {"function", Json{{"name", *name},
                                                     {"description", description},
                                                     {"parameters", Json{{"type", "string"}}}}}});
            } else if (*type == "namespace") {
                check_keys(t, {"type", "name", "description", "tools"}, tp);
                auto name = get_string(t, "name", tp + ".name");
                if (!name) missing(tp + ".name");
                check_tool_name(*name, tp + ".name");
                if (*name == "functions" || *name == "browser" || *name == "python") {
                    throw RequestError(
                        fmt::format("'{}.name' may not be '{}' (a harmony namespace)", tp, *name),
                        tp + ".name", "invalid_value");
                }
                const Json* inner = field(t, "tools");
                if (!inner || !inner->is_array()) wrong_type(tp + ".tools", "an array", t);
                chat::ToolNamespace ns;
                ns.name = *name;
                ns.description = get_string(t, "description", tp + ".description");
                for (std::size_t k = 0; k < inner->size(); ++k) {
                    const Json& f = (*inner)[k];
                    const std::string fp = fmt::format("{}.tools[{}]", tp, k);
                    if (!f.is_object()) wrong_type(fp, "an object", f);
                    if (f.value("type", std::string("function")) != "function") {
                        r.chat.notices.push_back(
                            fmt::format("dropping a tool of type '{}' inside namespace '{}'",
                                        f.value("type", Json("?")).dump(), *name));
                        continue;
                    }
                    const Json fn = function_tool(f, fp);
                    chat::ToolDescription d;
                    auto fname = get_string(fn, "name", fp + ".name");
                    if (!fname) missing(fp + ".name");
                    check_tool_name(*fname, fp + ".name");
                    d.name = *fname;
                    d.description = get_string(fn, "description", fp + ".description").value_or("");
                    if (const Json* p = field(fn, "parameters")) {
                        if (!p->is_object())
                            wrong_type(fp + ".parameters", "an object (a JSON Schema)", *p);
                        d.parameters = *p;
                    }
                    if (get_bool(fn, "strict", fp + ".strict").value_or(false)) {
                        namespace_strict[*name + "." + d.name] = compile_request_schema(
                            d.parameters.value_or(Json{{"type", "object"}}), fp + ".parameters",
                            options.strict_schemas.value_or(options.strict), r.chat.notices);
                    }
                    ns.tools.push_back(std::move(d));
                }
                r.tool_kinds.namespaces.insert(*name);
                namespaces.push_back(std::move(ns));
            } else {
                // Hosted tools (web_search, file_search, code_interpreter, computer_use,
                // image_generation, mcp, local_shell, ...): the server runs none of them.
                r.chat.notices.push_back(fmt::format(
                    "dropping tools of type '{}': this server does not run them (the model does "
                    "not see them)",
                    *type));
            }
        }
        chat["tools"] = std::move(out);
    }
    if (const Json* tc = field(body, "tool_choice")) {
        if (tc->is_object()) {
            auto type = get_string(*tc, "type", "tool_choice.type");
            if (type == "function" || type == "custom") {
                check_keys(*tc, {"type", "name"}, "tool_choice");
                Json fn = Json::object();
                if (auto name = get_string(*tc, "name", "tool_choice.name")) fn["name"] = *name;
                chat["tool_choice"] = Json{{"type", "function"}, {"function", std::move(fn)}};
            } else if (type == "allowed_tools") {
                // The mode applies; the model sees all tools (harmony has no per-turn subset).
                chat["tool_choice"] = tc->value("mode", std::string("auto"));
            } else {
                r.chat.notices.push_back(fmt::format(
                    "tool_choice of type '{}' is answered as auto: this server does not run that "
                    "tool",
                    type.value_or("?")));
            }
        } else {
            chat["tool_choice"] = *tc;
        }
    }
    if (chat.contains("tools") && chat["tools"].empty() && chat.contains("tool_choice") &&
        chat["tool_choice"].is_string() && chat["tool_choice"] != "none") {
        chat.erase("tool_choice");  // only dropped tools were given
    }
    if (chat.contains("tools") && chat["tools"].empty()) chat.erase("tools");
    if (const Json* text = field(body, "text")) {
        if (!text->is_object()) wrong_type("text", "an object", *text);
        check_keys(*text, {"format", "verbosity"}, "text");
        get_string(*text, "verbosity", "text.verbosity");
        if (const Json* f = field(*text, "format")) {
            if (!f->is_object()) wrong_type("text.format", "an object", *f);
            auto type = get_string(*f, "type", "text.format.type");
            if (!type) missing("text.format.type");
            if (*type == "json_schema") {
                check_keys(*f, {"type", "name", "schema", "description", "strict"}, "text.format");
                Json js = Json::object();
                for (const char* key : {"name", "schema", "description", "strict"}) {
                    if (auto it = f->find(key); it != f->end()) js[key] = *it;
                }
                chat["response_format"] = Json{{"type", "json_schema"}, {"json_schema", js}};
            } else {
                chat["response_format"] = *f;
            }
        }
    }
    if (const Json* reasoning = field(body, "reasoning")) {
        if (!reasoning->is_object()) wrong_type("reasoning", "an object", *reasoning);
        check_keys(*reasoning, {"effort", "summary", "generate_summary"}, "reasoning");
        if (auto effort = get_string(*reasoning, "effort", "reasoning.effort"))
            chat["reasoning_effort"] = *effort;  // none / minimal / xhigh: see reasoning_effort_of
        for (const char* key : {"summary", "generate_summary"}) {
            const std::string param = std::string("reasoning.") + key;
            if (auto summary = get_string(*reasoning, key, param)) {
                if (*summary != "auto" && *summary != "concise" && *summary != "detailed") {
                    throw RequestError(fmt::format("'{}' must be auto, concise or detailed, got "
                                                   "'{}'",
                                                   param, *summary),
                                       param, "invalid_value");
                }
                r.reasoning_summary = true;
            }
        }
    }
    if (auto background = get_bool(body, "background", "background"); background && *background)
        unsupported("background", "'background' responses are not supported");
    if (field(body, "conversation"))
        unsupported("conversation", "'conversation' is not supported; use previous_response_id");
    if (field(body, "prompt"))
        unsupported("prompt", "prompt templates ('prompt') are not supported");
    int top_logprobs = 0;
    if (auto tl = get_integer(body, "top_logprobs", "top_logprobs")) {
        if (*tl < 0 || *tl > kMaxTopLogprobs) {
            throw RequestError(fmt::format("'top_logprobs' must be between 0 and {}, got {}",
                                           kMaxTopLogprobs, *tl),
                               "top_logprobs", "invalid_value");
        }
        top_logprobs = static_cast<int>(*tl);  // returned with the include below
    }
    if (auto tr = get_string(body, "truncation", "truncation");
        tr && *tr != "disabled" && *tr != "auto") {
        throw RequestError("'truncation' must be auto or disabled", "truncation", "invalid_value");
    }
    if (const Json* inc = field(body, "include"); inc && !inc->is_array())
        wrong_type("include", "an array", *inc);
    // Logprobs come with include "message.output_text.logprobs" (top_logprobs alone: none).
    bool want_logprobs = false;
    if (const Json* inc = field(body, "include")) {
        for (const Json& v : *inc) want_logprobs |= v == "message.output_text.logprobs";
    }
    const int logprobs = want_logprobs ? top_logprobs : -1;
    get_integer(body, "max_tool_calls", "max_tool_calls");
    get_string(body, "prompt_cache_key", "prompt_cache_key");
    get_string(body, "safety_identifier", "safety_identifier");
    if (const Json* so = field(body, "stream_options")) {
        if (!so->is_object()) wrong_type("stream_options", "an object", *so);
        check_keys(*so, {"include_obfuscation"}, "stream_options");
    }
    r.store = get_bool(body, "store", "store").value_or(true);
    r.previous_response_id = get_string(body, "previous_response_id", "previous_response_id");

    for (const char* key :
         {"model", "temperature", "top_p", "top_k", "min_p", "seed", "stream",
          "parallel_tool_calls", "user", "metadata", "service_tier", "neural_forced_output",
          "presence_penalty", "frequency_penalty", "repetition_penalty"}) {
        if (auto it = body.find(key); it != body.end()) chat[key] = *it;
    }
    if (auto it = body.find("max_output_tokens"); it != body.end())
        chat["max_completion_tokens"] = *it;

    // A follow-up may add nothing (the previous response's conversation is the whole prompt);
    // the chat parser wants a message, so it gets an empty one that is dropped again.
    const bool placeholder = chat["messages"].empty();
    if (placeholder) add_message(Json{{"role", "user"}, {"content", ""}}, "input");
    try {
        ChatRequestOptions chat_options = options;
        chat_options.strict = true;  // every field of `chat` was put there above
        chat_options.strict_schemas = options.strict_schemas.value_or(options.strict);
        std::vector<std::string> notices = std::move(r.chat.notices);
        r.chat = parse_chat_request(chat, chat_options);
        r.chat.logprobs = logprobs;
        // The chat layer's notices name chat fields: the Responses names are what the client
        // sent.
        for (const std::string& n : r.chat.notices) notices.push_back(paths.map(n));
        r.chat.notices = std::move(notices);
    } catch (const RequestError& e) {
        throw RequestError(paths.map(e.what()), paths.map(e.param()), e.code());
    }
    if (placeholder) r.chat.history.clear();
    // Namespace and custom tool calls in the input: their harmony spelling.
    for (chat::Message& m : r.chat.history) {
        auto index_of = [&](const std::optional<std::string>& name) -> std::optional<std::size_t> {
            static const std::string prefix = "functions.neural-item-";
            if (!name || !name->starts_with(prefix)) return std::nullopt;
            const std::size_t k = std::stoul(name->substr(prefix.size()));
            return k < fixups.size() ? std::optional<std::size_t>(k) : std::nullopt;
        };
        if (auto k = index_of(m.recipient); k && m.role == chat::Role::assistant) {
            m.recipient = fixups[*k].tool;
            if (!fixups[*k].json) m.content_type.reset();
        } else if (auto k2 = index_of(m.name); k2 && m.role == chat::Role::tool) {
            m.name = fixups[*k2].tool;
        }
    }
    if (r.chat.tool_choice != ToolChoice::none) {
        if (!namespace_strict.empty() || !custom_grammars.empty()) {
            auto constraint = r.chat.constraint
                                  ? std::make_shared<OutputConstraint>(*r.chat.constraint)
                                  : std::make_shared<OutputConstraint>();
            if (!r.chat.constraint) {
                // The chat layer made none (no strict function): the functions it would have
                // listed as callable.
                for (const chat::ToolNamespace& ns : r.chat.developer.tools) {
                    if (ns.name != "functions") continue;
                    for (const chat::ToolDescription& t : ns.tools)
                        constraint->functions.push_back(t.name);
                }
            }
            for (auto& [name, grammar] : namespace_strict)
                constraint->function_arguments[name] = grammar;
            for (auto& [name, grammar] : custom_grammars) {
                constraint->function_arguments[name] = grammar;
                constraint->text_functions.push_back(name);
            }
            r.chat.constraint = std::move(constraint);
        }
        if (r.chat.constraint) {
            // Under a constraint the reply's framing admits only the calls it knows: the
            // namespace tools too, and freeform tools' headers without <|constrain|>json.
            auto constraint = std::make_shared<OutputConstraint>(*r.chat.constraint);
            for (const chat::ToolNamespace& ns : namespaces) {
                for (const chat::ToolDescription& t : ns.tools)
                    constraint->functions.push_back(ns.name + "." + t.name);
            }
            for (const std::string& name : r.tool_kinds.custom) {
                if (!custom_grammars.count(name)) constraint->text_functions.push_back(name);
            }
            r.chat.constraint = std::move(constraint);
        }
        if (r.chat.tool_choice == ToolChoice::named &&
            r.tool_kinds.custom.count(r.chat.tool_choice_name)) {
            // A named freeform tool: its header, without <|constrain|>json.
            r.chat.forced_output =
                "<|channel|>commentary to=functions." + r.chat.tool_choice_name + "<|message|>";
        }
        for (auto& ns : namespaces) r.chat.developer.tools.push_back(std::move(ns));
    }
    if (previous) {
        r.chat.history.insert(r.chat.history.begin(), previous->history.begin(),
                              previous->history.end());
    }
    r.chat.ignored_fields = std::move(ignored);

    // What the response object repeats of the request.
    Json& echo = r.echo;
    echo["instructions"] = body.contains("instructions") ? body["instructions"] : Json(nullptr);
    echo["max_output_tokens"] =
        body.contains("max_output_tokens") ? body["max_output_tokens"] : Json(nullptr);
    echo["parallel_tool_calls"] = body.value("parallel_tool_calls", Json(true));
    echo["previous_response_id"] =
        r.previous_response_id ? Json(*r.previous_response_id) : Json(nullptr);
    Json summary = nullptr;
    if (const Json* reasoning = field(body, "reasoning"); reasoning && reasoning->is_object()) {
        if (auto it = reasoning->find("summary"); it != reasoning->end()) summary = *it;
    }
    echo["reasoning"] = Json{
        {"effort", std::string(chat::reasoning_effort_name(
                       r.chat.system.reasoning_effort.value_or(chat::ReasoningEffort::medium)))},
        {"summary", summary}};
    echo["store"] = r.store;
    echo["temperature"] = body.value("temperature", Json(1.0));
    echo["text"] = Json{{"format", body.contains("text") && body["text"].is_object() &&
                                           body["text"].contains("format")
                                       ? body["text"]["format"]
                                       : Json{{"type", "text"}}}};
    echo["tool_choice"] = body.value("tool_choice", Json("auto"));
    echo["tools"] = body.value("tools", Json::array());
    echo["top_p"] = body.value("top_p", Json(1.0));
    echo["truncation"] = body.value("truncation", Json("disabled"));
    echo["metadata"] = body.value("metadata", Json::object());
    if (echo["metadata"].is_null()) echo["metadata"] = Json::object();
    return r;
}

// ---- encoder ----------------------------------------------------------------------------------

ResponseEncoder::ResponseEncoder(std::string id, std::int64_t created, std::string model, Json echo,
                                 ToolKinds tools, bool reasoning_summary)
    : id_(std::move(id)),
      created_(created),
      model_(std::move(model)),
      echo_(std::move(echo)),
      tools_(std::move(tools)),
      reasoning_summary_(reasoning_summary) {
    response_ = snapshot("in_progress");
}

Json ResponseEncoder::with_sequence(Json event) {
    event["sequence_number"] = sequence_++;
    return event;
}

Json ResponseEncoder::snapshot(std::string_view status) const {
    Json r{{"id", id_},
           {"object", "response"},
           {"created_at", created_},
           {"status", std::string(status)},
           {"error", nullptr},
           {"incomplete_details", nullptr},
           {"model", model_}};
    for (auto it = echo_.begin(); it != echo_.end(); ++it) r[it.key()] = it.value();
    r["output"] = output_;
    r["usage"] = nullptr;
    return r;
}

std::vector<Json> ResponseEncoder::begin() {
    return {
        with_sequence(Json{{"type", "response.created"}, {"response", snapshot("in_progress")}}),
        with_sequence(
            Json{{"type", "response.in_progress"}, {"response", snapshot("in_progress")}})};
}

void ResponseEncoder::open(Item kind, const chat::ParserEvent&, std::vector<Json>& out) {
    item_ = kind;
    text_.clear();
    logprobs_ = Json::array();
    const std::string suffix = fmt::format("{}{:02d}", item_suffix(id_), items_);
    const auto index = output_.size();
    Json item;
    switch (kind) {
        case Item::reasoning:
            item_id_ = "rs_" + suffix;
            item = Json{{"id", item_id_},
                        {"type", "reasoning"},
                        {"summary", Json::array()},
                        {"content", Json::array()}};
            break;
        case Item::message:
            item_id_ = "msg_" + suffix;
            item = Json{{"id", item_id_},
                        {"type", "message"},
                        {"status", "in_progress"},
                        {"role", "assistant"},
                        {"content", Json::array()}};
            break;
        case Item::function_call:
            item_id_ = "fc_" + suffix;
            call_id_ = tool_call_id(id_, calls_++);
            item = Json{{"id", item_id_},      {"type", "function_call"}, {"status", "in_progress"},
                        {"call_id", call_id_}, {"name", call_name_},      {"arguments", ""}};
            if (!call_namespace_.empty()) item["namespace"] = call_namespace_;
            break;
        case Item::custom_call:
            item_id_ = "ctc_" + suffix;
            call_id_ = tool_call_id(id_, calls_++);
            item =
                Json{{"id", item_id_},      {"type", "custom_tool_call"}, {"status", "in_progress"},
                     {"call_id", call_id_}, {"name", call_name_},         {"input", ""}};
            break;
        case Item::builtin:
        case Item::none:
            return;
    }
    ++items_;
    output_.push_back(item);
    out.push_back(with_sequence(
        Json{{"type", "response.output_item.added"}, {"output_index", index}, {"item", item}}));
    if (kind == Item::reasoning || kind == Item::message) {
        const Json part = kind == Item::reasoning ? Json{{"type", "reasoning_text"}, {"text", ""}}
                                                  : Json{{"type", "output_text"},
                                                         {"text", ""},
                                                         {"annotations", Json::array()},
                                                         {"logprobs", Json::array()}};
        out.push_back(with_sequence(Json{{"type", "response.content_part.added"},
                                         {"item_id", item_id_},
                                         {"output_index", index},
                                         {"content_index", 0},
                                         {"part", part}}));
    }
    if (kind == Item::reasoning && reasoning_summary_) {
        out.push_back(with_sequence(Json{{"type", "response.reasoning_summary_part.added"},
                                         {"item_id", item_id_},
                                         {"output_index", index},
                                         {"summary_index", 0},
                                         {"part", Json{{"type", "summary_text"}, {"text", ""}}}}));
    }
}

void ResponseEncoder::close(std::string_view status, std::vector<Json>& out) {
    if (item_ == Item::none || item_ == Item::builtin) {
        item_ = Item::none;
        return;
    }
    const auto index = output_.size() - 1;
    Json& item = output_[index];
    if (item_ == Item::reasoning || item_ == Item::message) {
        const bool reasoning = item_ == Item::reasoning;
        const Json part = reasoning ? Json{{"type", "reasoning_text"}, {"text", text_}}
                                    : Json{{"type", "output_text"},
                                           {"text", text_},
                                           {"annotations", Json::array()},
                                           {"logprobs", logprobs_}};
        Json done{
            {"type", reasoning ? "response.reasoning_text.done" : "response.output_text.done"},
            {"item_id", item_id_},
            {"output_index", index},
            {"content_index", 0},
            {"text", text_}};
        if (!reasoning) done["logprobs"] = logprobs_;
        out.push_back(with_sequence(std::move(done)));
        out.push_back(with_sequence(Json{{"type", "response.content_part.done"},
                                         {"item_id", item_id_},
                                         {"output_index", index},
                                         {"content_index", 0},
                                         {"part", part}}));
        item["content"] = Json::array({part});
        if (reasoning && reasoning_summary_) {
            const Json summary{{"type", "summary_text"}, {"text", text_}};
            out.push_back(with_sequence(Json{{"type", "response.reasoning_summary_text.done"},
                                             {"item_id", item_id_},
                                             {"output_index", index},
                                             {"summary_index", 0},
                                             {"text", text_}}));
            out.push_back(with_sequence(Json{{"type", "response.reasoning_summary_part.done"},
                                             {"item_id", item_id_},
                                             {"output_index", index},
                                             {"summary_index", 0},
                                             {"part", summary}}));
            item["summary"] = Json::array({summary});
        }
        if (!reasoning) item["status"] = std::string(status);
        messages_.push_back(chat::Message::assistant(reasoning ? "analysis" : "final", text_));
    } else if (item_ == Item::custom_call) {
        out.push_back(with_sequence(Json{{"type", "response.custom_tool_call_input.done"},
                                         {"item_id", item_id_},
                                         {"output_index", index},
                                         {"input", text_}}));
        item["input"] = text_;
        item["status"] = std::string(status);
        chat::Message call = chat::Message::function_call(call_name_, text_);
        call.content_type.reset();  // plain text, as the model wrote it
        messages_.push_back(std::move(call));
        call_names_[call_id_] = call_name_;
    } else {
        out.push_back(with_sequence(Json{{"type", "response.function_call_arguments.done"},
                                         {"item_id", item_id_},
                                         {"output_index", index},
                                         {"name", call_name_},
                                         {"arguments", text_}}));
        item["arguments"] = text_;
        item["status"] = std::string(status);
        chat::Message call = chat::Message::function_call(call_name_, text_);
        if (!call_namespace_.empty()) call.recipient = call_namespace_ + "." + call_name_;
        messages_.push_back(std::move(call));
        call_names_[call_id_] =
            call_namespace_.empty() ? call_name_ : call_namespace_ + "." + call_name_;
    }
    out.push_back(with_sequence(
        Json{{"type", "response.output_item.done"}, {"output_index", index}, {"item", item}}));
    item_ = Item::none;
}

std::vector<Json> ResponseEncoder::event(const chat::ParserEvent& e) {
    std::vector<Json> out;
    const auto index = output_.empty() ? 0 : output_.size() - 1;
    auto delta = [&](const char* type) {
        if (e.text.empty()) return;
        text_ += e.text;
        Json d{{"type", type}, {"item_id", item_id_}, {"output_index", index}};
        if (item_ != Item::function_call && item_ != Item::custom_call) d["content_index"] = 0;
        d["delta"] = e.text;
        if (item_ == Item::message) {
            Json lp = logprobs_json(e.logprobs);
            for (const Json& t : lp) logprobs_.push_back(t);
            d["logprobs"] = std::move(lp);
        }
        out.push_back(with_sequence(std::move(d)));
        if (item_ == Item::reasoning && reasoning_summary_) {
            out.push_back(with_sequence(Json{{"type", "response.reasoning_summary_text.delta"},
                                             {"item_id", item_id_},
                                             {"output_index", index},
                                             {"summary_index", 0},
                                             {"delta", e.text}}));
        }
    };
    switch (e.type) {
        case chat::EventType::message_start:
            close("completed", out);
            if (e.message.is_tool_call()) break;  // opened at tool_call_start
            open(e.message.channel == "analysis" ? Item::reasoning : Item::message, e, out);
            break;
        case chat::EventType::tool_call_start: {
            call_namespace_.clear();
            call_name_ = e.function_name;
            Item kind = Item::builtin;
            if (!e.function_name.empty()) {
                kind =
                    tools_.custom.count(e.function_name) ? Item::custom_call : Item::function_call;
            } else if (const auto dot = e.recipient.find('.');
                       dot != std::string::npos &&
                       tools_.namespaces.count(e.recipient.substr(0, dot))) {
                // A call of a namespace tool ("multi_agent_v1.spawn").
                call_namespace_ = e.recipient.substr(0, dot);
                call_name_ = e.recipient.substr(dot + 1);
                kind = Item::function_call;
            }
            open(kind, e, out);
            break;
        }
        case chat::EventType::reasoning:
            if (item_ == Item::reasoning) delta("response.reasoning_text.delta");
            break;
        case chat::EventType::content:
        case chat::EventType::preamble:
            if (item_ == Item::message) delta("response.output_text.delta");
            break;
        case chat::EventType::tool_call_arguments:
            if (item_ == Item::function_call) delta("response.function_call_arguments.delta");
            if (item_ == Item::custom_call) delta("response.custom_tool_call_input.delta");
            break;
        case chat::EventType::message_end:
            close("completed", out);
            break;
        case chat::EventType::finish:
            break;
    }
    return out;
}

std::vector<Json> ResponseEncoder::finish(const ChatResult& result) {
    std::vector<Json> out;
    const bool cut = result.finish == chat::FinishReason::length;
    close(cut ? "incomplete" : "completed", out);
    response_ = snapshot(cut ? "incomplete" : "completed");
    if (cut) response_["incomplete_details"] = Json{{"reason", "max_output_tokens"}};
    const Usage& u = result.usage;
    response_["usage"] =
        Json{{"input_tokens", u.prompt_tokens},
             {"input_tokens_details", Json{{"cached_tokens", u.cached_tokens}}},
             {"output_tokens", u.completion_tokens},
             {"output_tokens_details", Json{{"reasoning_tokens", u.reasoning_tokens}}},
             {"total_tokens", u.prompt_tokens + u.completion_tokens}};
    out.push_back(with_sequence(Json{{"type", cut ? "response.incomplete" : "response.completed"},
                                     {"response", response_}}));
    return out;
}

Json ResponseEncoder::failed(std::string_view message, std::string_view code) {
    Json r = snapshot("failed");
    r["error"] = Json{{"code", code.empty() ? std::string("server_error") : std::string(code)},
                      {"message", std::string(message)}};
    return with_sequence(Json{{"type", "response.failed"}, {"response", std::move(r)}});
}

void ResponseEncoder::builtin_round(chat::Message call, chat::Message result) {
    messages_.push_back(std::move(call));
    messages_.push_back(std::move(result));
}

ConversationState ResponseEncoder::state_after(const ResponsesRequest& request) const {
    ConversationState s;
    s.history = request.chat.history;
    s.history.insert(s.history.end(), messages_.begin(), messages_.end());
    s.call_names = request.call_names;
    for (const auto& [id, name] : call_names_) s.call_names[id] = name;
    s.response = response_;
    s.input_items = request.input_items;
    return s;
}

}  // namespace neural::openai
