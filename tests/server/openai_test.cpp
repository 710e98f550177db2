// OpenAI request/response mapping (engine/api/openai): the worked examples of
// docs/CHAT_FORMAT.md through the API shape, validation errors with the offending parameter, body
// limits, and the JSON the server sends back (messages, chunks, usage, errors).
#include "api/openai.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "chat/render.h"
#include "support/fixtures.h"

namespace neural::openai {
namespace {

using ::testing::HasSubstr;

const char* const kWeatherPrompt1 =
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Knowledge cutoff: 2024-06\n"
    "Current date: 2025-08-05\n"
    "\n"
    "Reasoning: medium\n"
    "\n"
    "# Valid channels: analysis, commentary, final. Channel must be included for every message.\n"
    "Calls to these tools must go to the commentary channel: 'functions'.<|end|>"
    "<|start|>developer<|message|># Instructions\n"
    "\n"
    "You are a weather assistant.\n"
    "\n"
    "# Tools\n"
    "\n"
    "## functions\n"
    "\n"
    "namespace functions {\n"
    "\n"
    "// Gets the current weather for a city.\n"
    "type get_current_weather = (_: {\n"
    "// City name, e.g. Tokyo\n"
    "location: string,\n"
    "unit?: \"celsius\" | \"fahrenheit\", // default: celsius\n"
    "}) => any;\n"
    "\n"
    "} // namespace functions<|end|><|start|>user<|message|>What's the weather in Tokyo?<|end|>"
    "<|start|>assistant";

const char* const kWeatherTools = R"([{"type": "function", "function": {
    "name": "get_current_weather",
    "description": "Gets the current weather for a city.",
    "parameters": {"type": "object", "properties": {
        "location": {"type": "string", "description": "City name, e.g. Tokyo"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}},
      "required": ["location"]}}}])";

ChatRequestOptions strict() {
    ChatRequestOptions o;
    o.strict = true;
    return o;
}

ChatRequestOptions dated() {
    ChatRequestOptions o;
    o.current_date = "2025-08-05";
    return o;
}

std::string prompt_text(const ChatRequest& r) {
    return chat::render_for_completion(r.conversation()).text();
}

Json weather_request() {
    Json body = Json::parse(R"({"model": "m", "messages": [
        {"role": "system", "content": "You are a weather assistant."},
        {"role": "user", "content": "What's the weather in Tokyo?"}]})");
    body["tools"] = Json::parse(kWeatherTools);
    return body;
}

// Expects parse_chat_request to refuse `body` naming `param`, with `text` in the message.
void expect_refused(const Json& body, const std::string& param, const std::string& text,
                    const ChatRequestOptions& options = {}) {
    try {
        parse_chat_request(body, options);
        ADD_FAILURE() << "accepted: " << body.dump();
    } catch (const RequestError& e) {
        EXPECT_EQ(e.param(), param) << e.what();
        EXPECT_THAT(e.what(), HasSubstr(text));
    }
}

Json minimal() {
    return Json::parse(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}]})");
}

TEST(OpenAiRequest, ToolRequestRendersHarmonyExample) {
    ChatRequest r = parse_chat_request(weather_request(), dated());
    EXPECT_EQ(prompt_text(r), kWeatherPrompt1);
    EXPECT_EQ(r.tool_choice, ToolChoice::automatic);
    EXPECT_FALSE(r.forced_output);
}

TEST(OpenAiRequest, ToolRoundTripRendersHarmonyExample) {
    Json body = weather_request();
    body["messages"].push_back(Json::parse(R"({"role": "assistant", "content": null,
        "reasoning_content": "User wants the current weather in Tokyo. Call get_current_weather.",
        "tool_calls": [{"id": "call_1", "type": "function", "function": {
            "name": "get_current_weather", "arguments": "{\"location\":\"Tokyo\"}"}}]})"));
    body["messages"].push_back(Json::parse(R"({"role": "tool", "tool_call_id": "call_1",
        "content": "{\"temperature\": 22, \"unit\": \"celsius\", \"condition\": \"sunny\"}"})"));
    ChatRequest r = parse_chat_request(body, dated());
    const std::string expected =
        std::string(kWeatherPrompt1) +
        "<|channel|>analysis<|message|>User wants the current weather in Tokyo. Call "
        "get_current_weather.<|end|><|start|>assistant to=functions.get_current_weather"
        "<|channel|>commentary <|constrain|>json<|message|>{\"location\":\"Tokyo\"}<|call|>"
        "<|start|>functions.get_current_weather to=assistant<|channel|>commentary<|message|>"
        "{\"temperature\": 22, \"unit\": \"celsius\", \"condition\": \"sunny\"}<|end|>"
        "<|start|>assistant";
    EXPECT_EQ(prompt_text(r), expected);
}

