#include "api/openai.h"

#include "api/openai_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace neural::openai {

namespace detail {

// ---- field access with OpenAI-style errors ---------------------------------------------------

std::string type_name(const Json& v) {
    if (v.is_null()) return "null";
    if (v.is_boolean()) return "a boolean";
    if (v.is_number()) return "a number";
    if (v.is_string()) return "a string";
    if (v.is_array()) return "an array";
    return "an object";
}

[[noreturn]] void wrong_type(const std::string& param, const char* expected, const Json& v) {
    throw RequestError(fmt::format("'{}' must be {}, got {}", param, expected, type_name(v)), param,
                       "invalid_type");
}

// The value of `key`, or nullptr when it is absent or null (OpenAI treats null as "not given").
const Json* field(const Json& obj, const char* key) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
}

std::optional<std::string> get_string(const Json& obj, const char* key, const std::string& param) {
    const Json* v = field(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_string()) wrong_type(param, "a string", *v);
    return v->get<std::string>();
}

std::optional<bool> get_bool(const Json& obj, const char* key, const std::string& param) {
    const Json* v = field(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) wrong_type(param, "a boolean", *v);
    return v->get<bool>();
}

std::optional<double> get_number(const Json& obj, const char* key, const std::string& param) {
    const Json* v = field(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_number()) wrong_type(param, "a number", *v);
    return v->get<double>();
}

std::optional<std::int64_t> get_integer(const Json& obj, const char* key,
                                        const std::string& param) {
    const Json* v = field(obj, key);
    if (!v) return std::nullopt;
    if (v->is_number_integer()) return v->get<std::int64_t>();
    // 16.0 is an integer in JSON's number model; 16.5 is not.
    if (v->is_number_float()) {
        const double d = v->get<double>();
        if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15)
            return static_cast<std::int64_t>(d);
    }
    wrong_type(param, "an integer", *v);
}

[[noreturn]] void missing(const std::string& param) {
    throw RequestError(fmt::format("'{}' is required", param), param, "missing_required_parameter");
}

[[noreturn]] void unsupported(const std::string& param, const std::string& why) {
    throw RequestError(why, param, "unsupported_parameter");
}

// Where a lenient parse collects the unknown fields it skips (null: strict, they are a 400).
// Parsing runs on one thread from start to end, so the collector is per thread.
thread_local std::vector<std::string>* t_ignored = nullptr;

LenientScope::LenientScope(bool strict, std::vector<std::string>& out) : previous_(t_ignored) {
    t_ignored = strict ? nullptr : &out;
}
LenientScope::~LenientScope() { t_ignored = previous_; }

// "messages[3].foo" -> "messages[].foo": one name per field, whatever the index.
std::string field_name(const std::string& param) {
    std::string out;
    bool in_index = false;
    for (char c : param) {
        if (c == '[') {
            in_index = true;
            out += "[]";
        } else if (c == ']') {
            in_index = false;
        } else if (!in_index) {
            out += c;
        }
    }
    return out;
}

void check_keys(const Json& obj, const std::set<std::string_view>& allowed,
                const std::string& where) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
        if (!allowed.count(it.key())) {
            const std::string param = where.empty() ? it.key() : where + "." + it.key();
            if (t_ignored) {
                const std::string name = field_name(param);
                if (std::find(t_ignored->begin(), t_ignored->end(), name) == t_ignored->end())
                    t_ignored->push_back(name);
                continue;
            }
            unsupported(param, fmt::format("unsupported parameter '{}'", param));
        }
    }
}

}  // namespace detail

