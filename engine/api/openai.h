// OpenAI Chat Completions and Completions on top of harmony (docs/CHAT_FORMAT.md "The OpenAI API
// on top of harmony"): requests are validated and mapped to harmony system / developer content,
// history and generation options; results and streaming events are mapped back to OpenAI JSON.
// No Qt and no I/O, so the server and the benchmark share it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/message.h"
#include "chat/parser.h"
#include "neural/error.h"
#include "runtime/constraint.h"
#include "runtime/sampler.h"
#include "tokenizer/tokenizer.h"

namespace neural::openai {

using Json = nlohmann::ordered_json;

// A request the API refuses with HTTP 400: the message says what is wrong, `param` names the
// offending field ("messages[2].content"), `code` is OpenAI's machine-readable code, if any.
class RequestError : public Error {
public:
    explicit RequestError(const std::string& message, std::string param = {}, std::string code = {})
        : Error(message), param_(std::move(param)), code_(std::move(code)) {}
    const std::string& param() const { return param_; }
    const std::string& code() const { return code_; }

private:
    std::string param_;
    std::string code_;
};

// Limits on what a request body may contain (the server adds its byte limit in front).
struct ParseLimits {
    int max_json_depth = 64;
    std::size_t max_messages = 4096;
    std::size_t max_tools = 256;
    std::size_t max_stop_sequences = 4;
    std::size_t max_stop_length = 256;  // bytes
};

// Parses a request body: nesting depth is checked before parsing (without recursion, so a
// hostile body cannot exhaust the stack), then JSON syntax and UTF-8; the result must be an
// object. Throws RequestError.
Json parse_body(std::string_view text, const ParseLimits& limits = {});

// Throws RequestError when arrays / objects in `text` nest deeper than `max_depth` (strings are
// skipped correctly, so brackets inside them do not count).
void check_json_depth(std::string_view text, int max_depth);

enum class ToolChoice { automatic, none, required, named };

struct ChatRequestOptions {
    std::optional<std::string> current_date;  // "YYYY-MM-DD" for the system message
    // Accept the test-only field "neural_forced_output" (a harmony string that the sampler emits
    // instead of sampling). Off in production: an unknown field is a 400 like any other.
    bool allow_test_options = false;
    // Strict: an unknown field is a 400. Lenient (the default): unknown fields are ignored and
    // named in the request's ignored_fields (the server logs each name once).
    bool strict = false;
    // Schema keywords the grammar cannot enforce: refused (true) or left out of the constraint
    // and named in the request's notices (false). Unset: as `strict`.
    std::optional<bool> strict_schemas;
    ParseLimits limits;
};

struct ChatRequest {
    std::string model;
    chat::SystemContent system;
    chat::DeveloperContent developer;
    // Everything after the system / developer messages: user, assistant (analysis, preambles,
    // answers, tool calls), tool results, and developer messages that came mid-conversation.
    std::vector<chat::Message> history;

    std::optional<int> max_tokens;  // max_completion_tokens or max_tokens
    SamplingParams sampling;        // OpenAI's defaults: temperature 1, top_p 1
    std::vector<std::string> stop;
    bool stream = false;
    bool include_usage = false;  // stream_options.include_usage
    // logprobs: -1 off; else the number of top_logprobs (0-20) per content token (Responses:
    // include "message.output_text.logprobs").
    int logprobs = -1;
    ToolChoice tool_choice = ToolChoice::automatic;
    std::string tool_choice_name;  // the function of a named choice (or the only tool, required)
    // Harmony text (special tokens spelled out) the sampler must emit first: the call header of a
    // named tool choice, or the whole output when a test forces it. Encode it with
    // Tokenizer::encode(text, true) into TurnOptions::forced_tokens.
    std::optional<std::string> forced_output;
    // The reply's beginning when a cut reply is continued (not an API field: the desktop app's
    // Continue). chat::render_reply_start renders it into TurnOptions::prefill_tokens.
    struct ReplyStart {
        std::string reasoning;
        std::string content;
    };
    std::optional<ReplyStart> reply_start;
    // Structured output: response_format json_object / json_schema and strict function tools,
    // compiled to grammars the sampler enforces (null: nothing is constrained).
    std::shared_ptr<const OutputConstraint> constraint;
    bool seed_given = false;  // "seed" was in the request (the server picks one otherwise)
    // Unknown fields a lenient parse skipped, as paths with indices dropped ("messages[].foo").
    std::vector<std::string> ignored_fields;
    // What the server accepts but does not do, one line each for its log (logged once per
    // distinct line): schema keywords left out of a constraint, dropped hosted tools, ...
    std::vector<std::string> notices;

