// The Responses API mapping (engine/api/responses): input items and instructions to harmony,
// errors that name the Responses fields, previous_response_id state, and the stream events and
// response object built from parser events.
#include "api/responses.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "chat/render.h"

namespace neural::openai {
namespace {

using ::testing::HasSubstr;

void expect_refused(const Json& body, const std::string& param, const std::string& text,
                    const ConversationState* previous = nullptr, bool strict = false) {
    try {
        ChatRequestOptions options;
        options.strict = strict;
        parse_responses_request(body, options, previous);
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
    expect_refused(Json::parse(R"({"model": "m", "input": "x", "text": {"format": {"type":
                                   "json_schema", "name": "n", "schema": {"type": "string",
                                   "pattern": "\\p{L}"}}}})"),
                   "text.format.schema",
                   "'/pattern': the pattern uses a Unicode property escape \\p{...} at offset 2");
    expect_refused(Json::parse(R"({"model": "m", "input": "x", "reasoning": {"effort": "max"}})"),
                   "reasoning.effort", "none, minimal, low, medium, high or xhigh");
    expect_refused(Json::parse(R"({"model": "m", "input": [{"type": "item_reference",
                                   "id": "rs_gone"}]})"),
                   "input[0].id", "Item with id 'rs_gone' not found");
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