namespace {

using namespace detail;

// ---- shared sampling fields -------------------------------------------------------------------

void parse_sampling(const Json& body, SamplingParams& s, bool& seed_given) {
    if (auto t = get_number(body, "temperature", "temperature")) {
        if (!(*t >= 0.0 && *t <= 2.0)) {
            throw RequestError(fmt::format("'temperature' must be between 0 and 2, got {}", *t),
                               "temperature", "invalid_value");
        }
        s.temperature = static_cast<float>(*t);
    }
    if (auto p = get_number(body, "top_p", "top_p")) {
        if (!(*p > 0.0 && *p <= 1.0)) {
            throw RequestError(fmt::format("'top_p' must be in (0, 1], got {}", *p), "top_p",
                               "invalid_value");
        }
        s.top_p = static_cast<float>(*p);
    }
    if (auto k = get_integer(body, "top_k", "top_k")) {
        if (*k < 0 || *k > (1 << 24))
            throw RequestError("'top_k' must be >= 0", "top_k", "invalid_value");
        s.top_k = static_cast<int>(*k);
    }
    if (auto m = get_number(body, "min_p", "min_p")) {
        if (!(*m >= 0.0 && *m <= 1.0))
            throw RequestError("'min_p' must be in [0, 1]", "min_p", "invalid_value");
        s.min_p = static_cast<float>(*m);
    }
    if (auto seed = get_integer(body, "seed", "seed")) {
        s.seed = static_cast<std::uint64_t>(*seed);
        seed_given = true;
    }
    for (const char* penalty : {"frequency_penalty", "presence_penalty"}) {
        if (auto v = get_number(body, penalty, penalty)) {
            if (!(*v >= -2.0 && *v <= 2.0)) {
                throw RequestError(
                    fmt::format("'{}' must be between -2 and 2, got {}", penalty, *v), penalty,
                    "invalid_value");
            }
            (std::string_view(penalty) == "presence_penalty" ? s.presence_penalty
                                                             : s.frequency_penalty) =
                static_cast<float>(*v);
        }
    }
    if (auto v = get_number(body, "repetition_penalty", "repetition_penalty")) {
        if (!(*v > 0.0 && *v <= 10.0)) {
            throw RequestError(fmt::format("'repetition_penalty' must be in (0, 10], got {}", *v),
                               "repetition_penalty", "invalid_value");
        }
        s.repetition_penalty = static_cast<float>(*v);
    }
    if (const Json* bias = field(body, "logit_bias")) {
        if (!bias->is_object()) wrong_type("logit_bias", "an object", *bias);
        if (!bias->empty()) unsupported("logit_bias", "'logit_bias' is not supported");
    }
    if (const Json* n = field(body, "n")) {
        auto v = get_integer(body, "n", "n");
        if (*v != 1) {
            unsupported("n", fmt::format("'n' must be 1: this server generates one choice per "
                                         "request, got {}",
                                         n->dump()));
        }
    }
}

std::vector<std::string> parse_stop(const Json& body, const ParseLimits& limits) {
    std::vector<std::string> out;
    const Json* v = field(body, "stop");
    if (!v) return out;
    auto add = [&](const Json& s, const std::string& param) {
        if (!s.is_string()) wrong_type(param, "a string", s);
        std::string text = s.get<std::string>();
        if (text.empty())
            throw RequestError(fmt::format("'{}' must not be empty", param), param,
                               "invalid_value");
        if (text.size() > limits.max_stop_length) {
            throw RequestError(
                fmt::format("'{}' is longer than {} bytes", param, limits.max_stop_length), param,
                "invalid_value");
        }
        out.push_back(std::move(text));
    };
    if (v->is_string()) {
        add(*v, "stop");
    } else if (v->is_array()) {
        if (v->size() > limits.max_stop_sequences) {
            throw RequestError(
                fmt::format("'stop' may have at most {} sequences", limits.max_stop_sequences),
                "stop", "invalid_value");
        }
        for (std::size_t i = 0; i < v->size(); ++i) add((*v)[i], fmt::format("stop[{}]", i));
    } else {
        wrong_type("stop", "a string or an array of strings", *v);
    }
    return out;
}

void parse_stream(const Json& body, bool& stream, bool& include_usage) {
    stream = get_bool(body, "stream", "stream").value_or(false);
    if (const Json* so = field(body, "stream_options")) {
        if (!so->is_object()) wrong_type("stream_options", "an object", *so);
        // Clients send their stream options with every request; without a stream they say
        // nothing (OpenAI refuses them, which breaks clients that share one options object).
        if (!stream) return;
        check_keys(*so, {"include_usage", "include_obfuscation"}, "stream_options");
        include_usage =
            get_bool(*so, "include_usage", "stream_options.include_usage").value_or(false);
        get_bool(*so, "include_obfuscation", "stream_options.include_obfuscation");
    }
}

std::optional<int> parse_max_tokens(const Json& body) {
    std::optional<std::int64_t> value;
    const char* param = nullptr;
    auto a = get_integer(body, "max_completion_tokens", "max_completion_tokens");
    auto b = get_integer(body, "max_tokens", "max_tokens");
    if (a && b && *a != *b) {
        throw RequestError("'max_tokens' and 'max_completion_tokens' disagree; give one of them",
                           "max_tokens", "invalid_value");
    }
    if (a) {
        value = a;
        param = "max_completion_tokens";
    } else if (b) {
        value = b;
        param = "max_tokens";
    }
    if (!value) return std::nullopt;
    constexpr std::int64_t kMaxTokens = std::int64_t{1} << 30;
    // Beyond int64 (JSON's unsigned range) get_integer's value wraps negative: the message
    // quotes the number as the client wrote it.
    const Json& raw = *field(body, param);
    const bool huge = raw.is_number_unsigned() &&
                      raw.get<std::uint64_t>() > static_cast<std::uint64_t>(kMaxTokens);
    if (huge || *value < 1 || *value > kMaxTokens) {
        throw RequestError(
            fmt::format("'{}' must be from 1 to {}, got {}", param, kMaxTokens, raw.dump()), param,
            "invalid_value");
    }
    return static_cast<int>(*value);
}

// ---- messages ---------------------------------------------------------------------------------

// OpenAI function names: letters, digits, '_' and '-', up to 64. Harmony puts the name into a
// message header ("to=functions.NAME"), so anything else could break the header apart.
bool valid_function_name(std::string_view name) {
    if (name.empty() || name.size() > 64) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '_' || c == '-';
    });
}

void check_function_name(const std::string& name, const std::string& param) {
    if (!valid_function_name(name)) {
        throw RequestError(fmt::format("'{}' must be 1 to 64 letters, digits, '_' or '-'", param),
                           param, "invalid_value");
    }
}

// Message content: a string, or an array of text parts (joined with newlines, as vLLM does).
// nullopt for null / absent content.
std::optional<std::string> content_text(const Json& msg, const std::string& where) {
    const std::string param = where + ".content";
    const Json* c = field(msg, "content");
    if (!c) return std::nullopt;
    if (c->is_string()) return c->get<std::string>();
    if (!c->is_array()) wrong_type(param, "a string or an array of content parts", *c);
    std::string text;
    for (std::size_t i = 0; i < c->size(); ++i) {
        const Json& part = (*c)[i];
        const std::string pp = fmt::format("{}[{}]", param, i);
        if (!part.is_object()) wrong_type(pp, "an object", part);
        auto type = get_string(part, "type", pp + ".type");
        if (!type) missing(pp + ".type");
        if (*type != "text") {
            unsupported(pp + ".type",
                        fmt::format("content part type '{}' is not supported (text only)", *type));
        }
        auto t = get_string(part, "text", pp + ".text");
        if (!t) missing(pp + ".text");
        if (i > 0) text += "\n";
        text += *t;
    }
    return text;
}

std::string required_text(const Json& msg, const std::string& where) {
    auto text = content_text(msg, where);
    if (!text) {
        missing(where + ".content");
    }
    return *text;
}

struct HistoryBuilder {
    std::vector<std::string> instructions;  // leading system / developer messages
    std::vector<chat::Message> history;
    std::map<std::string, std::string> call_names;  // tool_call_id -> function name
    std::string last_call_name;

    void add(const Json& msg, std::size_t index) {
        const std::string where = fmt::format("messages[{}]", index);
        if (!msg.is_object()) wrong_type(where, "an object", msg);
        auto role = get_string(msg, "role", where + ".role");
        if (!role) missing(where + ".role");
        if (*role == "system" || *role == "developer") {
            check_keys(msg, {"role", "content", "name"}, where);
            std::string text = required_text(msg, where);
            if (history.empty()) {
                instructions.push_back(std::move(text));
            } else {
                // Mid-conversation instructions stay where they were given.
                chat::DeveloperContent dev;
                dev.instructions = std::move(text);
                history.push_back(chat::Message::developer(std::move(dev)));
            }
        } else if (*role == "user") {
            check_keys(msg, {"role", "content", "name"}, where);
            history.push_back(chat::Message::user(required_text(msg, where)));
        } else if (*role == "assistant") {
            add_assistant(msg, where);
        } else if (*role == "tool") {
            check_keys(msg, {"role", "content", "tool_call_id", "name"}, where);
            std::string text = required_text(msg, where);
            std::string name;
            if (auto id = get_string(msg, "tool_call_id", where + ".tool_call_id")) {
                if (auto it = call_names.find(*id); it != call_names.end()) name = it->second;
            }
            if (name.empty()) {
                if (auto n = get_string(msg, "name", where + ".name")) {
                    check_function_name(*n, where + ".name");
                    name = *n;
                }
            }
            if (name.empty()) name = last_call_name;  // as the HF template does
            if (name.empty()) {
                throw RequestError(
                    fmt::format("'{}' is a tool result but no assistant message before "
                                "it called a tool",
                                where),
                    where, "invalid_value");
            }
            history.push_back(chat::Message::tool_result("functions." + name, std::move(text)));
        } else {
            throw RequestError(fmt::format("'{}.role' is '{}'; expected system, developer, user, "
                                           "assistant or tool",
                                           where, *role),
                               where + ".role", "invalid_value");
        }
    }

