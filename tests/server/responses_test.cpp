// The Responses API mapping (engine/chat/responses): input items and instructions to harmony,
// errors that name the Responses fields, previous_response_id state, and the stream events and
// response object built from parser events.
#include "chat/responses.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace neural::openai {
namespace {

using ::testing::HasSubstr;

void expect_refused(const Json& body, const std::string& param, const std::string& text,
                    const ConversationState* previous = nullptr) {
    try {
        parse_responses_request(body, {}, previous);
        ADD_FAILURE() << "accepted: " << body.dump();
    } catch (const RequestError& e) {
        EXPECT_EQ(e.param(), param) << e.what();
        EXPECT_THAT(e.what(), HasSubstr(text));
    }
}

TEST(ResponsesRequest, StringInputAndInstructions) {
    const ResponsesRequest r = parse_responses_request(Json::parse(
        R"({"model": "m", "input": "Hello!", "instructions": "Be brief.",
            "max_output_tokens": 20, "reasoning": {"effort": "high"}, "temperature": 0.5})"));
    EXPECT_EQ(r.chat.model, "m");
    ASSERT_EQ(r.chat.history.size(), 1u);
    EXPECT_EQ(r.chat.history[0].role, chat::Role::user);
    EXPECT_EQ(r.chat.history[0].text(), "Hello!");
    EXPECT_EQ(r.chat.developer.instructions.value_or(""), "Be brief.");
    EXPECT_EQ(r.chat.max_tokens.value_or(0), 20);
    EXPECT_EQ(r.chat.system.reasoning_effort, chat::ReasoningEffort::high);
    EXPECT_FLOAT_EQ(r.chat.sampling.temperature, 0.5f);
    EXPECT_TRUE(r.store);
    EXPECT_EQ(r.echo["instructions"], "Be brief.");
    EXPECT_EQ(r.echo["max_output_tokens"], 20);
    EXPECT_EQ(r.echo["reasoning"]["effort"], "high");
    EXPECT_EQ(r.echo["text"]["format"]["type"], "text");
}

TEST(ResponsesRequest, ItemsToolsAndFormat) {
    const ResponsesRequest r = parse_responses_request(Json::parse(R"({
      "model": "m",
      "input": [
        {"role": "developer", "content": "Use tools."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [],
         "content": [{"type": "reasoning_text", "text": "Need the tool."}]},
        {"type": "function_call", "call_id": "call_9", "name": "get_weather",
         "arguments": "{\"city\":\"Oslo\"}"},
        {"type": "function_call_output", "call_id": "call_9", "output": "{\"temp\":3}"}
      ],
      "tools": [{"type": "function", "name": "get_weather", "strict": true,
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                "required": ["city"], "additionalProperties": false}}],
      "text": {"format": {"type": "json_schema", "name": "w",
                          "schema": {"type": "object", "properties": {"t": {"type": "number"}},
                                     "required": ["t"]}}}
    })"));
    EXPECT_EQ(r.chat.developer.instructions.value_or(""), "Use tools.");
    ASSERT_EQ(r.chat.history.size(), 4u);
    EXPECT_EQ(r.chat.history[0].text(), "Weather?");
    EXPECT_EQ(r.chat.history[1].channel.value_or(""), "analysis");
    EXPECT_EQ(r.chat.history[1].text(), "Need the tool.");
    EXPECT_TRUE(r.chat.history[2].is_tool_call());
    EXPECT_EQ(r.chat.history[2].recipient.value_or(""), "functions.get_weather");
    EXPECT_EQ(r.chat.history[3].role, chat::Role::tool);
    EXPECT_EQ(r.chat.history[3].name.value_or(""), "functions.get_weather");
    EXPECT_EQ(r.chat.history[3].text(), "{\"temp\":3}");
    ASSERT_EQ(r.chat.developer.tools.size(), 1u);
    EXPECT_EQ(r.chat.developer.tools[0].tools[0].name, "get_weather");
    ASSERT_TRUE(r.chat.constraint);
    EXPECT_TRUE(r.chat.constraint->final_answer);
    EXPECT_TRUE(r.chat.constraint->function_arguments.count("get_weather"));
    EXPECT_EQ(r.call_names.at("call_9"), "get_weather");
    EXPECT_EQ(r.echo["text"]["format"]["type"], "json_schema");
}