// A built-in tool call the server runs (--tools): no output item, but the round is in the state
// a follow-up continues from, between the reasoning before it and the answer after it.
TEST(ResponseEncoder, ABuiltInRoundIsNoItemButStaysInTheState) {
    ResponseEncoder enc("resp_b", 1, "m", Json::object());
    std::vector<Json> all;
    auto feed = [&](const chat::ParserEvent& e) {
        auto ev = enc.event(e);
        all.insert(all.end(), ev.begin(), ev.end());
    };
    feed(start(chat::Message::assistant("analysis", "")));
    feed(text(chat::EventType::reasoning, "Let me compute."));
    feed(end());
    chat::Message call = chat::Message::assistant("analysis", "print(6 * 7)");
    call.recipient = "python";
    call.content_type = "code";
    feed(start(call));
    chat::ParserEvent tool;
    tool.type = chat::EventType::tool_call_start;
    tool.recipient = "python";
    feed(tool);
    feed(text(chat::EventType::tool_call_arguments, "print(6 * 7)"));
    feed(end());
    chat::Message result = chat::Message::tool_result("python", "42\n");
    result.channel = "analysis";
    enc.builtin_round(call, result);
    feed(start(chat::Message::assistant("final", "")));
    feed(text(chat::EventType::content, "It is 42."));
    feed(end());
    enc.finish(ChatResult{});
    const Json& r = enc.response();
    ASSERT_EQ(r["output"].size(), 2u) << r.dump();
    EXPECT_EQ(r["output"][0]["type"], "reasoning");
    EXPECT_EQ(r["output"][1]["type"], "message");
    for (const Json& e : all) EXPECT_THAT(e.dump(), ::testing::Not(HasSubstr("print(6")));
    const ConversationState s = enc.state_after(ResponsesRequest{});
    ASSERT_EQ(s.history.size(), 4u);
    EXPECT_EQ(s.history[0].text(), "Let me compute.");
    EXPECT_EQ(s.history[1].recipient.value_or(""), "python");
    EXPECT_EQ(s.history[1].text(), "print(6 * 7)");
    EXPECT_EQ(s.history[2].role, chat::Role::tool);
    EXPECT_EQ(s.history[2].text(), "42\n");
    EXPECT_EQ(s.history[3].text(), "It is 42.");
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

// What Codex CLI, the Agents SDK and the AI SDK send (issue 43), which used to be 400s.
TEST(ResponsesRequest, HostedToolsAndTheirItemsAreDropped) {
    const ResponsesRequest r = parse_responses_request(Json::parse(R"({
      "model": "m",
      "tools": [{"type": "web_search", "search_context_size": "low"},
                {"type": "file_search", "vector_store_ids": ["v"]},
                {"type": "mcp", "server_label": "x", "server_url": "https://example.com"},
                {"type": "function", "name": "shell", "parameters": {"type": "object"}}],
      "tool_choice": "auto",
      "input": [
        {"role": "user", "content": "hi"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed",
         "action": {"type": "search", "query": "q"}},
        {"type": "local_shell_call", "id": "lsc_1", "call_id": "c1", "status": "completed",
         "action": {"type": "exec", "command": ["ls"]}},
        {"type": "compaction", "encrypted_content": "xyz"}]})"));
    ASSERT_EQ(r.chat.history.size(), 1u);
    ASSERT_EQ(r.chat.developer.tools.size(), 1u);
    EXPECT_EQ(r.chat.developer.tools[0].tools.size(), 1u);
    const std::string notices = ::testing::PrintToString(r.chat.notices);
    for (const char* t : {"'web_search'", "'file_search'", "'mcp'", "'web_search_call'",
                          "'local_shell_call'", "'compaction'"})
        EXPECT_THAT(notices, HasSubstr(t));
    EXPECT_EQ(r.echo["tools"].size(), 4u);
    // Only hosted tools: no tools at all, and tool_choice required says nothing.
    const ResponsesRequest only = parse_responses_request(Json::parse(
        R"({"model": "m", "input": "x", "tools": [{"type": "web_search"}],
            "tool_choice": "required"})"));
    EXPECT_TRUE(only.chat.developer.tools.empty());
    EXPECT_EQ(only.chat.tool_choice, ToolChoice::automatic);
}

TEST(ResponsesRequest, NamespaceToolsAreHarmonyNamespaces) {
    const ResponsesRequest r = parse_responses_request(Json::parse(R"({
      "model": "m",
      "tools": [{"type": "namespace", "name": "multi_agent_v1", "description": "Agents.",
                 "tools": [{"type": "function", "name": "spawn", "description": "Start one.",
                            "parameters": {"type": "object",
                                           "properties": {"task": {"type": "string"}}}}]}],
      "input": [
        {"role": "user", "content": "go"},
        {"type": "function_call", "call_id": "c1", "namespace": "multi_agent_v1",
         "name": "spawn", "arguments": "{\"task\":\"t\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "started"}]})"));
    ASSERT_EQ(r.chat.developer.tools.size(), 1u);
    EXPECT_EQ(r.chat.developer.tools[0].name, "multi_agent_v1");
    EXPECT_EQ(r.chat.developer.tools[0].tools[0].name, "spawn");
    ASSERT_EQ(r.chat.history.size(), 3u);
    EXPECT_EQ(r.chat.history[1].recipient.value_or(""), "multi_agent_v1.spawn");
    EXPECT_EQ(r.chat.history[1].content_type.value_or(""), "<|constrain|>json");
    EXPECT_EQ(r.chat.history[2].name.value_or(""), "multi_agent_v1.spawn");
    EXPECT_EQ(r.tool_kinds.namespaces.count("multi_agent_v1"), 1u);
    const std::string prompt = chat::render_conversation(r.chat.conversation()).text();
    EXPECT_THAT(prompt, HasSubstr("## multi_agent_v1\n\n// Agents.\nnamespace multi_agent_v1 {"));
    EXPECT_THAT(prompt, HasSubstr("type spawn = (_: {\n"));
    EXPECT_THAT(prompt, HasSubstr("<|start|>assistant to=multi_agent_v1.spawn<|channel|>"));
    EXPECT_THAT(prompt, HasSubstr("<|start|>multi_agent_v1.spawn to=assistant"));

    // The model's call of a namespace tool is a function_call with its namespace.
    ResponseEncoder enc("resp_n", 1, "m", Json::object(), r.tool_kinds);
    std::vector<Json> all;
    auto feed = [&](const chat::ParserEvent& e) {
        auto ev = enc.event(e);
        all.insert(all.end(), ev.begin(), ev.end());
    };
    chat::Message header = chat::Message::function_call("x", "");
    header.recipient = "multi_agent_v1.spawn";
    feed(start(header));
    chat::ParserEvent call;
    call.type = chat::EventType::tool_call_start;
    call.recipient = "multi_agent_v1.spawn";
    feed(call);
    feed(text(chat::EventType::tool_call_arguments, "{}"));
    feed(end());
    const Json item = all.back()["item"];
    EXPECT_EQ(item["type"], "function_call");
    EXPECT_EQ(item["namespace"], "multi_agent_v1");
    EXPECT_EQ(item["name"], "spawn");
    const ConversationState s = enc.state_after(r);
    EXPECT_EQ(s.history.back().recipient.value_or(""), "multi_agent_v1.spawn");
    EXPECT_EQ(s.call_names.at(tool_call_id("resp_n", 0)), "multi_agent_v1.spawn");
    // A follow-up answering that call names the namespace tool as the author.
    const ResponsesRequest next = parse_responses_request(
        Json::parse(fmt::format(R"({{"model": "m", "input": [{{"type": "function_call_output",
            "call_id": "{}", "output": "ok"}}]}})",
                                tool_call_id("resp_n", 0))),
        {}, &s);
    EXPECT_EQ(next.chat.history.back().name.value_or(""), "multi_agent_v1.spawn");
}