    // system, developer (when it has anything to say) and history, ready to render.
    chat::Conversation conversation() const;
    bool has_developer_message() const;
};

// Validates and maps a /v1/chat/completions body. Unsupported values (n > 1, non-text content
// parts, ...) are refused; unknown fields and schema keywords the grammar cannot enforce are
// refused only with options.strict. The legacy `functions` / `function_call` fields and
// `function` messages are read as tools, tool_choice and tool messages.
ChatRequest parse_chat_request(const Json& body, const ChatRequestOptions& options = {});

// gpt-oss's reasoning effort for an OpenAI effort name: none and minimal are low, xhigh is high
// (case-insensitive); nullopt for any other name.
std::optional<chat::ReasoningEffort> reasoning_effort_of(std::string_view name);

// Compiles a request's JSON schema: SchemaError becomes a 400 naming `param`; keywords the
// grammar cannot enforce are refused when `strict`, else added to `notices`.
std::shared_ptr<const chat::JsonSchemaGrammar> compile_request_schema(
    const Json& schema, const std::string& param, bool strict, std::vector<std::string>& notices);

struct CompletionRequest {
    std::string model;
    // Raw prompt: text (special tokens in it are honoured, it is a raw harmony prompt) or ids.
    std::variant<std::string, std::vector<TokenId>> prompt;
    int max_tokens = 16;  // OpenAI's default for completions
    SamplingParams sampling;
    std::vector<std::string> stop;
    bool stream = false;
    bool include_usage = false;
    bool seed_given = false;
    // The legacy logprobs (-1: off; 0-5: alternatives per token besides the chosen one).
    int logprobs = -1;
    std::vector<std::string> ignored_fields;
};

// Validates and maps a /v1/completions body (strict: unknown fields are a 400; lenient: they
// are skipped and named in ignored_fields).
CompletionRequest parse_completion_request(const Json& body, const ParseLimits& limits = {},
                                           bool strict = false);

// ---- responses ------------------------------------------------------------------------------

struct Usage {
    std::int64_t prompt_tokens = 0;
    std::int64_t completion_tokens = 0;
    std::int64_t cached_tokens = 0;     // of the prompt tokens, reused from the KV cache
    std::int64_t reasoning_tokens = 0;  // of the completion tokens, the analysis channel's
};

// The server's own timing of one answer, in llama.cpp's server `timings` shape (so one replay
// script reads both engines): prompt_n = prompt tokens computed (the uncached ones), prompt_ms =
// request start -> first token sampled, predicted_n = generated tokens (the first one included),
// predicted_ms = first -> last generated token (so predicted_n - 1 tokens were timed).
struct Timings {
    std::int64_t prompt_n = 0;
    double prompt_ms = 0;
    std::int64_t predicted_n = 0;
    double predicted_ms = 0;
};

struct ChatResult {
    std::string reasoning;
    std::string content;
    std::vector<chat::ToolCall> tool_calls;
    chat::FinishReason finish = chat::FinishReason::length;
    Usage usage;
    // The content tokens' log-probabilities when the request asked for them.
    std::optional<std::vector<chat::TokenLogprob>> logprobs;
    // Written as "timings" in the non-streamed chat.completion when set (the server sets it).
    std::optional<Timings> timings;
};

// OpenAI's logprobs entries: {token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}.
// A token that is not whole UTF-8 is written "bytes:\\xNN..." (its bytes are in `bytes`).
Json logprobs_json(const std::vector<chat::TokenLogprob>& tokens);
// The legacy /v1/completions logprobs object: {tokens, token_logprobs, top_logprobs (one object
// per token, token -> logprob, the chosen token included), text_offset (in code points)}.
Json completion_logprobs_json(const std::vector<chat::TokenLogprob>& tokens,
                              const std::vector<std::int64_t>& text_offsets);
// The most alternatives the legacy logprobs field asks for (OpenAI's).
constexpr int kMaxCompletionLogprobs = 5;
// The largest top_logprobs accepted (OpenAI's).
inline constexpr int kMaxTopLogprobs = 20;

Json usage_json(const Usage& usage);
// {prompt_n, prompt_ms, prompt_per_token_ms, prompt_per_second, predicted_n, predicted_ms,
// predicted_per_token_ms, predicted_per_second}; a rate over nothing is null.
Json timings_json(const Timings& timings);
// "call_" + a stable suffix: the same request id and index always give the same id.
std::string tool_call_id(std::string_view request_id, std::size_t index);

// The non-streaming chat.completion object.
Json chat_completion(const std::string& id, std::int64_t created, const std::string& model,
                     const ChatResult& result);

// Turns the parser's streaming events into chat.completion.chunk objects (docs/CHAT_FORMAT.md):
// reasoning as delta.reasoning_content and delta.reasoning, answer text as delta.content,
// function calls as delta.tool_calls with the name first and the arguments in pieces. Calls of
// built-in tools (browser, python) are not function calls; their text counts as reasoning.
class ChatChunkEncoder {
public:
    ChatChunkEncoder(std::string id, std::int64_t created, std::string model, bool include_usage);

    Json role_chunk() const;  // the first chunk: role assistant, empty content
    // The chunk for one event, or nullopt when the event carries nothing for the client.
    std::optional<Json> event_chunk(const chat::ParserEvent& event);
    Json finish_chunk(chat::FinishReason reason) const;
    Json usage_chunk(const Usage& usage) const;  // choices [], usage filled
    std::size_t tool_calls() const { return tool_calls_; }

private:
    Json chunk(Json delta, const Json& finish_reason) const;

    std::string id_;
    std::int64_t created_;
    std::string model_;
    bool include_usage_;
    std::size_t tool_calls_ = 0;
    bool in_function_call_ = false;
    bool in_builtin_call_ = false;
};

// text_completion objects for /v1/completions.
// `logprobs`: completion_logprobs_json() of the tokens, or null.
Json text_completion(const std::string& id, std::int64_t created, const std::string& model,
                     const std::string& text, std::string_view finish_reason, const Usage& usage,
                     Json logprobs = nullptr);
Json text_completion_chunk(const std::string& id, std::int64_t created, const std::string& model,
                           const std::string& text, const Json& finish_reason, bool include_usage,
                           Json logprobs = nullptr);

// {"error": {"message", "type", "param", "code"}}. Invalid UTF-8 in the message is replaced.
Json error_body(std::string_view message, std::string_view type, std::string_view param = {},
                std::string_view code = {});

}  // namespace neural::openai