TEST(OpenAiRequest, FinishedTurnDropsReasoningAndKeepsAnswer) {
    Json body = Json::parse(R"({"model": "m", "reasoning_effort": "low", "messages": [
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "2 + 2 = 4.", "reasoning": "Simple arithmetic."},
        {"role": "user", "content": [{"type": "text", "text": "What about"},
                                     {"type": "text", "text": "9 / 2?"}]}]})");
    ChatRequest r = parse_chat_request(body, dated());
    const std::string text = prompt_text(r);
    EXPECT_THAT(text, HasSubstr("Reasoning: low"));
    EXPECT_THAT(text,
                HasSubstr("<|start|>user<|message|>What is 2 + 2?<|end|><|start|>assistant"
                          "<|channel|>final<|message|>2 + 2 = 4.<|end|><|start|>user<|message|>"
                          "What about\n9 / 2?<|end|><|start|>assistant"));
    EXPECT_THAT(text, ::testing::Not(HasSubstr("Simple arithmetic")));
    EXPECT_FALSE(r.has_developer_message());
}

TEST(OpenAiRequest, ToolResultNameComesFromTheCallIdElseTheLastCall) {
    Json body = Json::parse(R"({"model": "m", "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "first", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "second", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "one"},
        {"role": "tool", "tool_call_id": "unknown", "content": "two"}]})");
    ChatRequest r = parse_chat_request(body);
    ASSERT_EQ(r.history.size(), 5u);
    EXPECT_EQ(r.history[3].name.value_or(""), "functions.first");
    EXPECT_EQ(r.history[4].name.value_or(""), "functions.second");
}

TEST(OpenAiRequest, PreambleNextToAToolCallIsCommentary) {
    Json body = Json::parse(R"({"model": "m", "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "a", "type": "function",
             "function": {"name": "look", "arguments": {"q": 1}}}]}]})");
    ChatRequest r = parse_chat_request(body);
    ASSERT_EQ(r.history.size(), 3u);
    EXPECT_EQ(r.history[1].channel.value_or(""), "commentary");
    EXPECT_FALSE(r.history[1].recipient);
    EXPECT_TRUE(r.history[2].is_tool_call());
    EXPECT_EQ(r.history[2].text(), "{\"q\":1}");  // an object is accepted and serialized
}

TEST(OpenAiRequest, LeadingSystemAndDeveloperMessagesBecomeInstructions) {
    Json body = Json::parse(R"({"model": "m", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "developer", "content": "Use French."},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "Now be verbose."}]})");
    ChatRequest r = parse_chat_request(body);
    EXPECT_EQ(r.developer.instructions.value_or(""), "Be brief.\n\nUse French.");
    ASSERT_EQ(r.history.size(), 2u);
    EXPECT_EQ(r.history[1].role, chat::Role::developer);
    EXPECT_THAT(prompt_text(r), HasSubstr("<|start|>user<|message|>hi<|end|><|start|>developer"
                                          "<|message|># Instructions\n\nNow be verbose.<|end|>"));
}

TEST(OpenAiRequest, SamplingFieldsAndDefaults) {
    Json body = minimal();
    ChatRequest d = parse_chat_request(body);
    EXPECT_FLOAT_EQ(d.sampling.temperature, 1.0f);
    EXPECT_FALSE(d.max_tokens);
    EXPECT_FALSE(d.stream);
    body.update(Json::parse(R"({"temperature": 0, "top_p": 0.5, "seed": 42, "max_tokens": 7,
        "stop": ["a", "bc"], "stream": true, "stream_options": {"include_usage": true},
        "n": 1, "presence_penalty": 0, "frequency_penalty": 0.0, "logprobs": false, "user": "u",
        "parallel_tool_calls": true, "top_k": 40, "min_p": 0.05})"));
    ChatRequest r = parse_chat_request(body);
    EXPECT_FLOAT_EQ(r.sampling.temperature, 0.0f);
    EXPECT_FLOAT_EQ(r.sampling.top_p, 0.5f);
    EXPECT_EQ(r.sampling.seed, 42u);
    EXPECT_EQ(r.sampling.top_k, 40);
    EXPECT_EQ(r.max_tokens, 7);
    EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
    EXPECT_TRUE(r.stream);
    EXPECT_TRUE(r.include_usage);
    body.erase("max_tokens");
    body["max_completion_tokens"] = 9;
    EXPECT_EQ(parse_chat_request(body).max_tokens, 9);
    body["stop"] = "x";
    EXPECT_EQ(parse_chat_request(body).stop, std::vector<std::string>{"x"});
}

TEST(OpenAiRequest, ResponseFormatsGoToTheDeveloperMessage) {
    Json body = minimal();
    body["response_format"] = Json::parse(R"({"type": "json_schema", "json_schema": {
        "name": "answer", "description": "The answer.", "strict": true,
        "schema": {"type": "object", "properties": {"x": {"type": "number"}}}}})");
    ChatRequest r = parse_chat_request(body);
    const std::string text = prompt_text(r);
    EXPECT_THAT(text,
                HasSubstr("# Response Formats\n\n## answer\n\n// The answer.\n"
                          "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"number\"}}}"));
    body["response_format"] = Json::parse(R"({"type": "json_object"})");
    EXPECT_THAT(prompt_text(parse_chat_request(body)), HasSubstr("## json_object"));
    body["response_format"] = Json::parse(R"({"type": "text"})");
    EXPECT_FALSE(parse_chat_request(body).has_developer_message());
}