    void add_assistant(const Json& msg, const std::string& where) {
        // refusal / annotations / audio / function_call appear when a client appends a response
        // message to its history as-is; they carry nothing harmony needs.
        check_keys(msg,
                   {"role", "content", "name", "tool_calls", "reasoning_content", "reasoning",
                    "thinking", "refusal", "annotations", "audio", "function_call"},
                   where);
        std::optional<std::string> reasoning;
        for (const char* key : {"reasoning_content", "reasoning", "thinking"}) {
            if (auto r = get_string(msg, key, where + "." + key); r && !reasoning) reasoning = r;
        }
        if (reasoning && !reasoning->empty())
            history.push_back(chat::Message::assistant("analysis", *reasoning));

        std::optional<std::string> text = content_text(msg, where);
        if ((!text || text->empty())) {
            if (auto refusal = get_string(msg, "refusal", where + ".refusal")) text = refusal;
        }
        std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
        if (const Json* tc = field(msg, "tool_calls")) {
            if (!tc->is_array()) wrong_type(where + ".tool_calls", "an array", *tc);
            for (std::size_t i = 0; i < tc->size(); ++i) {
                const Json& call = (*tc)[i];
                const std::string cp = fmt::format("{}.tool_calls[{}]", where, i);
                if (!call.is_object()) wrong_type(cp, "an object", call);
                check_keys(call, {"id", "type", "function", "index"}, cp);
                if (auto type = get_string(call, "type", cp + ".type");
                    type && *type != "function") {
                    unsupported(cp + ".type",
                                fmt::format("tool call type '{}' is not supported", *type));
                }
                const Json* fn = field(call, "function");
                if (!fn) missing(cp + ".function");
                if (!fn->is_object()) wrong_type(cp + ".function", "an object", *fn);
                auto name = get_string(*fn, "name", cp + ".function.name");
                if (!name) missing(cp + ".function.name");
                check_function_name(*name, cp + ".function.name");
                std::string args = "{}";
                if (const Json* a = field(*fn, "arguments")) {
                    // Arguments are a JSON string in the API; some clients send the object.
                    args = a->is_string() ? a->get<std::string>() : a->dump();
                }
                if (auto id = get_string(call, "id", cp + ".id")) call_names[*id] = *name;
                calls.emplace_back(*name, std::move(args));
            }
        }
        if (!calls.empty()) {
            // Text next to a tool call is a preamble: commentary without a recipient.
            if (text && !text->empty())
                history.push_back(chat::Message::assistant("commentary", *text));
            for (auto& [name, args] : calls) {
                history.push_back(chat::Message::function_call(name, std::move(args)));
                last_call_name = name;
            }
        } else if (text || !reasoning) {
            history.push_back(chat::Message::assistant("final", text.value_or("")));
        }
    }
};

// Function tools; `strict` receives the grammar of every tool with "strict": true.
std::vector<chat::ToolDescription> parse_tools(
    const Json& body, const ParseLimits& limits,
    std::map<std::string, std::shared_ptr<const chat::JsonSchemaGrammar>>& strict,
    bool strict_schemas, std::vector<std::string>& notices) {
    std::vector<chat::ToolDescription> tools;
    const Json* t = field(body, "tools");
    if (!t) return tools;
    if (!t->is_array()) wrong_type("tools", "an array", *t);
    if (t->size() > limits.max_tools) {
        throw RequestError(fmt::format("at most {} tools are supported", limits.max_tools), "tools",
                           "invalid_value");
    }
    std::set<std::string> names;
    for (std::size_t i = 0; i < t->size(); ++i) {
        const Json& tool = (*t)[i];
        const std::string tp = fmt::format("tools[{}]", i);
        if (!tool.is_object()) wrong_type(tp, "an object", tool);
        auto type = get_string(tool, "type", tp + ".type");
        if (!type) missing(tp + ".type");
        if (*type != "function") {
            // Hosted and custom tools: the model does not see them (docs/API.md).
            notices.push_back(fmt::format(
                "dropping tools of type '{}' from chat completions: function tools only", *type));
            continue;
        }
        check_keys(tool, {"type", "function"}, tp);
        const Json* fn = field(tool, "function");
        if (!fn) missing(tp + ".function");
        if (!fn->is_object()) wrong_type(tp + ".function", "an object", *fn);
        check_keys(*fn, {"name", "description", "parameters", "strict"}, tp + ".function");
        chat::ToolDescription d;
        auto name = get_string(*fn, "name", tp + ".function.name");
        if (!name) missing(tp + ".function.name");
        check_function_name(*name, tp + ".function.name");
        if (!names.insert(*name).second) {
            throw RequestError(fmt::format("tool '{}' is defined twice", *name),
                               tp + ".function.name", "invalid_value");
        }
        d.name = *name;
        d.description = get_string(*fn, "description", tp + ".function.description").value_or("");
        const bool is_strict = get_bool(*fn, "strict", tp + ".function.strict").value_or(false);
        if (const Json* p = field(*fn, "parameters")) {
            if (!p->is_object())
                wrong_type(tp + ".function.parameters", "an object (a JSON Schema)", *p);
            d.parameters = *p;
        }
        if (is_strict) {
            // Strict tools' arguments are sampled to match their schema.
            strict[d.name] =
                compile_request_schema(d.parameters.value_or(Json{{"type", "object"}}),
                                       tp + ".function.parameters", strict_schemas, notices);
        }
        tools.push_back(std::move(d));
    }
    return tools;
}