TEST(ResponsesRequest, ErrorsNameTheResponsesFields) {
    expect_refused(Json::parse(R"({"model": "m"})"), "input", "'input' is required");
    expect_refused(Json::parse(R"({"model": "m", "input": [{"role": "user", "content": 5}]})"),
                   "input[0].content", "must be a string or an array");
    expect_refused(Json::parse(R"({"model": "m", "input": "x", "max_output_tokens": 0})"),
                   "max_output_tokens", "'max_output_tokens' must be from 1");
    expect_refused(Json::parse(R"({"model": "m", "input": "x",
                                   "tools": [{"type": "function", "name": "bad name"}]})"),
                   "tools[0].name", "letters, digits");
    expect_refused(
        Json::parse(R"({"model": "m", "input": "x", "tools": [{"type": "web_search"}]})"),
        "tools[0].type", "function only");
    expect_refused(Json::parse(R"({"model": "m", "input": "x", "text": {"format": {"type":
                                   "json_schema", "name": "n", "schema": {"type": "string",
                                   "maxLength": 3}}}})"),
                   "text.format.schema", "maxLength (at /maxLength)");
    expect_refused(Json::parse(R"({"model": "m", "input": "x", "reasoning": {"effort": "max"}})"),
                   "reasoning.effort", "low, medium or high");
    expect_refused(Json::parse(R"({"model": "m", "input": [{"type": "function_call_output",
                                   "call_id": "nope", "output": "1"}]})"),
                   "input[0].call_id", "no function_call with that call_id");
    expect_refused(Json::parse(R"({"model": "m", "input": [{"type": "input_image"}]})"),
                   "input[0].type", "not supported");
    expect_refused(Json::parse(R"({"model": "m", "input": "x", "background": true})"), "background",
                   "not supported");
    // Unknown fields: ignored and named (lenient), refused when strict.
    const Json extra = Json::parse(R"({"model": "m", "input": "x", "frobnicate": 1})");
    EXPECT_EQ(parse_responses_request(extra).chat.ignored_fields,
              std::vector<std::string>{"frobnicate"});
    ChatRequestOptions strict;
    strict.strict = true;
    EXPECT_THROW(parse_responses_request(extra, strict), RequestError);
}

TEST(ResponsesRequest, PreviousStateComesFirstAndResolvesCallIds) {
    ConversationState prev;
    prev.history.push_back(chat::Message::user("Weather in Oslo?"));
    prev.history.push_back(chat::Message::function_call("get_weather", "{\"city\":\"Oslo\"}"));
    prev.call_names["call_1"] = "get_weather";
    const ResponsesRequest r =
        parse_responses_request(Json::parse(R"({"model": "m", "previous_response_id": "resp_1",
                        "input": [{"type": "function_call_output", "call_id": "call_1",
                                   "output": "sunny"}]})"),
                                {}, &prev);
    EXPECT_EQ(r.previous_response_id.value_or(""), "resp_1");
    ASSERT_EQ(r.chat.history.size(), 3u);
    EXPECT_EQ(r.chat.history[0].text(), "Weather in Oslo?");
    EXPECT_EQ(r.chat.history[2].name.value_or(""), "functions.get_weather");
    EXPECT_EQ(r.echo["previous_response_id"], "resp_1");
    // A follow-up may carry no input of its own.
    EXPECT_EQ(
        parse_responses_request(Json::parse(R"({"model": "m"})"), {}, &prev).chat.history.size(),
        2u);
}

chat::ParserEvent start(chat::Message m) {
    chat::ParserEvent e;
    e.type = chat::EventType::message_start;
    e.message = std::move(m);
    return e;
}
chat::ParserEvent text(chat::EventType type, std::string t) {
    chat::ParserEvent e;
    e.type = type;
    e.text = std::move(t);
    return e;
}
chat::ParserEvent end() {
    chat::ParserEvent e;
    e.type = chat::EventType::message_end;
    return e;
}

std::vector<std::string> types(const std::vector<Json>& events) {
    std::vector<std::string> out;
    for (const Json& e : events) out.push_back(e["type"].get<std::string>());
    return out;
}