TEST(OpenAiRequest, ToolChoice) {
    Json body = weather_request();
    body["tool_choice"] = "none";
    ChatRequest none = parse_chat_request(body, dated());
    EXPECT_THAT(prompt_text(none), ::testing::Not(HasSubstr("namespace functions")));

    body["tool_choice"] =
        Json::parse(R"({"type": "function", "function": {"name": "get_current_weather"}})");
    ChatRequest named = parse_chat_request(body, dated());
    EXPECT_EQ(named.tool_choice, ToolChoice::named);
    EXPECT_EQ(
        named.forced_output.value_or(""),
        "<|channel|>commentary to=functions.get_current_weather <|constrain|>json<|message|>");
    EXPECT_EQ(prompt_text(named), kWeatherPrompt1);

    body["tool_choice"] = "required";  // one tool: the same as naming it
    EXPECT_EQ(parse_chat_request(body).tool_choice, ToolChoice::named);

    body["tool_choice"] = Json::parse(R"({"type": "function", "function": {"name": "other"}})");
    expect_refused(body, "tool_choice.function.name", "not in 'tools'");
    Json no_tools = minimal();
    no_tools["tool_choice"] = "required";
    expect_refused(no_tools, "tool_choice", "requires 'tools'");
}

TEST(OpenAiRequest, TestOnlyForcedOutputNeedsTheOption) {
    Json body = minimal();
    body["neural_forced_output"] = "<|channel|>final<|message|>hi<|return|>";
    expect_refused(body, "neural_forced_output", "unsupported parameter", strict());
    EXPECT_FALSE(parse_chat_request(body).forced_output);  // lenient: ignored
    ChatRequestOptions o;
    o.allow_test_options = true;
    EXPECT_EQ(parse_chat_request(body, o).forced_output.value_or(""),
              "<|channel|>final<|message|>hi<|return|>");
}

TEST(OpenAiRequest, RefusesWhatItCannotDo) {
    Json b = minimal();
    b.erase("messages");
    expect_refused(b, "messages", "'messages' is required");
    b = minimal();
    b.erase("model");
    expect_refused(b, "model", "'model' is required");
    b = minimal();
    b["messages"] = Json::array();
    expect_refused(b, "messages", "must not be empty");
    b = minimal();
    b["messages"] = "hi";
    expect_refused(b, "messages", "must be an array");
    b = minimal();
    b["messages"][0]["role"] = "wizard";
    expect_refused(b, "messages[0].role", "'wizard'");
    b = minimal();
    b["messages"][0]["content"] = 5;
    expect_refused(b, "messages[0].content", "must be a string or an array");
    b = minimal();
    b["messages"][0]["content"] =
        Json::parse(R"([{"type": "image_url", "image_url": {"url": "x"}}])");
    expect_refused(b, "messages[0].content[0].type", "not supported (text only)");
    b = minimal();
    b["n"] = 2;
    expect_refused(b, "n", "one choice per request");
    b = minimal();
    b["temperature"] = "hot";
    expect_refused(b, "temperature", "must be a number");
    b = minimal();
    b["temperature"] = 3;
    expect_refused(b, "temperature", "between 0 and 2");
    b = minimal();
    b["max_tokens"] = 0;
    expect_refused(b, "max_tokens", "'max_tokens' must be from 1 to 1073741824, got 0");
    // Past the limit, int32 and int64: the message quotes the number given, never a wrapped one.
    b["max_tokens"] = 2147483647;
    expect_refused(b, "max_tokens", "'max_tokens' must be from 1 to 1073741824, got 2147483647");
    b["max_tokens"] = Json::parse("9223372036854775808");
    expect_refused(b, "max_tokens",
                   "'max_tokens' must be from 1 to 1073741824, got 9223372036854775808");
    b["max_tokens"] = Json::parse("18446744073709551615");
    expect_refused(b, "max_tokens", "got 18446744073709551615");
    b.erase("max_tokens");
    b["max_completion_tokens"] = -3;
    expect_refused(b, "max_completion_tokens",
                   "'max_completion_tokens' must be from 1 to 1073741824, got -3");
    b.erase("max_completion_tokens");
    b = minimal();
    b["max_tokens"] = 1.5;
    expect_refused(b, "max_tokens", "must be an integer");
    b = minimal();
    b["logprobs"] = true;
    b["top_logprobs"] = 21;
    expect_refused(b, "top_logprobs", "'top_logprobs' must be between 0 and 20, got 21");
    b["top_logprobs"] = -1;
    expect_refused(b, "top_logprobs", "between 0 and 20");
    b.erase("logprobs");
    b["top_logprobs"] = 2;
    expect_refused(b, "top_logprobs", "needs 'logprobs': true");
    b = minimal();
    b["presence_penalty"] = 3;
    expect_refused(b, "presence_penalty", "between -2 and 2");
    b = minimal();
    b["repetition_penalty"] = 0;
    expect_refused(b, "repetition_penalty", "(0, 10]");
    b = minimal();
    b["functions"] = Json::array();
    b["tools"] = Json::array();
    expect_refused(b, "functions", "either 'tools' or the legacy 'functions'");
    b = minimal();
    b["stream_options"] = "yes";
    expect_refused(b, "stream_options", "must be an object");
    b = minimal();
    b["reasoning_effort"] = "extreme";
    expect_refused(b, "reasoning_effort", "none, minimal, low, medium, high or xhigh");
    b = minimal();
    b["stop"] = Json::parse(R"(["a", "b", "c", "d", "e"])");
    expect_refused(b, "stop", "at most 4");
    b = minimal();
    b["tools"] = Json::parse(R"([{"type": "function", "function": {"name": "bad name"}}])");
    expect_refused(b, "tools[0].function.name", "letters, digits");
    b = minimal();
    b["messages"] = Json::parse(R"([{"role": "tool", "content": "orphan"}])");
    expect_refused(b, "messages[0]", "no assistant message before it called a tool");
    b = minimal();
    b["messages"][0]["surprise"] = 1;
    expect_refused(b, "messages[0].surprise", "unsupported parameter", strict());
    b = minimal();
    b["response_format"] = Json::parse(R"({"type": "yaml"})");
    expect_refused(b, "response_format.type", "json_schema");
}