std::optional<chat::ResponseFormat> parse_response_format(const Json& body) {
    const Json* rf = field(body, "response_format");
    if (!rf) return std::nullopt;
    if (!rf->is_object()) wrong_type("response_format", "an object", *rf);
    auto type = get_string(*rf, "type", "response_format.type");
    if (!type) missing("response_format.type");
    if (*type == "text") {
        check_keys(*rf, {"type"}, "response_format");
        return std::nullopt;
    }
    if (*type == "json_object") {
        check_keys(*rf, {"type"}, "response_format");
        return chat::ResponseFormat{"json_object", "Respond with a JSON object.",
                                    Json{{"type", "object"}}};
    }
    if (*type == "json_schema") {
        check_keys(*rf, {"type", "json_schema"}, "response_format");
        const Json* js = field(*rf, "json_schema");
        if (!js) missing("response_format.json_schema");
        if (!js->is_object()) wrong_type("response_format.json_schema", "an object", *js);
        check_keys(*js, {"name", "description", "schema", "strict"}, "response_format.json_schema");
        auto name = get_string(*js, "name", "response_format.json_schema.name");
        if (!name) missing("response_format.json_schema.name");
        check_function_name(*name, "response_format.json_schema.name");
        get_bool(*js, "strict", "response_format.json_schema.strict");
        chat::ResponseFormat f;
        f.name = *name;
        f.description =
            get_string(*js, "description", "response_format.json_schema.description").value_or("");
        const Json* schema = field(*js, "schema");
        if (schema && !schema->is_object())
            wrong_type("response_format.json_schema.schema", "an object", *schema);
        f.schema = schema ? *schema : Json{{"type", "object"}};
        return f;
    }
    throw RequestError(
        fmt::format("'response_format.type' must be text, json_object or json_schema, got '{}'",
                    *type),
        "response_format.type", "invalid_value");
}

void parse_tool_choice(const Json& body, ChatRequest& r,
                       const std::vector<chat::ToolDescription>& tools) {
    const Json* tc = field(body, "tool_choice");
    if (!tc) return;
    if (tc->is_string()) {
        const std::string s = tc->get<std::string>();
        if (s == "auto") {
            r.tool_choice = ToolChoice::automatic;
        } else if (s == "none") {
            r.tool_choice = ToolChoice::none;
        } else if (s == "required") {
            r.tool_choice = ToolChoice::required;
        } else {
            throw RequestError(
                fmt::format("'tool_choice' must be none, auto, required or a function, got '{}'",
                            s),
                "tool_choice", "invalid_value");
        }
    } else if (tc->is_object()) {
        check_keys(*tc, {"type", "function"}, "tool_choice");
        auto type = get_string(*tc, "type", "tool_choice.type");
        if (type != "function") {
            unsupported("tool_choice.type", "'tool_choice.type' must be function");
        }
        const Json* fn = field(*tc, "function");
        if (!fn || !fn->is_object()) {
            throw RequestError("'tool_choice.function' must be an object with a name",
                               "tool_choice.function", "invalid_value");
        }
        check_keys(*fn, {"name"}, "tool_choice.function");
        auto name = get_string(*fn, "name", "tool_choice.function.name");
        if (!name) missing("tool_choice.function.name");
        r.tool_choice = ToolChoice::named;
        r.tool_choice_name = *name;
    } else {
        wrong_type("tool_choice", "a string or an object", *tc);
    }
    if ((r.tool_choice == ToolChoice::required || r.tool_choice == ToolChoice::named) &&
        tools.empty()) {
        throw RequestError("'tool_choice' requires 'tools'", "tool_choice", "invalid_value");
    }
    if (r.tool_choice == ToolChoice::named &&
        std::none_of(tools.begin(), tools.end(),
                     [&](const auto& t) { return t.name == r.tool_choice_name; })) {
        throw RequestError(
            fmt::format("'tool_choice' names '{}', which is not in 'tools'", r.tool_choice_name),
            "tool_choice.function.name", "invalid_value");
    }
    if (r.tool_choice == ToolChoice::required && tools.size() == 1) {
        r.tool_choice = ToolChoice::named;  // only one way to satisfy it
        r.tool_choice_name = tools.front().name;
    }
}

std::string json_text(const Json& j) {
    return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

// ---- body ---------------------------------------------------------------------------------

void check_json_depth(std::string_view text, int max_depth) {
    int depth = 0;
    bool in_string = false;
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') {
                ++i;
            } else if (c == '"') {
                in_string = false;
            }
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth) {
                throw RequestError(
                    fmt::format("the request body nests deeper than {} levels", max_depth), {},
                    "invalid_json");
            }
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
}

Json parse_body(std::string_view text, const ParseLimits& limits) {
    check_json_depth(text, limits.max_json_depth);
    Json body;
    try {
        body = Json::parse(text.begin(), text.end());
    } catch (const nlohmann::json::parse_error& e) {
        // e.what() quotes at most a few bytes of input, but the body may not be UTF-8: keep the
        // message ASCII-safe by dropping the "last read" excerpt when it has non-ASCII bytes.
        std::string what = e.what();
        if (std::any_of(what.begin(), what.end(),
                        [](char c) { return static_cast<unsigned char>(c) >= 0x80; })) {
            what = fmt::format("syntax error at byte {}", e.byte);
        }
        throw RequestError(fmt::format("the request body is not valid JSON: {}", what), {},
                           "invalid_json");
    } catch (const nlohmann::json::exception&) {
        // out_of_range 406: a number beyond double's range ("1e999"); uncaught, it would escape
        // every handler and terminate neural-server.
        throw RequestError("the request body is not valid JSON: a number is out of range", {},
                           "invalid_json");
    }
    if (!body.is_object())
        throw RequestError("the request body must be a JSON object", {}, "invalid_json");
    return body;
}

// ---- chat ---------------------------------------------------------------------------------

std::optional<chat::ReasoningEffort> reasoning_effort_of(std::string_view name) {
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    // gpt-oss knows three efforts; OpenAI's finer names map to the nearest.
    if (lower == "none" || lower == "minimal" || lower == "low") return chat::ReasoningEffort::low;
    if (lower == "medium") return chat::ReasoningEffort::medium;
    if (lower == "high" || lower == "xhigh") return chat::ReasoningEffort::high;
    return std::nullopt;
}