TEST(ResponseEncoder, ReasoningAndAnswerEvents) {
    ResponseEncoder enc("resp_abc", 1700000000, "m", Json{{"instructions", nullptr}});
    std::vector<Json> all = enc.begin();
    auto feed = [&](const chat::ParserEvent& e) {
        auto ev = enc.event(e);
        all.insert(all.end(), ev.begin(), ev.end());
    };
    feed(start(chat::Message::assistant("analysis", "")));
    feed(text(chat::EventType::reasoning, "Think"));
    feed(text(chat::EventType::reasoning, "ing."));
    feed(end());
    feed(start(chat::Message::assistant("final", "")));
    feed(text(chat::EventType::content, "Hi"));
    feed(text(chat::EventType::content, " there"));
    feed(end());
    ChatResult result;
    result.finish = chat::FinishReason::stop;
    result.usage = {30, 12, 10, 5};
    auto fin = enc.finish(result);
    all.insert(all.end(), fin.begin(), fin.end());

    EXPECT_EQ(
        types(all),
        (std::vector<std::string>{
            "response.created", "response.in_progress", "response.output_item.added",
            "response.content_part.added", "response.reasoning_text.delta",
            "response.reasoning_text.delta", "response.reasoning_text.done",
            "response.content_part.done", "response.output_item.done", "response.output_item.added",
            "response.content_part.added", "response.output_text.delta",
            "response.output_text.delta", "response.output_text.done", "response.content_part.done",
            "response.output_item.done", "response.completed"}));
    for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i]["sequence_number"], i);
    EXPECT_EQ(all[0]["response"]["status"], "in_progress");
    EXPECT_EQ(all[11]["delta"], "Hi");
    EXPECT_EQ(all[11]["output_index"], 1);
    EXPECT_EQ(all[13]["text"], "Hi there");
    const Json& r = enc.response();
    EXPECT_EQ(r["id"], "resp_abc");
    EXPECT_EQ(r["object"], "response");
    EXPECT_EQ(r["status"], "completed");
    ASSERT_EQ(r["output"].size(), 2u);
    EXPECT_EQ(r["output"][0]["type"], "reasoning");
    EXPECT_EQ(r["output"][0]["content"][0]["text"], "Thinking.");
    EXPECT_EQ(r["output"][1]["type"], "message");
    EXPECT_EQ(r["output"][1]["status"], "completed");
    EXPECT_EQ(r["output"][1]["content"][0]["type"], "output_text");
    EXPECT_EQ(r["output"][1]["content"][0]["text"], "Hi there");
    EXPECT_EQ(r["usage"]["input_tokens"], 30);
    EXPECT_EQ(r["usage"]["input_tokens_details"]["cached_tokens"], 10);
    EXPECT_EQ(r["usage"]["output_tokens"], 12);
    EXPECT_EQ(r["usage"]["output_tokens_details"]["reasoning_tokens"], 5);
    EXPECT_EQ(r["usage"]["total_tokens"], 42);
    EXPECT_EQ(all.back()["response"], r);

    ResponsesRequest req;
    req.chat.history.push_back(chat::Message::user("Hello"));
    const ConversationState s = enc.state_after(req);
    ASSERT_EQ(s.history.size(), 3u);
    EXPECT_EQ(s.history[1].channel.value_or(""), "analysis");
    EXPECT_EQ(s.history[2].text(), "Hi there");
}

TEST(ResponseEncoder, FunctionCallsAndCutOutput) {
    ResponseEncoder enc("resp_x", 1, "m", Json::object());
    std::vector<Json> all;
    auto feed = [&](const chat::ParserEvent& e) {
        auto ev = enc.event(e);
        all.insert(all.end(), ev.begin(), ev.end());
    };
    feed(start(chat::Message::function_call("get_weather", "")));
    chat::ParserEvent call;
    call.type = chat::EventType::tool_call_start;
    call.recipient = "functions.get_weather";
    call.function_name = "get_weather";
    feed(call);
    feed(text(chat::EventType::tool_call_arguments, "{\"city\":"));
    feed(text(chat::EventType::tool_call_arguments, "\"Oslo\"}"));
    feed(end());
    EXPECT_EQ(types(all),
              (std::vector<std::string>{
                  "response.output_item.added", "response.function_call_arguments.delta",
                  "response.function_call_arguments.delta", "response.function_call_arguments.done",
                  "response.output_item.done"}));
    const Json item = all.back()["item"];
    EXPECT_EQ(item["type"], "function_call");
    EXPECT_EQ(item["name"], "get_weather");
    EXPECT_EQ(item["arguments"], "{\"city\":\"Oslo\"}");
    EXPECT_EQ(item["call_id"], tool_call_id("resp_x", 0));
    ResponsesRequest req;
    const ConversationState s = enc.state_after(req);
    ASSERT_EQ(s.history.size(), 1u);
    EXPECT_TRUE(s.history[0].is_tool_call());
    EXPECT_EQ(s.call_names.at(tool_call_id("resp_x", 0)), "get_weather");

    // A message cut by the token limit: response.incomplete.
    ResponseEncoder cut("resp_y", 1, "m", Json::object());
    cut.event(start(chat::Message::assistant("final", "")));
    cut.event(text(chat::EventType::content, "Once upon"));
    ChatResult result;
    result.finish = chat::FinishReason::length;
    const auto fin = cut.finish(result);
    EXPECT_EQ(fin.back()["type"], "response.incomplete");
    EXPECT_EQ(cut.response()["status"], "incomplete");
    EXPECT_EQ(cut.response()["incomplete_details"]["reason"], "max_output_tokens");
    EXPECT_EQ(cut.response()["output"][0]["status"], "incomplete");
    EXPECT_EQ(cut.response()["output"][0]["content"][0]["text"], "Once upon");
}

}  // namespace
}  // namespace neural::openai