TEST(ResponsesRequest, CustomToolsTakePlainText) {
    const ResponsesRequest r = parse_responses_request(Json::parse(R"({
      "model": "m",
      "tools": [{"type": "custom", "name": "apply_patch", "description": "Edit files.",
                 "format": {"type": "grammar", "syntax": "lark",
                            "definition": "start: \"*** Begin Patch\" /(.|\\n)*/"}}],
      "input": [
        {"role": "user", "content": "fix"},
        {"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch",
         "input": "*** Begin Patch\n*** End Patch"},
        {"type": "custom_tool_call_output", "call_id": "c1", "output": "Done!"}]})"));
    ASSERT_EQ(r.chat.developer.tools.size(), 1u);
    const auto& tool = r.chat.developer.tools[0].tools[0];
    EXPECT_EQ(tool.name, "apply_patch");
    EXPECT_THAT(tool.description, HasSubstr("plain text (not JSON) in this lark grammar"));
    EXPECT_EQ(tool.parameters.value_or(Json()), (Json{{"type", "string"}}));
    ASSERT_EQ(r.chat.history.size(), 3u);
    EXPECT_EQ(r.chat.history[1].recipient.value_or(""), "functions.apply_patch");
    EXPECT_FALSE(r.chat.history[1].content_type);
    EXPECT_EQ(r.chat.history[1].text(), "*** Begin Patch\n*** End Patch");
    EXPECT_EQ(r.chat.history[2].name.value_or(""), "functions.apply_patch");
    // The grammar is enforced on the call's text (chat/lark_grammar.h): no notice.
    EXPECT_TRUE(r.chat.notices.empty());
    ASSERT_TRUE(r.chat.constraint);
    const auto& grammar = r.chat.constraint->function_arguments.at("apply_patch");
    ASSERT_TRUE(grammar->text_automaton());
    EXPECT_TRUE(grammar->text_automaton()->matches(U"*** Begin Patch\n*** End Patch"));
    EXPECT_FALSE(grammar->text_automaton()->matches(U"*** End Patch"));
    EXPECT_EQ(r.chat.constraint->text_functions, std::vector<std::string>{"apply_patch"});
    EXPECT_EQ(r.chat.constraint->functions, std::vector<std::string>{"apply_patch"});

    ResponseEncoder enc("resp_c", 1, "m", Json::object(), r.tool_kinds);
    std::vector<Json> all;
    auto feed = [&](const chat::ParserEvent& e) {
        auto ev = enc.event(e);
        all.insert(all.end(), ev.begin(), ev.end());
    };
    feed(start(chat::Message::function_call("apply_patch", "")));
    chat::ParserEvent call;
    call.type = chat::EventType::tool_call_start;
    call.recipient = "functions.apply_patch";
    call.function_name = "apply_patch";
    feed(call);
    feed(text(chat::EventType::tool_call_arguments, "*** Begin"));
    feed(end());
    EXPECT_EQ(types(all),
              (std::vector<std::string>{
                  "response.output_item.added", "response.custom_tool_call_input.delta",
                  "response.custom_tool_call_input.done", "response.output_item.done"}));
    const Json item = all.back()["item"];
    EXPECT_EQ(item["type"], "custom_tool_call");
    EXPECT_EQ(item["input"], "*** Begin");
    EXPECT_EQ(item["call_id"], tool_call_id("resp_c", 0));
    EXPECT_FALSE(enc.state_after(r).history.back().content_type);
}