std::shared_ptr<const chat::JsonSchemaGrammar> compile_request_schema(
    const Json& schema, const std::string& param, bool strict, std::vector<std::string>& notices) {
    try {
        if (strict) return chat::JsonSchemaGrammar::compile(schema);
        std::vector<std::string> ignored;
        auto grammar = chat::JsonSchemaGrammar::compile(schema, &ignored);
        for (const std::string& what : ignored) {
            notices.push_back(
                fmt::format("'{}': not enforced while sampling: {} (--strict "
                            "refuses such schemas)",
                            param, what));
        }
        return grammar;
    } catch (const chat::SchemaError& e) {
        throw RequestError(fmt::format("'{}': {}", param, e.what()), param, "invalid_schema");
    }
}

bool ChatRequest::has_developer_message() const {
    return developer.instructions || !developer.tools.empty() || developer.response_format;
}

chat::Conversation ChatRequest::conversation() const {
    chat::Conversation c;
    c.messages.push_back(chat::Message::system(system));
    if (has_developer_message()) c.messages.push_back(chat::Message::developer(developer));
    c.messages.insert(c.messages.end(), history.begin(), history.end());
    return c;
}

// The legacy function-calling fields (functions, function_call, assistant function_call,
// role "function") rewritten as tools; null when the body has none of them.
static std::optional<Json> legacy_functions_as_tools(const Json& body) {
    const bool has_functions = field(body, "functions") != nullptr;
    const bool has_choice = field(body, "function_call") != nullptr;
    bool has_messages = false;
    if (const Json* m = field(body, "messages"); m && m->is_array()) {
        for (const Json& msg : *m) {
            if (!msg.is_object()) continue;
            if (msg.value("role", Json()) == "function" ||
                (msg.value("role", Json()) == "assistant" && field(msg, "function_call") &&
                 !field(msg, "tool_calls")))
                has_messages = true;
        }
    }
    if (!has_functions && !has_choice && !has_messages) return std::nullopt;
    Json out = body;
    if (has_functions) {
        if (field(body, "tools"))
            unsupported("functions", "give either 'tools' or the legacy 'functions', not both");
        const Json& f = body["functions"];
        if (!f.is_array()) wrong_type("functions", "an array", f);
        Json tools = Json::array();
        for (const Json& fn : f) tools.push_back(Json{{"type", "function"}, {"function", fn}});
        out["tools"] = std::move(tools);
        out.erase("functions");
    }
    if (has_choice) {
        if (field(body, "tool_choice"))
            unsupported("function_call",
                        "give either 'tool_choice' or the legacy 'function_call', not both");
        const Json& c = body["function_call"];
        out["tool_choice"] = c.is_object() ? Json{{"type", "function"}, {"function", c}} : c;
        out.erase("function_call");
    }
    if (has_messages) {
        std::size_t calls = 0;
        std::string last_id;
        for (Json& msg : out["messages"]) {
            if (!msg.is_object()) continue;
            if (msg.value("role", Json()) == "assistant" && field(msg, "function_call") &&
                !field(msg, "tool_calls")) {
                last_id = fmt::format("call_legacy_{}", calls++);
                msg["tool_calls"] = Json::array({Json{
                    {"id", last_id}, {"type", "function"}, {"function", msg["function_call"]}}});
                msg.erase("function_call");
            } else if (msg.value("role", Json()) == "function") {
                msg["role"] = "tool";
                if (!last_id.empty() && !msg.contains("tool_call_id"))
                    msg["tool_call_id"] = last_id;
            }
        }
    }
    return out;
}