TEST(OpenAiRequest, ChatTemplateKwargsCarryTheReasoningEffort) {
    // llama.cpp's servers take the effort as a template variable; the same body works here.
    Json b = minimal();
    b["chat_template_kwargs"] = Json{{"reasoning_effort", "low"}};
    ChatRequest r = parse_chat_request(b, strict());
    EXPECT_EQ(r.system.reasoning_effort, chat::ReasoningEffort::low);
    EXPECT_THAT(prompt_text(r), HasSubstr("Reasoning: low"));
    b["reasoning_effort"] = "none";  // also low: they agree
    EXPECT_EQ(parse_chat_request(b).system.reasoning_effort, chat::ReasoningEffort::low);
    b["reasoning_effort"] = "high";
    expect_refused(b, "chat_template_kwargs.reasoning_effort", "disagree");
    b = minimal();
    b["chat_template_kwargs"] = Json{{"reasoning_effort", "huge"}};
    expect_refused(b, "chat_template_kwargs.reasoning_effort", "none, minimal, low");
    b["chat_template_kwargs"] = Json{{"reasoning_effort", 3}};
    expect_refused(b, "chat_template_kwargs.reasoning_effort", "");
    b["chat_template_kwargs"] = "low";
    expect_refused(b, "chat_template_kwargs", "an object");
    // Other template variables belong to other models' templates: ignored and named, or refused
    // under --strict.
    b["chat_template_kwargs"] = Json{{"enable_thinking", false}, {"reasoning_effort", "high"}};
    r = parse_chat_request(b);
    EXPECT_EQ(r.system.reasoning_effort, chat::ReasoningEffort::high);
    EXPECT_EQ(r.ignored_fields, std::vector<std::string>{"chat_template_kwargs.enable_thinking"});
    expect_refused(b, "chat_template_kwargs.enable_thinking", "unsupported parameter", strict());
}

TEST(OpenAiRequest, LenientParsingIgnoresUnknownFieldsAndNamesThem) {
    Json b = minimal();
    b["modalities"] = Json::array();
    b["frobnicate"] = 1;
    b["messages"].push_back(Json{{"role", "user"}, {"content", "two"}, {"surprise", 1}});
    b["messages"][0]["surprise"] = 2;
    const ChatRequest r = parse_chat_request(b);
    EXPECT_EQ(r.ignored_fields,
              (std::vector<std::string>{"modalities", "frobnicate", "messages[].surprise"}));
    ASSERT_EQ(r.history.size(), 2u);
    EXPECT_EQ(r.history[1].text(), "two");
    // Known fields with values the server cannot honour are still refused.
    b["n"] = 2;
    expect_refused(b, "n", "");
    Json c = Json::parse(R"({"model": "m", "prompt": "x", "suffix_v2": 1})");
    EXPECT_EQ(parse_completion_request(c).ignored_fields, std::vector<std::string>{"suffix_v2"});
    EXPECT_THROW(parse_completion_request(c, {}, true), RequestError);
}

TEST(OpenAiRequest, SeedGivenOrNot) {
    EXPECT_FALSE(parse_chat_request(minimal()).seed_given);
    Json b = minimal();
    b["seed"] = 0;
    const ChatRequest r = parse_chat_request(b);
    EXPECT_TRUE(r.seed_given);
    EXPECT_EQ(r.sampling.seed, 0u);
}

