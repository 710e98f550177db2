// The OpenAI Responses API (/v1/responses) on top of harmony: a request's input items,
// instructions, function tools, text.format and reasoning settings are translated to a
// Chat Completions request (api/openai.h) and validated there, with errors naming the Responses
// fields; results and streaming events are mapped back to response objects and the documented
// stream events. previous_response_id continues from a stored ConversationState. No Qt, no I/O.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "api/openai.h"

namespace neural::openai {

// What a response leaves for a follow-up that names it in previous_response_id: the
// conversation up to and including its output.
struct ConversationState {
    std::vector<chat::Message> history;
    // call_id -> the called tool: "name", or "namespace.name" for a tool of a namespace
    std::map<std::string, std::string> call_names;
    // For GET /v1/responses/{id} and .../input_items: the response object and the request's
    // input items (each with an id), as OpenAI returns them.
    Json response;
    Json input_items = Json::array();
};

// The tools of a request that are not plain function tools, as the encoder needs them.
struct ToolKinds {
    std::set<std::string> custom;      // freeform tools: the call's input is plain text
    std::set<std::string> namespaces;  // namespace tools: called as "namespace.name"
};

// Finds an item of a stored response (output or input) by id, for item_reference; null when
// unknown.
using ItemLookup = std::function<const Json*(const std::string& id)>;

struct ResponsesRequest {
    // The conversation (the previous response's history first), sampling, limits, tools and
    // the output constraint, as the engine runs a chat request.
    ChatRequest chat;
    std::optional<std::string> previous_response_id;
    bool store = true;                              // keep the conversation state for a follow-up
    std::map<std::string, std::string> call_names;  // call_id -> name, known so far
    ToolKinds tool_kinds;
    // reasoning.summary was asked for: reasoning items carry the analysis text as summary too.
    bool reasoning_summary = false;
    // The input items with ids (item references resolved), for GET .../input_items.
    Json input_items = Json::array();
    // The request fields a response object repeats (instructions, tools, text, reasoning, ...).
    Json echo;
};

// previous_response_id of a body (the server looks the state up before parsing); throws
// RequestError when it is not a string.
std::optional<std::string> previous_response_id(const Json& body);

// Validates and maps a /v1/responses body. `previous`: the state previous_response_id names;
// `items` resolves item_reference inputs (an unknown id is a RequestError with code
// "item_not_found", which the server answers with 404). Hosted tools (web search, file search,
// code interpreter, computer use, image generation, remote MCP, ...) and their history items
// are dropped and named in chat.notices.
ResponsesRequest parse_responses_request(const Json& body, const ChatRequestOptions& options = {},
                                         const ConversationState* previous = nullptr,
                                         const ItemLookup& items = {});

// Streaming events and the final response object. Feed every parser event of the generation
// (also when not streaming: the output items are built here either way).
class ResponseEncoder {
public:
    ResponseEncoder(std::string id, std::int64_t created, std::string model, Json echo,
                    ToolKinds tools = {}, bool reasoning_summary = false);

    const std::string& id() const { return id_; }
    // response.created and response.in_progress.
    std::vector<Json> begin();
    std::vector<Json> event(const chat::ParserEvent& event);
    // Closes an open item; then response.completed, or response.incomplete when the output was
    // cut by max_output_tokens.
    std::vector<Json> finish(const ChatResult& result);
    // The response object as finish() left it (status, output, usage).
    const Json& response() const { return response_; }
    // response.failed with an error object (a stream that fails after it began).
    Json failed(std::string_view message, std::string_view code);
    // The conversation after this response (for a follow-up), given the request's.
    ConversationState state_after(const ResponsesRequest& request) const;
    // A round of a built-in tool the server ran within this response (neural-server --tools,
    // docs/API.md "Built-in tools"): the call and the tool's answer are no output items, but the
    // conversation state_after() keeps has them, so a follow-up reads the round as it happened.
    void builtin_round(chat::Message call, chat::Message result);

private:
    enum class Item { none, reasoning, message, function_call, custom_call, builtin };
    Json with_sequence(Json event);
    Json snapshot(std::string_view status) const;
    void open(Item kind, const chat::ParserEvent& e, std::vector<Json>& out);
    void close(std::string_view status, std::vector<Json>& out);

    std::string id_;
    std::int64_t created_;
    std::string model_;
    Json echo_;
    Json response_;
    Json output_ = Json::array();
    std::int64_t sequence_ = 0;
    Item item_ = Item::none;
    std::string item_id_;
    std::string text_;  // of the open item
    Json logprobs_;     // of the open message item (include message.output_text.logprobs)
    std::string call_id_, call_name_;
    std::string call_namespace_;  // of a namespace tool's call
    ToolKinds tools_;
    bool reasoning_summary_ = false;
    std::size_t calls_ = 0;
    std::size_t items_ = 0;
    // Output messages, for state_after().
    std::vector<chat::Message> messages_;
    std::map<std::string, std::string> call_names_;
};

}  // namespace neural::openai