ChatRequest parse_chat_request(const Json& body, const ChatRequestOptions& options) {
    if (!body.is_object())
        throw RequestError("the request body must be a JSON object", {}, "invalid_json");
    if (auto rewritten = legacy_functions_as_tools(body))
        return parse_chat_request(*rewritten, options);
    std::set<std::string_view> allowed = {"model",
                                          "messages",
                                          "tools",
                                          "tool_choice",
                                          "parallel_tool_calls",
                                          "response_format",
                                          "reasoning_effort",
                                          "chat_template_kwargs",
                                          "max_tokens",
                                          "max_completion_tokens",
                                          "temperature",
                                          "top_p",
                                          "top_k",
                                          "min_p",
                                          "seed",
                                          "stop",
                                          "stream",
                                          "stream_options",
                                          "n",
                                          "user",
                                          "frequency_penalty",
                                          "presence_penalty",
                                          "repetition_penalty",
                                          "logprobs",
                                          "top_logprobs",
                                          "logit_bias",
                                          "metadata",
                                          "store",
                                          "service_tier"};
    if (options.allow_test_options) allowed.insert("neural_forced_output");
    ChatRequest r;
    LenientScope lenient(options.strict, r.ignored_fields);
    check_keys(body, allowed, "");

    auto model = get_string(body, "model", "model");
    if (!model || model->empty()) missing("model");
    r.model = *model;

    const Json* messages = field(body, "messages");
    if (!messages) missing("messages");
    if (!messages->is_array()) wrong_type("messages", "an array", *messages);
    if (messages->empty())
        throw RequestError("'messages' must not be empty", "messages", "invalid_value");
    if (messages->size() > options.limits.max_messages) {
        throw RequestError(
            fmt::format("at most {} messages are supported", options.limits.max_messages),
            "messages", "invalid_value");
    }
    HistoryBuilder hb;
    for (std::size_t i = 0; i < messages->size(); ++i) hb.add((*messages)[i], i);
    r.history = std::move(hb.history);

    parse_sampling(body, r.sampling, r.seed_given);
    r.max_tokens = parse_max_tokens(body);
    r.stop = parse_stop(body, options.limits);
    parse_stream(body, r.stream, r.include_usage);
    const auto lp = get_bool(body, "logprobs", "logprobs");
    if (auto tl = get_integer(body, "top_logprobs", "top_logprobs")) {
        if (*tl < 0 || *tl > kMaxTopLogprobs) {
            throw RequestError(fmt::format("'top_logprobs' must be between 0 and {}, got {}",
                                           kMaxTopLogprobs, *tl),
                               "top_logprobs", "invalid_value");
        }
        if (!(lp && *lp)) {
            throw RequestError("'top_logprobs' needs 'logprobs': true", "top_logprobs",
                               "invalid_value");
        }
        r.logprobs = static_cast<int>(*tl);
    } else if (lp && *lp) {
        r.logprobs = 0;
    }
    get_bool(body, "parallel_tool_calls", "parallel_tool_calls");  // harmony makes one call a turn
    get_bool(body, "store", "store");                              // nothing is ever stored
    get_string(body, "user", "user");
    get_string(body, "service_tier", "service_tier");
    if (const Json* md = field(body, "metadata"); md && !md->is_object())
        wrong_type("metadata", "an object", *md);

    r.system.conversation_start_date = options.current_date;
    // llama.cpp's servers take the effort as a template variable, chat_template_kwargs
    // {"reasoning_effort": ...}; clients set up for them send it there. It counts like the
    // top-level field; both given must agree.
    auto effort_field = [&](const Json& obj, const std::string& param) {
        std::optional<chat::ReasoningEffort> e;
        if (auto effort = get_string(obj, "reasoning_effort", param)) {
            e = reasoning_effort_of(*effort);
            if (!e) {
                throw RequestError(fmt::format("'{}' must be none, minimal, low, medium, high "
                                               "or xhigh, got '{}'",
                                               param, *effort),
                                   param, "invalid_value");
            }
        }
        return e;
    };
    const auto effort = effort_field(body, "reasoning_effort");
    std::optional<chat::ReasoningEffort> kwarg_effort;
    if (const Json* kw = field(body, "chat_template_kwargs")) {
        if (!kw->is_object()) wrong_type("chat_template_kwargs", "an object", *kw);
        check_keys(*kw, {"reasoning_effort"}, "chat_template_kwargs");
        kwarg_effort = effort_field(*kw, "chat_template_kwargs.reasoning_effort");
    }
    if (effort && kwarg_effort && *effort != *kwarg_effort) {
        throw RequestError(
            "'reasoning_effort' and 'chat_template_kwargs.reasoning_effort' disagree",
            "chat_template_kwargs.reasoning_effort", "invalid_value");
    }
    if (effort || kwarg_effort) r.system.reasoning_effort = effort ? *effort : *kwarg_effort;

    const bool strict_schemas = options.strict_schemas.value_or(options.strict);
    std::map<std::string, std::shared_ptr<const chat::JsonSchemaGrammar>> strict_tools;
    std::vector<chat::ToolDescription> tools =
        parse_tools(body, options.limits, strict_tools, strict_schemas, r.notices);
    parse_tool_choice(body, r, tools);
    if (!hb.instructions.empty()) {
        std::string text;
        for (std::size_t i = 0; i < hb.instructions.size(); ++i)
            text += (i ? "\n\n" : "") + hb.instructions[i];
        r.developer.instructions = std::move(text);
    }
    if (r.tool_choice == ToolChoice::required) {
        // Best effort: there is no grammar to force "some" call, so say it.
        r.developer.instructions = r.developer.instructions.value_or("") +
                                   (r.developer.instructions ? "\n\n" : "") +
                                   "Call one of the provided tools before answering.";
    }
    std::vector<std::string> callable;  // the recipients a constrained reply may address
    if (r.tool_choice != ToolChoice::none) {
        for (const chat::ToolDescription& t : tools) callable.push_back(t.name);
    }
    // tool_choice none: the model does not see the tools, so it cannot call them.
    if (!tools.empty() && r.tool_choice != ToolChoice::none) {
        r.developer.tools.push_back(chat::ToolNamespace::functions(std::move(tools)));
    }
    r.developer.response_format = parse_response_format(body);
    auto constraint = std::make_shared<OutputConstraint>();
    if (r.developer.response_format) {
        constraint->final_answer =
            body["response_format"]["type"] == "json_object"
                ? chat::JsonSchemaGrammar::any_object()
                : compile_request_schema(r.developer.response_format->schema,
                                         "response_format.json_schema.schema", strict_schemas,
                                         r.notices);
    }
    if (r.tool_choice != ToolChoice::none) constraint->function_arguments = std::move(strict_tools);
    constraint->functions = std::move(callable);
    if (!constraint->empty()) r.constraint = std::move(constraint);
    if (r.tool_choice == ToolChoice::named) {
        // The sampler writes the call header; the model writes the arguments.
        r.forced_output = "<|channel|>commentary to=functions." + r.tool_choice_name +
                          " <|constrain|>json<|message|>";
    }
    if (options.allow_test_options) {
        if (auto forced = get_string(body, "neural_forced_output", "neural_forced_output"))
            r.forced_output = forced;
    }
    return r;
}

// ---- completions ----------------------------------------------------------------------------

CompletionRequest parse_completion_request(const Json& body, const ParseLimits& limits,
                                           bool strict) {
    if (!body.is_object())
        throw RequestError("the request body must be a JSON object", {}, "invalid_json");
    CompletionRequest r;
    LenientScope lenient(strict, r.ignored_fields);
    check_keys(body,
               {"model",
                "prompt",
                "max_tokens",
                "temperature",
                "top_p",
                "top_k",
                "min_p",
                "seed",
                "stop",
                "stream",
                "stream_options",
                "n",
                "best_of",
                "echo",
                "logprobs",
                "suffix",
                "user",
                "frequency_penalty",
                "presence_penalty",
                "repetition_penalty",
                "logit_bias"},
               "");
    auto model = get_string(body, "model", "model");
    if (!model || model->empty()) missing("model");
    r.model = *model;
    const Json* p = field(body, "prompt");
    if (!p) missing("prompt");
    auto token_list = [](const Json& a, const std::string& param) {
        std::vector<TokenId> ids;
        for (std::size_t i = 0; i < a.size(); ++i) {
            if (!a[i].is_number_integer())
                wrong_type(fmt::format("{}[{}]", param, i), "a token id", a[i]);
            const auto v = a[i].get<std::int64_t>();
            if (v < 0 || v > INT32_MAX) {
                throw RequestError(fmt::format("'{}[{}]' is not a token id", param, i), param,
                                   "invalid_value");
            }
            ids.push_back(static_cast<TokenId>(v));
        }
        return ids;
    };
    if (p->is_string()) {
        r.prompt = p->get<std::string>();
    } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
        r.prompt = (*p)[0].get<std::string>();
    } else if (p->is_array() && p->size() == 1 && (*p)[0].is_array()) {
        r.prompt = token_list((*p)[0], "prompt[0]");
    } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
        r.prompt = token_list(*p, "prompt");
    } else if (p->is_array() && p->size() > 1) {
        unsupported("prompt", "one prompt per request is supported ('prompt' has several)");
    } else {
        wrong_type("prompt", "a string or an array of token ids", *p);
    }
    if (const auto* s = std::get_if<std::string>(&r.prompt); s && s->empty()) {
        throw RequestError("'prompt' must not be empty", "prompt", "invalid_value");
    }
    if (const auto* ids = std::get_if<std::vector<TokenId>>(&r.prompt); ids && ids->empty()) {
        throw RequestError("'prompt' must not be empty", "prompt", "invalid_value");
    }
    parse_sampling(body, r.sampling, r.seed_given);
    if (auto m = parse_max_tokens(body)) r.max_tokens = *m;
    r.stop = parse_stop(body, limits);
    parse_stream(body, r.stream, r.include_usage);
    if (auto b = get_integer(body, "best_of", "best_of"); b && *b != 1)
        unsupported("best_of", "'best_of' must be 1");
    if (auto e = get_bool(body, "echo", "echo"); e && *e)
        unsupported("echo", "'echo' is not supported");
    if (auto l = get_integer(body, "logprobs", "logprobs")) {
        if (*l < 0 || *l > kMaxCompletionLogprobs) {
            throw RequestError(fmt::format("'logprobs' must be between 0 and {}, got {}",
                                           kMaxCompletionLogprobs, *l),
                               "logprobs", "invalid_value");
        }
        r.logprobs = static_cast<int>(*l);
    }
    if (auto s = get_string(body, "suffix", "suffix"); s && !s->empty())
        unsupported("suffix", "'suffix' is not supported");
    get_string(body, "user", "user");
    return r;
}

