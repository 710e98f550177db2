// Parsing of harmony output: a streaming parser fed one generated token at a time, and a helper
// that parses a whole token sequence into messages (docs/CHAT_FORMAT.md "The streaming parser").
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chat/message.h"
#include "chat/utf8_stream.h"
#include "tokenizer/tokenizer.h"

namespace neural::chat {

enum class FinishReason {
    stop,        // <|return|> (or <|endoftext|>): the answer is complete
    tool_calls,  // <|call|> after a message addressed to a tool: run the tool
    length,      // the stream ended without a stop token (token limit, cancellation)
};

std::string_view finish_reason_name(FinishReason reason);  // "stop", "tool_calls", "length"

struct ParseOptions {
    // Role of the first message when the input starts right after `<|start|>ROLE` (the
    // generation prompt). nullopt: the input starts with <|start|> and the header names the role.
    std::optional<Role> role = Role::assistant;
    // Strict: malformed output (header without <|message|>, stray control tokens, leftover header
    // words) throws neural::Error, like harmony's default mode. Non-strict recovers and keeps
    // whatever can be kept; it never throws on token input.
    bool strict = false;
    // A header longer than this is taken as a missing <|message|> (the model is writing content
    // into the header); non-strict turns it into content of the channel found so far.
    std::size_t max_header_tokens = 128;
};

enum class EventType {
    message_start,        // `message`: the parsed header (content empty)
    reasoning,            // `text`: analysis-channel text
    content,              // `text`: answer text (final channel, no or unknown channel)
    preamble,             // `text`: commentary without recipient, a user-visible note
    tool_call_start,      // `recipient`, `function_name`: an assistant message to a tool
    tool_call_arguments,  // `text`: arguments of the open tool call
    message_end,          // `message`: the complete message
    finish,               // `finish_reason`
};

// A generated token's log-probability (the API's logprobs): the log of its probability under the
// model's distribution (log-softmax of the raw logits, temperature 1, before penalties and the
// sampling filters), with the most likely tokens at that step, most likely first.
struct TokenLogprob {
    std::string bytes;  // the token's bytes (may be part of a UTF-8 sequence)
    double logprob = 0;
    struct Alternative {
        std::string bytes;
        double logprob = 0;
    };
    std::vector<Alternative> top;
};

struct ParserEvent {
    EventType type = EventType::content;
    std::string text;
    Message message;
    // Full recipient ("functions.get_weather", "browser.search", "python").
    std::string recipient;
    // The function name when the recipient is in the "functions" namespace, else empty (a
    // built-in tool call, which must not be exposed as a Chat Completions function call).
    std::string function_name;
    FinishReason finish_reason = FinishReason::stop;
    // content / preamble events with logprobs requested: the tokens whose text this event
    // delivers (a token whose bytes end in an incomplete UTF-8 sequence comes with the next).
    std::vector<TokenLogprob> logprobs;
};

// Streaming harmony parser. Never exposes control tokens as text. Content bytes that end in an
// incomplete UTF-8 sequence are held back until the next token completes them; invalid bytes
// and unknown token ids become U+FFFD. After a strict-mode error the parser is unusable.
class StreamParser {
public:
    explicit StreamParser(const Tokenizer& tokenizer, ParseOptions options = {});

    // Processes one token, appending the events it causes to `events`.
    void feed(TokenId token, std::vector<ParserEvent>& events);
    std::vector<ParserEvent> feed(TokenId token);

    // The stream is over: closes an open message (flushing held-back bytes) and, unless a stop
    // token already finished the stream, emits finish with `reason` (length: cut off).
    void end_of_stream(std::vector<ParserEvent>& events,
                       FinishReason reason = FinishReason::length);
    std::vector<ParserEvent> end_of_stream(FinishReason reason = FinishReason::length);

    // Completed messages so far.
    const std::vector<Message>& messages() const { return messages_; }
    // Header of the message being read, once its <|message|> was seen.
    const std::optional<Message>& current_message() const { return current_; }
    // Content of the message being read ("" when none is open).
    const std::string& current_content() const { return current_content_; }
    // Text the last feed / end_of_stream added to the open message's content; nullopt if none.
    const std::optional<std::string>& last_content_delta() const { return last_delta_; }
    // Set by <|return|> / <|call|> / <|endoftext|> and by end_of_stream.
    std::optional<FinishReason> finish_reason() const { return finish_reason_; }
    // True after a stop token with no message started since (generation should stop here).
    bool stopped() const { return stopped_; }

private:
    enum class State { expect_start, header, content };
    enum class Route { reasoning, content, preamble, tool_call };

    void start_header(std::optional<Role> preset);
    void header_token(TokenId token, std::vector<ParserEvent>& events);
    void content_token(TokenId token, std::vector<ParserEvent>& events);
    void expect_start_token(TokenId token, std::vector<ParserEvent>& events);
    void begin_message(Message header, std::vector<ParserEvent>& events);
    void add_content(const std::string& text, std::vector<ParserEvent>& events);
    void close_message(std::vector<ParserEvent>& events);
    // Non-strict: a header that never got its <|message|> becomes a message whose content is
    // the header text; `keep_open` leaves it open for more content.
    void recover_header(bool keep_open, std::vector<ParserEvent>& events);
    void finish(FinishReason reason, std::vector<ParserEvent>& events);
    bool is_terminator(TokenId token) const;
    std::string_view special_name(TokenId token) const;

    const Tokenizer& tokenizer_;
    ParseOptions options_;

    struct Specials {
        std::optional<TokenId> start, message, end, channel, constrain, ret, call, endoftext;
    } ids_;

    State state_ = State::expect_start;
    std::optional<Role> header_role_;  // preset role of the header being read
    std::string header_text_;
    std::size_t header_tokens_ = 0;

    std::optional<Message> current_;
    Route route_ = Route::content;
    std::string current_content_;
    Utf8Stream utf8_;

    std::vector<Message> messages_;
    std::optional<std::string> last_delta_;
    std::optional<FinishReason> finish_reason_;
    bool stopped_ = false;
    bool ended_ = false;
};

// A function call of a completion, in Chat Completions terms.
struct ToolCall {
    std::string name;       // "get_weather" (recipient without "functions.")
    std::string arguments;  // raw JSON text as generated
};

// The non-streaming view of a completion (docs/CHAT_FORMAT.md "The OpenAI API on top of harmony"):
// feed it every event.
// Preambles count as content; built-in tool calls (browser, python) are not function calls, their
// text counts as reasoning, and a <|call|> that only addressed them finishes as stop.
struct Completion {
    std::string reasoning;
    std::string content;
    std::vector<ToolCall> tool_calls;
    std::optional<FinishReason> finish_reason;

    void add(const ParserEvent& event);

private:
    bool in_function_call_ = false;
};

// Parses a whole token sequence (feeds every token, then signals end of stream) and returns the
// messages. With `options.strict` malformed input throws neural::Error.
std::vector<Message> parse_messages(const Tokenizer& tokenizer, std::span<const TokenId> tokens,
                                    const ParseOptions& options = {});

// Parses a message header (the text between <|start|> and <|message|>, special tokens spelled
// out) the way harmony does. `preset_role`: the role is known and not part of the text.
// Throws neural::Error on leftover words in strict mode.
Message parse_header(std::string_view text, std::optional<Role> preset_role, bool strict);

}  // namespace neural::chat