TEST(OpenAiRequest, StructuredOutputCompilesAConstraint) {
    EXPECT_FALSE(parse_chat_request(minimal()).constraint);
    Json b = minimal();
    b["response_format"] = Json::parse(R"({"type": "json_object"})");
    auto r = parse_chat_request(b);
    ASSERT_TRUE(r.constraint && r.constraint->final_answer);
    {
        chat::JsonRecognizer rec(*r.constraint->final_answer);
        EXPECT_TRUE(rec.feed("{\"a\":[1]}") && rec.complete());
    }
    b["response_format"] = Json::parse(R"({"type": "json_schema", "json_schema": {"name": "n",
        "strict": true, "schema": {"type": "object", "properties": {"x": {"enum": [1, 2]}},
        "required": ["x"], "additionalProperties": false}}})");
    r = parse_chat_request(b);
    ASSERT_TRUE(r.constraint && r.constraint->final_answer);
    {
        chat::JsonRecognizer rec(*r.constraint->final_answer);
        EXPECT_TRUE(rec.feed("{\"x\":2}") && rec.complete());
        chat::JsonRecognizer bad(*r.constraint->final_answer);
        EXPECT_FALSE(bad.feed("{\"x\":3}"));
    }
    b["response_format"]["json_schema"]["schema"]["properties"]["x"] =
        Json::parse(R"({"type": "string", "pattern": "a{2000}"})");
    // What the grammar cannot enforce is left out of the constraint and named in a notice;
    // --strict refuses it.
    r = parse_chat_request(b);
    ASSERT_EQ(r.notices.size(), 1u);
    EXPECT_THAT(r.notices[0],
                HasSubstr("'response_format.json_schema.schema': not enforced while sampling: "
                          "pattern with a repetition count above 1000 at offset 7 (at "
                          "/properties/x/pattern)"));
    {
        chat::JsonRecognizer rec(*r.constraint->final_answer);
        EXPECT_TRUE(rec.feed("{\"x\":\"zz\"}") && rec.complete());
    }
    expect_refused(b, "response_format.json_schema.schema",
                   "cannot enforce: pattern with a repetition count", strict());
    // A feature no automaton expresses is a 400 without --strict too.
    b["response_format"]["json_schema"]["schema"]["properties"]["x"]["pattern"] = "^(?=a)";
    expect_refused(b, "response_format.json_schema.schema",
                   "'/properties/x/pattern': the pattern uses a lookahead (?= / (?! at offset 1");

    // Strict tools get a grammar; others do not. tool_choice none drops them.
    Json t = minimal();
    t["tools"] = Json::parse(kWeatherTools);
    t["tools"].push_back(Json::parse(R"({"type": "function", "function": {"name": "strict_one",
        "strict": true, "parameters": {"type": "object", "properties": {"q": {"type": "string"}},
        "required": ["q"], "additionalProperties": false}}})"));
    r = parse_chat_request(t);
    ASSERT_TRUE(r.constraint);
    EXPECT_FALSE(r.constraint->final_answer);
    EXPECT_EQ(r.constraint->function_arguments.size(), 1u);
    EXPECT_TRUE(r.constraint->function_arguments.count("strict_one"));
    t["tool_choice"] = "none";
    EXPECT_FALSE(parse_chat_request(t).constraint);
    t["tool_choice"] = "auto";
    t["tools"][1]["function"]["parameters"]["properties"]["q"]["minLength"] = 1;
    t["tools"][1]["function"]["parameters"]["properties"]["q"]["format"] = "email";
    r = parse_chat_request(t);
    EXPECT_TRUE(r.notices.empty());
    {
        chat::JsonRecognizer rec(*r.constraint->function_arguments.at("strict_one"));
        EXPECT_FALSE(rec.feed("{\"q\":\"\"}"));  // minLength 1 is enforced
    }
    t["tools"][1]["function"]["parameters"]["properties"]["q"]["pattern"] = "(.)\\1";
    expect_refused(t, "tools[1].function.parameters", "the pattern uses a backreference \\1");
}

// The refusals clients ran into (issue 43), now accepted: each with what it maps to.
TEST(OpenAiRequest, ClientFieldsThatUsedToBeRefused) {
    // zod's .int() / .min() / .email() / unions / $ref in a strict tool.
    Json t = minimal();
    t["tools"] = Json::parse(R"([{"type": "function", "function": {"name": "add", "strict": true,
        "parameters": {"type": "object", "additionalProperties": false, "required": ["a", "who"],
          "properties": {
            "a": {"type": "integer", "minimum": -9007199254740991, "maximum": 9007199254740991},
            "who": {"anyOf": [{"$ref": "#/$defs/person"}, {"type": "null"}]}},
          "$defs": {"person": {"type": "object", "required": ["email"],
            "additionalProperties": false,
            "properties": {"email": {"type": "string", "format": "email", "minLength": 3}}}}}}}])");
    ChatRequest r = parse_chat_request(t);
    EXPECT_TRUE(r.notices.empty());
    chat::JsonRecognizer rec(*r.constraint->function_arguments.at("add"));
    EXPECT_TRUE(rec.feed(R"({"a":-12,"who":{"email":"a@b.co"}})") && rec.complete());
    chat::JsonRecognizer big(*r.constraint->function_arguments.at("add"));
    EXPECT_FALSE(big.feed(R"({"a":9007199254740992)"));

    // Efforts OpenAI added map to gpt-oss's three.
    for (const auto& [name, effort] : std::vector<std::pair<std::string, chat::ReasoningEffort>>{
             {"none", chat::ReasoningEffort::low},
             {"minimal", chat::ReasoningEffort::low},
             {"xhigh", chat::ReasoningEffort::high}}) {
        Json b = minimal();
        b["reasoning_effort"] = name;
        EXPECT_EQ(parse_chat_request(b).system.reasoning_effort, effort) << name;
    }
    // stream_options without a stream says nothing.
    Json b = minimal();
    b["stream_options"] = Json::parse(R"({"include_usage": true})");
    r = parse_chat_request(b);
    EXPECT_FALSE(r.stream);
    EXPECT_FALSE(r.include_usage);
    // Hosted tool types are dropped, with a notice.
    b = minimal();
    b["tools"] = Json::parse(R"([{"type": "code_interpreter"}, {"type": "function",
        "function": {"name": "f"}}])");
    r = parse_chat_request(b);
    ASSERT_EQ(r.developer.tools.size(), 1u);
    EXPECT_EQ(r.developer.tools[0].tools.size(), 1u);
    ASSERT_EQ(r.notices.size(), 1u);
    EXPECT_THAT(r.notices[0], HasSubstr("'code_interpreter'"));
}