// ---- responses ------------------------------------------------------------------------------

Json usage_json(const Usage& u) {
    return Json{{"prompt_tokens", u.prompt_tokens},
                {"completion_tokens", u.completion_tokens},
                {"total_tokens", u.prompt_tokens + u.completion_tokens},
                {"prompt_tokens_details", Json{{"cached_tokens", u.cached_tokens}}},
                {"completion_tokens_details", Json{{"reasoning_tokens", u.reasoning_tokens}}}};
}

std::string tool_call_id(std::string_view request_id, std::size_t index) {
    // FNV-1a of the request id: ids are unique per request and stable for its calls.
    std::uint64_t h = 1469598103934665603ull;
    for (char c : request_id) {
        h ^= static_cast<unsigned char>(c);
        h *= 1099511628211ull;
    }
    return fmt::format("call_{:016x}{:02d}", h, index);
}

Json timings_json(const Timings& t) {
    // Rates of an empty interval are null (llama.cpp would write inf or nan, not JSON).
    auto ratio = [](double num, double den) { return den > 0 ? Json(num / den) : Json(nullptr); };
    return Json{{"prompt_n", t.prompt_n},
                {"prompt_ms", t.prompt_ms},
                {"prompt_per_token_ms", ratio(t.prompt_ms, double(t.prompt_n))},
                {"prompt_per_second", ratio(1e3 * double(t.prompt_n), t.prompt_ms)},
                {"predicted_n", t.predicted_n},
                {"predicted_ms", t.predicted_ms},
                {"predicted_per_token_ms", ratio(t.predicted_ms, double(t.predicted_n))},
                {"predicted_per_second", ratio(1e3 * double(t.predicted_n), t.predicted_ms)}};
}

Json chat_completion(const std::string& id, std::int64_t created, const std::string& model,
                     const ChatResult& r) {
    Json message{{"role", "assistant"}};
    message["content"] =
        r.content.empty() && !r.tool_calls.empty() ? Json(nullptr) : Json(r.content);
    if (!r.reasoning.empty()) {
        message["reasoning_content"] = r.reasoning;
        message["reasoning"] = r.reasoning;
    }
    if (!r.tool_calls.empty()) {
        Json calls = Json::array();
        for (std::size_t i = 0; i < r.tool_calls.size(); ++i) {
            calls.push_back(Json{{"id", tool_call_id(id, i)},
                                 {"type", "function"},
                                 {"function", Json{{"name", r.tool_calls[i].name},
                                                   {"arguments", r.tool_calls[i].arguments}}}});
        }
        message["tool_calls"] = std::move(calls);
    }
    Json choice{{"index", 0},
                {"message", std::move(message)},
                {"logprobs",
                 r.logprobs ? Json{{"content", logprobs_json(*r.logprobs)}, {"refusal", nullptr}}
                            : Json(nullptr)},
                {"finish_reason", std::string(chat::finish_reason_name(r.finish))}};
    Json out{{"id", id},
             {"object", "chat.completion"},
             {"created", created},
             {"model", model},
             {"choices", Json::array({std::move(choice)})},
             {"usage", usage_json(r.usage)}};
    if (r.timings) out["timings"] = timings_json(*r.timings);
    return out;
}

namespace {

bool whole_utf8(std::string_view s) {
    std::size_t i = 0;
    while (i < s.size()) {
        const auto b = static_cast<unsigned char>(s[i]);
        std::size_t n = 0;
        if (b < 0x80)
            n = 0;
        else if (b >= 0xC2 && b <= 0xDF)
            n = 1;
        else if (b >= 0xE0 && b <= 0xEF)
            n = 2;
        else if (b >= 0xF0 && b <= 0xF4)
            n = 3;
        else
            return false;
        if (i + n >= s.size()) return false;  // the sequence is cut
        for (std::size_t k = 1; k <= n; ++k) {
            const auto c = static_cast<unsigned char>(s[i + k]);
            if (c < 0x80 || c > 0xBF) return false;
        }
        if (n == 2 && ((b == 0xE0 && static_cast<unsigned char>(s[i + 1]) < 0xA0) ||
                       (b == 0xED && static_cast<unsigned char>(s[i + 1]) > 0x9F)))
            return false;
        if (n == 3 && ((b == 0xF0 && static_cast<unsigned char>(s[i + 1]) < 0x90) ||
                       (b == 0xF4 && static_cast<unsigned char>(s[i + 1]) > 0x8F)))
            return false;
        i += n + 1;
    }
    return true;
}

Json token_json(const std::string& bytes, double logprob) {
    std::string token;
    if (whole_utf8(bytes)) {
        token = bytes;
    } else {
        token = "bytes:";
        for (unsigned char b : bytes) token += fmt::format("\\x{:02x}", b);
    }
    Json raw = Json::array();
    for (unsigned char b : bytes) raw.push_back(static_cast<int>(b));
    // JSON has no -infinity: an impossible token is written with the lowest double.
    const double lp = std::isfinite(logprob) ? logprob : std::numeric_limits<double>::lowest();
    return Json{{"token", token}, {"logprob", lp}, {"bytes", std::move(raw)}};
}

}  // namespace

Json logprobs_json(const std::vector<chat::TokenLogprob>& tokens) {
    Json out = Json::array();
    for (const chat::TokenLogprob& t : tokens) {
        Json entry = token_json(t.bytes, t.logprob);
        Json top = Json::array();
        for (const auto& a : t.top) top.push_back(token_json(a.bytes, a.logprob));
        entry["top_logprobs"] = std::move(top);
        out.push_back(std::move(entry));
    }
    return out;
}

