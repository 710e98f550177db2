// Harmony prompt rendering. A conversation is first rendered to a list of segments (special
// tokens and plain text pieces); plain text is only ever encoded with Tokenizer::encode(text,
// false), so text from users, tools or the model can never turn into control tokens.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/message.h"
#include "tokenizer/tokenizer.h"

namespace neural::chat {

struct Segment {
    bool special = false;  // true: `text` is the name of one special token ("<|start|>")
    std::string text;
};

// A rendered prompt. The text pieces are the ones harmony encodes separately (role, " to=X",
// channel, content type, content), so tokens() reproduces harmony's ids exactly.
class Prompt {
public:
    const std::vector<Segment>& segments() const { return segments_; }
    // Special tokens spelled as their text; what the model "sees".
    std::string text() const;
    // Throws neural::Error if a special token is unknown to the tokenizer.
    std::vector<TokenId> tokens(const Tokenizer& tokenizer) const;

    void add_special(std::string name);
    void add_text(std::string text);  // empty text adds nothing
    void append(const Prompt& other);

private:
    std::vector<Segment> segments_;
};

// How analysis (chain-of-thought) messages of earlier turns are treated.
enum class AnalysisPolicy {
    keep,  // render every message
    // harmony's auto_drop_analysis: when the last assistant message is on the final channel,
    // drop the analysis messages placed before the first final message (later ones are kept).
    harmony,
    // harmony's history rules taken literally (docs/CHAT_FORMAT.md "History for the next turn"):
    // drop the analysis messages of every turn whose last assistant message is a final answer;
    // an unfinished turn (tool loop) keeps everything.
    finished_turns,
};

struct RenderOptions {
    AnalysisPolicy analysis = AnalysisPolicy::finished_turns;
};

// The conversation as-is (no generation prompt). Every message ends with <|end|>, or <|call|>
// for an assistant message addressed to a tool.
Prompt render_conversation(const Conversation& conversation, const RenderOptions& options = {});

// The conversation followed by `<|start|>` + next_role: the prompt to generate from.
Prompt render_for_completion(const Conversation& conversation, Role next_role = Role::assistant,
                             const RenderOptions& options = {});

// Where a rendered conversation's context ends: the position after its first `<|start|>assistant`
// (the header of the first assistant message, or the generation prompt when there is none yet);
// 0 when the tokens hold none. Everything before it -- system, developer (tools), the first
// user message -- is what the CPU's context prompt path computes (ForwardOptions::context_end).
// A position's side depends only on the tokens before it (text never encodes to `<|start|>`),
// so two conversations with a common prefix agree on it over that prefix.
std::int64_t context_end(std::span<const TokenId> tokens, const Tokenizer& tokenizer);

// The beginning of an assistant reply that was cut off (Continue), as it follows the
// `<|start|>assistant` of render_for_completion: the reasoning as an analysis message (closed
// when an answer follows), then the answer so far on the final channel, left open. Both empty:
// nothing. Generation continues the open message.
Prompt render_reply_start(const std::string& reasoning, const std::string& content);

// One message. `conversation_has_functions` adds the "Calls to these tools ..." line to a system
// message (harmony derives it from the developer message of the same conversation).
Prompt render_message(const Message& message, bool conversation_has_functions = false);

// The bodies of system / developer messages (what goes between <|message|> and <|end|>).
std::string render_system_content(const SystemContent& content, bool conversation_has_functions);
std::string render_developer_content(const DeveloperContent& content);

// `## NAME` section of a tool namespace, including the TypeScript-like `namespace NAME {...}`.
std::string render_tool_namespace(const ToolNamespace& ns);

// harmony's TypeScript-like rendering of a JSON Schema (docs/CHAT_FORMAT.md "Function tools").
// `indent` is the indentation of the properties of the object being rendered.
std::string json_schema_to_typescript(const nlohmann::ordered_json& schema,
                                      const std::string& indent = "");

}  // namespace neural::chat