TEST(OpenAiRequest, LegacyFunctionsAreTools) {
    Json b = Json::parse(R"({"model": "m",
      "functions": [{"name": "get_weather", "parameters": {"type": "object",
                     "properties": {"city": {"type": "string"}}}}],
      "function_call": {"name": "get_weather"},
      "messages": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": null,
         "function_call": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}},
        {"role": "function", "name": "get_weather", "content": "{\"temp\":3}"}]})");
    const ChatRequest r = parse_chat_request(b, strict());
    ASSERT_EQ(r.developer.tools.size(), 1u);
    EXPECT_EQ(r.developer.tools[0].tools[0].name, "get_weather");
    EXPECT_EQ(r.tool_choice, ToolChoice::named);
    EXPECT_EQ(r.tool_choice_name, "get_weather");
    ASSERT_EQ(r.history.size(), 3u);
    EXPECT_EQ(r.history[1].recipient.value_or(""), "functions.get_weather");
    EXPECT_EQ(r.history[1].text(), "{\"city\":\"Oslo\"}");
    EXPECT_EQ(r.history[2].role, chat::Role::tool);
    EXPECT_EQ(r.history[2].name.value_or(""), "functions.get_weather");
    b.erase("function_call");
    b["function_call"] = "none";
    EXPECT_EQ(parse_chat_request(b).tool_choice, ToolChoice::none);
}

TEST(OpenAiRequest, CompletionRequests) {
    CompletionRequest r = parse_completion_request(Json::parse(
        R"({"model": "m", "prompt": "Once upon", "max_tokens": 5, "stop": "\n", "seed": 3})"));
    EXPECT_EQ(std::get<std::string>(r.prompt), "Once upon");
    EXPECT_EQ(r.max_tokens, 5);
    EXPECT_EQ(r.stop, std::vector<std::string>{"\n"});
    CompletionRequest ids =
        parse_completion_request(Json::parse(R"({"model": "m", "prompt": [1, 2, 3]})"));
    EXPECT_EQ(std::get<std::vector<TokenId>>(ids.prompt), (std::vector<TokenId>{1, 2, 3}));
    EXPECT_EQ(ids.max_tokens, 16);
    EXPECT_THROW(parse_completion_request(Json::parse(R"({"model": "m", "prompt": ["a", "b"]})")),
                 RequestError);
    EXPECT_THROW(parse_completion_request(Json::parse(R"({"model": "m", "prompt": ""})")),
                 RequestError);
    EXPECT_THROW(
        parse_completion_request(Json::parse(R"({"model": "m", "prompt": "x", "echo": true})")),
        RequestError);
    EXPECT_THROW(parse_completion_request(Json::parse(R"({"model": "m", "prompt": [-1]})")),
                 RequestError);
}

// The legacy route's logprobs (an integer 0-5) in OpenAI's legacy format.
TEST(OpenAiRequest, CompletionLogprobsInTheLegacyFormat) {
    Json b = Json::parse(R"({"model": "m", "prompt": "x"})");
    EXPECT_EQ(parse_completion_request(b).logprobs, -1);
    b["logprobs"] = nullptr;
    EXPECT_EQ(parse_completion_request(b).logprobs, -1);
    for (int n : {0, 3, 5}) {
        b["logprobs"] = n;
        EXPECT_EQ(parse_completion_request(b).logprobs, n);
    }
    for (const Json& bad : {Json(6), Json(-1), Json(true), Json("2")}) {
        b["logprobs"] = bad;
        try {
            parse_completion_request(b);
            ADD_FAILURE() << "accepted logprobs " << bad.dump();
        } catch (const RequestError& e) {
            EXPECT_EQ(e.param(), "logprobs") << e.what();
        }
    }
    b["logprobs"] = 9;
    EXPECT_THAT(test::error_of([&] { parse_completion_request(b); }),
                HasSubstr("'logprobs' must be between 0 and 5, got 9"));

    std::vector<chat::TokenLogprob> tokens(3);
    tokens[0].bytes = "Hel";
    tokens[0].logprob = -0.5;
    tokens[0].top = {{"Hel", -0.5}, {"He", -1.25}};
    tokens[1].bytes = "\xc3";  // the first byte of "é": written as bytes
    tokens[1].logprob = -2;
    tokens[2].bytes = "lo";
    tokens[2].logprob = -0.25;
    tokens[2].top = {{"p", -0.125}};  // the chosen token is added to its alternatives
    const Json lp = completion_logprobs_json(tokens, {0, 3, 4});
    EXPECT_EQ(lp["tokens"], Json::parse(R"(["Hel", "bytes:\\xc3", "lo"])"));
    EXPECT_EQ(lp["token_logprobs"], Json::parse("[-0.5, -2, -0.25]"));
    EXPECT_EQ(lp["top_logprobs"][0], Json::parse(R"({"Hel": -0.5, "He": -1.25})"));
    EXPECT_EQ(lp["top_logprobs"][1], Json::parse(R"({"bytes:\\xc3": -2})"));
    EXPECT_EQ(lp["top_logprobs"][2], Json::parse(R"({"p": -0.125, "lo": -0.25})"));
    EXPECT_EQ(lp["text_offset"], Json::parse("[0, 3, 4]"));
    const Json body = text_completion("id", 1, "m", "Hel\xc3\xa9lo", "stop", {}, lp);
    EXPECT_EQ(body["choices"][0]["logprobs"], lp);
    EXPECT_TRUE(text_completion("id", 1, "m", "x", "stop", {})["choices"][0]["logprobs"].is_null());
    EXPECT_EQ(
        text_completion_chunk("id", 1, "m", "x", nullptr, false, lp)["choices"][0]["logprobs"], lp);
}