// A grammar one automaton cannot express is shown to the model and passed on free, with the
// reason in the log; a regex grammar is enforced; a named freeform tool choice forces its header
// without <|constrain|>json.
TEST(ResponsesRequest, FreeformGrammarsBeyondAnAutomatonAreShownButNotEnforced) {
    const ResponsesRequest r = parse_responses_request(Json::parse(R"({
      "model": "m", "input": "go",
      "tools": [{"type": "custom", "name": "calc",
                 "format": {"type": "grammar", "syntax": "lark",
                            "definition": "start: e\ne: \"(\" e \")\" | /[0-9]+/"}},
                {"type": "custom", "name": "date",
                 "format": {"type": "grammar", "syntax": "regex",
                            "definition": "\\d{4}-\\d{2}-\\d{2}"}}],
      "tool_choice": {"type": "custom", "name": "date"}})"));
    ASSERT_EQ(r.chat.notices.size(), 1u);
    EXPECT_THAT(r.chat.notices[0], HasSubstr("custom tool 'calc': its lark grammar is shown to the "
                                             "model but not enforced while sampling"));
    EXPECT_THAT(r.chat.notices[0], HasSubstr("recursive rule 'e'"));
    ASSERT_TRUE(r.chat.constraint);
    EXPECT_FALSE(r.chat.constraint->function_arguments.count("calc"));
    const auto& date = r.chat.constraint->function_arguments.at("date");
    EXPECT_TRUE(date->text_automaton()->matches(U"2026-12-06"));
    EXPECT_FALSE(date->text_automaton()->matches(U"x2026-12-06"));  // the whole text
    // Both are freeform: their headers have no <|constrain|>json.
    EXPECT_THAT(r.chat.constraint->text_functions, ::testing::UnorderedElementsAre("calc", "date"));
    EXPECT_EQ(r.chat.forced_output.value_or(""),
              "<|channel|>commentary to=functions.date<|message|>");
}

TEST(ResponsesRequest, ItemReferencesResolveFromStoredResponses) {
    const Json stored = Json::parse(R"({"id": "rs_1", "type": "reasoning", "summary": [],
        "content": [{"type": "reasoning_text", "text": "Think."}]})");
    const Json call = Json::parse(R"({"id": "fc_1", "type": "function_call", "call_id": "c9",
        "name": "f", "arguments": "{}", "status": "completed"})");
    const ItemLookup lookup = [&](const std::string& id) -> const Json* {
        if (id == "rs_1") return &stored;
        if (id == "fc_1") return &call;
        return nullptr;
    };
    const ResponsesRequest r = parse_responses_request(
        Json::parse(R"({"model": "m", "tools": [{"type": "function", "name": "f"}], "input": [
            {"role": "user", "content": "q"},
            {"type": "item_reference", "id": "rs_1"},
            {"type": "item_reference", "id": "fc_1"},
            {"type": "function_call_output", "call_id": "c9", "output": "1"}]})"),
        {}, nullptr, lookup);
    ASSERT_EQ(r.chat.history.size(), 4u);
    EXPECT_EQ(r.chat.history[1].channel.value_or(""), "analysis");
    EXPECT_EQ(r.chat.history[1].text(), "Think.");
    EXPECT_EQ(r.chat.history[2].recipient.value_or(""), "functions.f");
    EXPECT_EQ(r.chat.history[3].name.value_or(""), "functions.f");
    // The input items, as GET .../input_items lists them: references resolved, ids kept.
    ASSERT_EQ(r.input_items.size(), 4u);
    EXPECT_EQ(r.input_items[1]["id"], "rs_1");
    EXPECT_EQ(r.input_items[2]["type"], "function_call");
    try {
        parse_responses_request(
            Json::parse(R"({"model": "m", "input": [{"type": "item_reference", "id": "x"}]})"), {},
            nullptr, lookup);
        ADD_FAILURE() << "accepted";
    } catch (const RequestError& e) {
        EXPECT_EQ(e.code(), "item_not_found");
        EXPECT_EQ(e.param(), "input[0].id");
    }
}