Json completion_logprobs_json(const std::vector<chat::TokenLogprob>& tokens,
                              const std::vector<std::int64_t>& text_offsets) {
    // The tokens as the chat route writes them (token_json: text, or "bytes:\\x.." for a token
    // that is part of a UTF-8 sequence).
    Json names = Json::array(), lps = Json::array(), tops = Json::array(), offsets = Json::array();
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        const chat::TokenLogprob& t = tokens[i];
        const Json chosen = token_json(t.bytes, t.logprob);
        names.push_back(chosen["token"]);
        lps.push_back(chosen["logprob"]);
        Json top = Json::object();
        for (const auto& a : t.top) {
            const Json alt = token_json(a.bytes, a.logprob);
            const std::string key = alt["token"].get<std::string>();
            if (!top.contains(key)) top[key] = alt["logprob"];
        }
        if (!top.contains(chosen["token"].get<std::string>()))
            top[chosen["token"].get<std::string>()] = chosen["logprob"];
        tops.push_back(std::move(top));
        offsets.push_back(i < text_offsets.size() ? text_offsets[i] : 0);
    }
    return Json{{"tokens", std::move(names)},
                {"token_logprobs", std::move(lps)},
                {"top_logprobs", std::move(tops)},
                {"text_offset", std::move(offsets)}};
}

ChatChunkEncoder::ChatChunkEncoder(std::string id, std::int64_t created, std::string model,
                                   bool include_usage)
    : id_(std::move(id)),
      created_(created),
      model_(std::move(model)),
      include_usage_(include_usage) {}

Json ChatChunkEncoder::chunk(Json delta, const Json& finish_reason) const {
    Json choice{{"index", 0},
                {"delta", std::move(delta)},
                {"logprobs", nullptr},
                {"finish_reason", finish_reason}};
    Json c{{"id", id_},
           {"object", "chat.completion.chunk"},
           {"created", created_},
           {"model", model_},
           {"choices", Json::array({std::move(choice)})}};
    if (include_usage_) c["usage"] = nullptr;
    return c;
}

Json ChatChunkEncoder::role_chunk() const {
    return chunk(Json{{"role", "assistant"}, {"content", ""}}, nullptr);
}

std::optional<Json> ChatChunkEncoder::event_chunk(const chat::ParserEvent& e) {
    auto reasoning = [&](const std::string& text) {
        return chunk(Json{{"reasoning_content", text}, {"reasoning", text}}, nullptr);
    };
    switch (e.type) {
        case chat::EventType::reasoning:
            if (e.text.empty()) return std::nullopt;
            return reasoning(e.text);
        case chat::EventType::content:
        case chat::EventType::preamble: {
            if (e.text.empty()) return std::nullopt;
            Json c = chunk(Json{{"content", e.text}}, nullptr);
            if (!e.logprobs.empty()) {
                c["choices"][0]["logprobs"] =
                    Json{{"content", logprobs_json(e.logprobs)}, {"refusal", nullptr}};
            }
            return c;
        }
        case chat::EventType::tool_call_start:
            in_function_call_ = !e.function_name.empty();
            in_builtin_call_ = !in_function_call_;
            if (!in_function_call_) return std::nullopt;
            ++tool_calls_;
            return chunk(
                Json{{"tool_calls", Json::array({Json{{"index", tool_calls_ - 1},
                                                      {"id", tool_call_id(id_, tool_calls_ - 1)},
                                                      {"type", "function"},
                                                      {"function", Json{{"name", e.function_name},
                                                                        {"arguments", ""}}}}})}},
                nullptr);
        case chat::EventType::tool_call_arguments:
            if (e.text.empty()) return std::nullopt;
            if (in_function_call_) {
                return chunk(Json{{"tool_calls",
                                   Json::array({Json{{"index", tool_calls_ - 1},
                                                     {"function", Json{{"arguments", e.text}}}}})}},
                             nullptr);
            }
            return reasoning(e.text);
        case chat::EventType::message_start:
        case chat::EventType::message_end:
            in_function_call_ = false;
            in_builtin_call_ = false;
            return std::nullopt;
        case chat::EventType::finish:
            return std::nullopt;
    }
    return std::nullopt;
}

Json ChatChunkEncoder::finish_chunk(chat::FinishReason reason) const {
    return chunk(Json::object(), std::string(chat::finish_reason_name(reason)));
}

Json ChatChunkEncoder::usage_chunk(const Usage& usage) const {
    return Json{
        {"id", id_},       {"object", "chat.completion.chunk"}, {"created", created_},
        {"model", model_}, {"choices", Json::array()},          {"usage", usage_json(usage)}};
}

Json text_completion(const std::string& id, std::int64_t created, const std::string& model,
                     const std::string& text, std::string_view finish_reason, const Usage& usage,
                     Json logprobs) {
    Json choice{{"text", text},
                {"index", 0},
                {"logprobs", std::move(logprobs)},
                {"finish_reason", std::string(finish_reason)}};
    return Json{{"id", id},
                {"object", "text_completion"},
                {"created", created},
                {"model", model},
                {"choices", Json::array({std::move(choice)})},
                {"usage", usage_json(usage)}};
}

Json text_completion_chunk(const std::string& id, std::int64_t created, const std::string& model,
                           const std::string& text, const Json& finish_reason, bool include_usage,
                           Json logprobs) {
    Json choice{{"text", text},
                {"index", 0},
                {"logprobs", std::move(logprobs)},
                {"finish_reason", finish_reason}};
    Json c{{"id", id},
           {"object", "text_completion"},
           {"created", created},
           {"model", model},
           {"choices", Json::array({std::move(choice)})}};
    if (include_usage) c["usage"] = nullptr;
    return c;
}

Json error_body(std::string_view message, std::string_view type, std::string_view param,
                std::string_view code) {
    // Messages may quote request text; make sure they serialize even if it was not UTF-8.
    Json probe = std::string(message);
    const std::string safe = Json::parse(json_text(probe)).get<std::string>();
    Json err{{"message", safe}, {"type", std::string(type)}};
    err["param"] = param.empty() ? Json(nullptr) : Json(std::string(param));
    err["code"] = code.empty() ? Json(nullptr) : Json(std::string(code));
    return Json{{"error", std::move(err)}};
}

}  // namespace neural::openai