TEST(OpenAiBody, DepthLimitAndSyntax) {
    EXPECT_NO_THROW(parse_body(R"({"a": [[[1]]], "s": "[[[[[[[[[[[[[["})"));
    std::string deep(100, '[');
    deep += std::string(100, ']');
    try {
        parse_body("{\"a\":" + deep + "}");
        ADD_FAILURE() << "deep JSON accepted";
    } catch (const RequestError& e) {
        EXPECT_THAT(e.what(), HasSubstr("deeper than 64"));
    }
    // A million brackets are rejected by the scan, long before a parser could recurse on them.
    EXPECT_THROW(parse_body(std::string(1000000, '[')), RequestError);
    EXPECT_THROW(parse_body("{\"a\": 1"), RequestError);
    EXPECT_THROW(parse_body("[1, 2]"), RequestError);
    EXPECT_THROW(parse_body("{\"a\": \"\xff\xfe\"}"), RequestError);  // not UTF-8
    try {
        parse_body("\xff{");
    } catch (const RequestError& e) {
        // The error text can be serialized (no raw invalid bytes in it).
        EXPECT_NO_THROW(error_body(e.what(), "invalid_request_error").dump());
    }
}

TEST(OpenAiResponse, ChatCompletionObject) {
    ChatResult r;
    r.reasoning = "thinking";
    r.tool_calls.push_back(chat::ToolCall{"get_weather", "{\"city\":\"Paris\"}"});
    r.finish = chat::FinishReason::tool_calls;
    r.usage = Usage{10, 5, 4};
    Json j = chat_completion("chatcmpl-1", 123, "tiny", r);
    EXPECT_EQ(j["object"], "chat.completion");
    const Json& m = j["choices"][0]["message"];
    EXPECT_TRUE(m["content"].is_null());
    EXPECT_EQ(m["reasoning_content"], "thinking");
    EXPECT_EQ(m["reasoning"], "thinking");
    EXPECT_EQ(m["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(m["tool_calls"][0]["id"], tool_call_id("chatcmpl-1", 0));
    EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
    EXPECT_EQ(j["usage"]["total_tokens"], 15);
    EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
}

TEST(OpenAiResponse, TimingsInLlamaServersShape) {
    ChatResult r;
    r.content = "hi";
    r.usage = Usage{100, 8, 40};
    EXPECT_FALSE(chat_completion("chatcmpl-1", 1, "tiny", r).contains("timings"));
    r.timings = Timings{60, 120.0, 8, 70.0};
    const Json t = chat_completion("chatcmpl-1", 1, "tiny", r)["timings"];
    EXPECT_EQ(t["prompt_n"], 60);
    EXPECT_DOUBLE_EQ(t["prompt_ms"].get<double>(), 120.0);
    EXPECT_DOUBLE_EQ(t["prompt_per_token_ms"].get<double>(), 2.0);
    EXPECT_DOUBLE_EQ(t["prompt_per_second"].get<double>(), 500.0);
    EXPECT_EQ(t["predicted_n"], 8);
    EXPECT_DOUBLE_EQ(t["predicted_ms"].get<double>(), 70.0);
    EXPECT_DOUBLE_EQ(t["predicted_per_token_ms"].get<double>(), 8.75);
    EXPECT_DOUBLE_EQ(t["predicted_per_second"].get<double>(), 8000.0 / 70.0);
    // A one-token answer has no decode interval: its rates are null, not inf.
    r.timings = Timings{1, 5.0, 1, 0.0};
    const Json one = chat_completion("chatcmpl-1", 1, "tiny", r)["timings"];
    EXPECT_TRUE(one["predicted_per_second"].is_null());
    EXPECT_DOUBLE_EQ(one["predicted_per_token_ms"].get<double>(), 0.0);
    EXPECT_NO_THROW(one.dump());
}

TEST(OpenAiResponse, ChunksFollowTheEventStream) {
    ChatChunkEncoder enc("chatcmpl-2", 1, "tiny", true);
    EXPECT_EQ(enc.role_chunk()["choices"][0]["delta"]["role"], "assistant");
    EXPECT_TRUE(enc.role_chunk().contains("usage"));
    chat::ParserEvent e;
    e.type = chat::EventType::reasoning;
    e.text = "hm";
    EXPECT_EQ((*enc.event_chunk(e))["choices"][0]["delta"]["reasoning_content"], "hm");
    e.type = chat::EventType::tool_call_start;
    e.function_name = "f";
    e.recipient = "functions.f";
    Json start = *enc.event_chunk(e);
    EXPECT_EQ(start["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "f");
    EXPECT_EQ(start["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
    e.type = chat::EventType::tool_call_arguments;
    e.text = "{\"a\"";
    EXPECT_EQ(
        (*enc.event_chunk(e))["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"],
        "{\"a\"");
    e.type = chat::EventType::message_end;
    EXPECT_FALSE(enc.event_chunk(e));
    // A built-in tool call is not a function call: its arguments are reasoning.
    e.type = chat::EventType::tool_call_start;
    e.function_name.clear();
    e.recipient = "browser.search";
    EXPECT_FALSE(enc.event_chunk(e));
    e.type = chat::EventType::tool_call_arguments;
    e.text = "q";
    EXPECT_EQ((*enc.event_chunk(e))["choices"][0]["delta"]["reasoning"], "q");
    EXPECT_EQ(enc.tool_calls(), 1u);
    EXPECT_EQ(enc.finish_chunk(chat::FinishReason::stop)["choices"][0]["finish_reason"], "stop");
    Json usage = enc.usage_chunk(Usage{3, 2, 1});
    EXPECT_TRUE(usage["choices"].empty());
    EXPECT_EQ(usage["usage"]["completion_tokens"], 2);
}

TEST(OpenAiResponse, ErrorObjects) {
    Json e = error_body("bad \xff input", "invalid_request_error", "messages", "invalid_value");
    EXPECT_NO_THROW(e.dump());
    EXPECT_EQ(e["error"]["param"], "messages");
    EXPECT_EQ(e["error"]["type"], "invalid_request_error");
    EXPECT_TRUE(error_body("x", "server_error")["error"]["param"].is_null());
}

}  // namespace
TEST(OpenAiRequest, LogprobsAndTopLogprobs) {
    Json b = minimal();
    EXPECT_EQ(parse_chat_request(b).logprobs, -1);
    b["logprobs"] = false;
    EXPECT_EQ(parse_chat_request(b).logprobs, -1);
    b["logprobs"] = true;
    EXPECT_EQ(parse_chat_request(b).logprobs, 0);
    b["top_logprobs"] = 20;
    EXPECT_EQ(parse_chat_request(b).logprobs, 20);
}

TEST(OpenAiEncoding, LogprobsEntries) {
    chat::TokenLogprob t;
    t.bytes = "hi";
    t.logprob = -0.25;
    t.top = {{"hi", -0.25}, {"\xe2\x80", -2.0}};  // part of a UTF-8 sequence
    const Json j = logprobs_json({t});
    ASSERT_EQ(j.size(), 1u);
    EXPECT_EQ(j[0]["token"], "hi");
    EXPECT_EQ(j[0]["logprob"], -0.25);
    EXPECT_EQ(j[0]["bytes"], Json::parse("[104, 105]"));
    ASSERT_EQ(j[0]["top_logprobs"].size(), 2u);
    EXPECT_EQ(j[0]["top_logprobs"][1]["token"], "bytes:\\xe2\\x80");
    EXPECT_EQ(j[0]["top_logprobs"][1]["bytes"], Json::parse("[226, 128]"));
    EXPECT_FALSE(j[0]["top_logprobs"][1].contains("top_logprobs"));
    // Non-streaming: choices[0].logprobs.content when asked for, else null.
    ChatResult r;
    r.content = "hi";
    r.finish = chat::FinishReason::stop;
    EXPECT_TRUE(chat_completion("id", 0, "m", r)["choices"][0]["logprobs"].is_null());
    r.logprobs = std::vector<chat::TokenLogprob>{t};
    const Json c = chat_completion("id", 0, "m", r);
    EXPECT_EQ(c["choices"][0]["logprobs"]["content"], j);
    // Streaming: a content chunk carries its tokens.
    ChatChunkEncoder enc("id", 0, "m", false);
    chat::ParserEvent e;
    e.type = chat::EventType::content;
    e.text = "hi";
    e.logprobs = {t};
    const auto chunk = enc.event_chunk(e);
    ASSERT_TRUE(chunk);
    EXPECT_EQ((*chunk)["choices"][0]["logprobs"]["content"], j);
    e.logprobs.clear();
    EXPECT_TRUE((*enc.event_chunk(e))["choices"][0]["logprobs"].is_null());
}

}  // namespace neural::openai