TEST(ResponsesRequest, ReasoningSummaryAndEfforts) {
    const ResponsesRequest r = parse_responses_request(Json::parse(
        R"({"model": "m", "input": "x", "reasoning": {"effort": "xhigh", "summary": "auto"}})"));
    EXPECT_TRUE(r.reasoning_summary);
    EXPECT_EQ(r.chat.system.reasoning_effort, chat::ReasoningEffort::high);
    EXPECT_EQ(r.echo["reasoning"]["summary"], "auto");
    for (const char* effort : {"none", "minimal"}) {
        EXPECT_EQ(parse_responses_request(
                      Json{{"model", "m"}, {"input", "x"}, {"reasoning", {{"effort", effort}}}})
                      .chat.system.reasoning_effort,
                  chat::ReasoningEffort::low);
    }
    expect_refused(Json::parse(R"({"model": "m", "input": "x", "reasoning": {"summary": "long"}})"),
                   "reasoning.summary", "auto, concise or detailed");

    ResponseEncoder enc("resp_s", 1, "m", r.echo, r.tool_kinds, r.reasoning_summary);
    std::vector<Json> all;
    auto feed = [&](const chat::ParserEvent& e) {
        auto ev = enc.event(e);
        all.insert(all.end(), ev.begin(), ev.end());
    };
    feed(start(chat::Message::assistant("analysis", "")));
    feed(text(chat::EventType::reasoning, "Hm"));
    feed(end());
    EXPECT_EQ(types(all),
              (std::vector<std::string>{
                  "response.output_item.added", "response.content_part.added",
                  "response.reasoning_summary_part.added", "response.reasoning_text.delta",
                  "response.reasoning_summary_text.delta", "response.reasoning_text.done",
                  "response.content_part.done", "response.reasoning_summary_text.done",
                  "response.reasoning_summary_part.done", "response.output_item.done"}));
    EXPECT_EQ(all[4]["delta"], "Hm");
    EXPECT_EQ(all[4]["summary_index"], 0);
    EXPECT_EQ(all.back()["item"]["summary"][0], (Json{{"type", "summary_text"}, {"text", "Hm"}}));
}

TEST(ResponsesRequest, UnenforceableSchemaKeywordsAreNoticesUnlessStrict) {
    const Json body = Json::parse(R"({"model": "m", "input": "x", "text": {"format": {
        "type": "json_schema", "name": "n", "schema": {"type": "object",
        "properties": {"id": {"type": "string", "pattern": "^[a-z]{1,5000}$"}}}}}})");
    const ResponsesRequest r = parse_responses_request(body);
    ASSERT_EQ(r.chat.notices.size(), 1u);
    EXPECT_THAT(r.chat.notices[0], HasSubstr("'text.format.schema': not enforced while sampling: "
                                             "pattern with a repetition count above 1000"));
    EXPECT_TRUE(r.chat.constraint && r.chat.constraint->final_answer);
    expect_refused(body, "text.format.schema", "pattern", nullptr, true);
}

}  // namespace
}  // namespace neural::openai
