#include "chat/parser.h"

#include <algorithm>

#include "neural/error.h"

namespace neural::chat {

namespace {

constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kConstrain = "<|constrain|>";

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

std::vector<std::string> split_words(std::string_view s) {
    std::vector<std::string> words;
    std::size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && is_space(s[i])) ++i;
        std::size_t start = i;
        while (i < s.size() && !is_space(s[i])) ++i;
        if (i > start) words.emplace_back(s.substr(start, i - start));
    }
    return words;
}

// Removes `<|channel|>NAME` from `text` and returns NAME (the text after the marker up to
// whitespace or '<'); nullopt when there is no marker or the name is empty.
std::optional<std::string> take_channel(std::string& text) {
    std::size_t pos = text.find(kChannel);
    if (pos == std::string::npos) return std::nullopt;
    std::size_t start = pos + kChannel.size();
    std::size_t end = start;
    while (end < text.size() && !is_space(text[end]) && text[end] != '<') ++end;
    std::string name = text.substr(start, end - start);
    text.erase(pos, end - pos);
    if (name.empty()) return std::nullopt;
    return name;
}

// The model sometimes glues <|constrain|> to the previous word ("commentary<|constrain|>json").
std::string separate_constrain(std::string text) {
    std::size_t pos = 0;
    while ((pos = text.find(kConstrain, pos)) != std::string::npos) {
        if (pos > 0 && !is_space(text[pos - 1])) {
            text.insert(pos, 1, ' ');
            ++pos;
        }
        pos += kConstrain.size();
    }
    return text;
}

std::string strip_to(const std::string& word) {
    return word.starts_with("to=") ? word.substr(3) : word;
}

}  // namespace

std::string_view finish_reason_name(FinishReason reason) {
    switch (reason) {
        case FinishReason::stop:
            return "stop";
        case FinishReason::tool_calls:
            return "tool_calls";
        case FinishReason::length:
            return "length";
    }
    return "stop";
}

Message parse_header(std::string_view header_text, std::optional<Role> preset_role, bool strict) {
    std::string text(header_text);
    Message header;
    header.channel = take_channel(text);
    std::vector<std::string> words = split_words(separate_constrain(std::string(trim(text))));

    std::size_t first = 0;
    if (preset_role) {
        header.role = *preset_role;
        if (!words.empty() && words[0] == role_name(*preset_role)) first = 1;
    } else {
        if (words.empty()) {
            if (strict) fail("harmony message header has no role: '{}'", header_text);
            header.role = Role::assistant;
        } else {
            const std::string& author = words[0];
            first = 1;
            std::size_t colon = author.find(':');
            if (auto role = role_from_name(author)) {
                header.role = *role;
            } else if (auto named = role_from_name(std::string_view(author).substr(
                           0, colon == std::string::npos ? author.size() : colon));
                       named && colon != std::string::npos) {
                header.role = *named;  // "role:name"
                header.name = author.substr(colon + 1);
            } else {
                // A tool answering: its name is the author ("functions.x", "browser.search").
                header.role = Role::tool;
                header.name = author;
            }
        }
    }
    words.erase(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(first));

    if (!words.empty()) {
        std::string last = words.back();
        words.pop_back();
        if (last.starts_with("to=")) {
            header.recipient = last.substr(3);
        } else if (words.empty()) {
            header.recipient = last;
        } else {
            header.content_type = last;
            header.recipient = strip_to(words.back());
            words.pop_back();
        }
    }
    if (!words.empty() && strict) {
        fail("unexpected words in harmony message header: '{}'", header_text);
    }
    return header;
}

StreamParser::StreamParser(const Tokenizer& tokenizer, ParseOptions options)
    : tokenizer_(tokenizer), options_(options) {
    ids_.start = tokenizer.special_id("<|start|>");
    ids_.message = tokenizer.special_id("<|message|>");
    ids_.end = tokenizer.special_id("<|end|>");
    ids_.channel = tokenizer.special_id("<|channel|>");
    ids_.constrain = tokenizer.special_id("<|constrain|>");
    ids_.ret = tokenizer.special_id("<|return|>");
    ids_.call = tokenizer.special_id("<|call|>");
    ids_.endoftext = tokenizer.special_id("<|endoftext|>");
    if (!ids_.start || !ids_.message || !ids_.end) {
        fail("the tokenizer lacks the harmony special tokens <|start|> / <|message|> / <|end|>");
    }
    if (options_.role) start_header(options_.role);
}

std::vector<ParserEvent> StreamParser::feed(TokenId token) {
    std::vector<ParserEvent> events;
    feed(token, events);
    return events;
}

std::vector<ParserEvent> StreamParser::end_of_stream(FinishReason reason) {
    std::vector<ParserEvent> events;
    end_of_stream(events, reason);
    return events;
}

bool StreamParser::is_terminator(TokenId token) const {
    return token == ids_.end || token == ids_.ret || token == ids_.call || token == ids_.endoftext;
}

std::string_view StreamParser::special_name(TokenId token) const {
    if (tokenizer_.is_valid(token)) return tokenizer_.token_bytes(token);
    return "<invalid token>";
}

void StreamParser::feed(TokenId token, std::vector<ParserEvent>& events) {
    if (ended_) fail("harmony parser: token {} fed after the end of the stream", token);
    last_delta_.reset();
    switch (state_) {
        case State::expect_start:
            expect_start_token(token, events);
            break;
        case State::header:
            header_token(token, events);
            break;
        case State::content:
            content_token(token, events);
            break;
    }
}

void StreamParser::start_header(std::optional<Role> preset) {
    state_ = State::header;
    header_role_ = preset;
    header_text_.clear();
    header_tokens_ = 0;
    stopped_ = false;
}

void StreamParser::expect_start_token(TokenId token, std::vector<ParserEvent>& events) {
    if (token == ids_.start) {
        start_header(std::nullopt);
        return;
    }
    if (options_.strict) {
        fail("harmony parser: expected <|start|>, got token {} ('{}')", token, special_name(token));
    }
    if (token == ids_.end) return;  // stray terminator
    if (token == ids_.ret || token == ids_.endoftext) {
        if (!stopped_) finish(FinishReason::stop, events);
        return;
    }
    if (token == ids_.call) {
        if (!stopped_) finish(FinishReason::stop, events);
        return;
    }
    if (tokenizer_.is_valid(token) && tokenizer_.is_special(token) && token != ids_.channel &&
        token != ids_.constrain && token != ids_.message) {
        return;  // reserved or unused control token: nothing to show
    }
    // The model skipped `<|start|>assistant` and went on with a header or plain text.
    start_header(Role::assistant);
    header_token(token, events);
}

void StreamParser::header_token(TokenId token, std::vector<ParserEvent>& events) {
    if (token == ids_.message) {
        Message header = parse_header(header_text_, header_role_, options_.strict);
        begin_message(std::move(header), events);
        return;
    }
    if (is_terminator(token)) {
        if (options_.strict) {
            fail("harmony parser: '{}' ended the message header '{}' before <|message|>",
                 special_name(token), header_text_);
        }
        recover_header(false, events);
        state_ = State::expect_start;
        if (token == ids_.ret || token == ids_.endoftext || token == ids_.call) {
            finish(FinishReason::stop, events);
        }
        return;
    }
    if (token == ids_.start) {
        if (options_.strict) {
            fail("harmony parser: <|start|> inside the message header '{}'", header_text_);
        }
        recover_header(false, events);
        start_header(std::nullopt);
        return;
    }
    if (token == ids_.channel) {
        header_text_ += kChannel;
    } else if (token == ids_.constrain) {
        header_text_ += kConstrain;
    } else if (!tokenizer_.is_valid(token) || tokenizer_.is_special(token)) {
        if (options_.strict) {
            fail("harmony parser: unexpected token {} in a message header", token);
        }
        return;
    } else {
        header_text_ += tokenizer_.token_bytes(token);
    }
    if (++header_tokens_ > options_.max_header_tokens) {
        if (options_.strict) {
            fail("harmony parser: message header longer than {} tokens without <|message|>",
                 options_.max_header_tokens);
        }
        recover_header(true, events);
    }
}

void StreamParser::content_token(TokenId token, std::vector<ParserEvent>& events) {
    if (token == ids_.end) {
        close_message(events);
        state_ = State::expect_start;
        return;
    }
    if (token == ids_.ret || token == ids_.endoftext || token == ids_.call) {
        bool to_tool = current_ && current_->is_tool_call();
        close_message(events);
        state_ = State::expect_start;
        finish(token == ids_.call && to_tool ? FinishReason::tool_calls : FinishReason::stop,
               events);
        return;
    }
    if (!tokenizer_.is_valid(token)) {
        // An id outside the vocabulary has no bytes; it stands for one invalid character.
        add_content(utf8_.flush() + std::string(kReplacementCharacter), events);
        return;
    }
    if (tokenizer_.is_special(token)) {
        if (options_.strict) {
            fail("harmony parser: control token '{}' inside message content", special_name(token));
        }
        if (token == ids_.start) {  // the model forgot <|end|>
            close_message(events);
            start_header(std::nullopt);
        }
        return;
    }
    add_content(utf8_.push(tokenizer_.token_bytes(token)), events);
}

void StreamParser::begin_message(Message header, std::vector<ParserEvent>& events) {
    header.content = std::string();
    if (header.role == Role::assistant && header.is_tool_call()) {
        route_ = Route::tool_call;
    } else if (header.role == Role::assistant && header.channel == "analysis") {
        route_ = Route::reasoning;
    } else if (header.role == Role::assistant && header.channel == "commentary") {
        route_ = Route::preamble;
    } else {
        route_ = Route::content;
    }
    current_ = header;
    current_content_.clear();
    utf8_.reset();
    state_ = State::content;
    stopped_ = false;

    ParserEvent start;
    start.type = EventType::message_start;
    start.message = std::move(header);
    events.push_back(std::move(start));
    if (route_ == Route::tool_call) {
        ParserEvent call;
        call.type = EventType::tool_call_start;
        call.recipient = *current_->recipient;
        if (call.recipient.starts_with("functions.")) {
            call.function_name = call.recipient.substr(std::string_view("functions.").size());
        }
        events.push_back(std::move(call));
    }
}

void StreamParser::add_content(const std::string& text, std::vector<ParserEvent>& events) {
    if (text.empty()) return;
    current_content_ += text;
    if (last_delta_) {
        *last_delta_ += text;
    } else {
        last_delta_ = text;
    }
    ParserEvent delta;
    switch (route_) {
        case Route::reasoning:
            delta.type = EventType::reasoning;
            break;
        case Route::content:
            delta.type = EventType::content;
            break;
        case Route::preamble:
            delta.type = EventType::preamble;
            break;
        case Route::tool_call:
            delta.type = EventType::tool_call_arguments;
            break;
    }
    delta.text = text;
    events.push_back(std::move(delta));
}

void StreamParser::close_message(std::vector<ParserEvent>& events) {
    if (!current_) return;
    add_content(utf8_.flush(), events);
    Message message = std::move(*current_);
    message.content = std::move(current_content_);
    current_.reset();
    current_content_.clear();
    messages_.push_back(message);
    ParserEvent end;
    end.type = EventType::message_end;
    end.message = std::move(message);
    events.push_back(std::move(end));
}

void StreamParser::recover_header(bool keep_open, std::vector<ParserEvent>& events) {
    std::string text = header_text_;
    header_text_.clear();
    header_tokens_ = 0;

    Message header;
    header.channel = take_channel(text);
    std::string_view rest = trim(text);
    if (header_role_) {
        header.role = *header_role_;
    } else {
        header.role = Role::assistant;
        std::size_t end = 0;
        while (end < rest.size() && !is_space(rest[end]) && rest[end] != '<') ++end;
        if (auto role = role_from_name(rest.substr(0, end))) {
            header.role = *role;
            rest = trim(rest.substr(end));
        }
    }
    if (!keep_open && rest.empty() && !header.channel) return;  // nothing worth a message
    std::string body(rest);
    begin_message(std::move(header), events);
    add_content(utf8_.push(body), events);
    if (!keep_open) close_message(events);
}

void StreamParser::finish(FinishReason reason, std::vector<ParserEvent>& events) {
    finish_reason_ = reason;
    stopped_ = true;
    ParserEvent event;
    event.type = EventType::finish;
    event.finish_reason = reason;
    events.push_back(std::move(event));
}

void StreamParser::end_of_stream(std::vector<ParserEvent>& events, FinishReason reason) {
    if (ended_) return;
    last_delta_.reset();
    if (state_ == State::content) {
        close_message(events);
    } else if (state_ == State::header && !trim(header_text_).empty()) {
        if (options_.strict) {
            fail("harmony parser: the stream ended inside the message header '{}'", header_text_);
        }
        recover_header(false, events);
    }
    state_ = State::expect_start;
    ended_ = true;
    if (!stopped_) finish(reason, events);
}

void Completion::add(const ParserEvent& event) {
    switch (event.type) {
        case EventType::message_start:
            in_function_call_ = false;
            break;
        case EventType::reasoning:
            reasoning += event.text;
            break;
        case EventType::content:
        case EventType::preamble:
            content += event.text;
            break;
        case EventType::tool_call_start:
            in_function_call_ = !event.function_name.empty();
            if (in_function_call_) tool_calls.push_back(ToolCall{event.function_name, {}});
            break;
        case EventType::tool_call_arguments:
            if (in_function_call_) {
                tool_calls.back().arguments += event.text;
            } else {
                reasoning += event.text;
            }
            break;
        case EventType::message_end:
            in_function_call_ = false;
            break;
        case EventType::finish:
            finish_reason = event.finish_reason;
            if (finish_reason == FinishReason::tool_calls && tool_calls.empty()) {
                finish_reason = FinishReason::stop;
            }
            break;
    }
}

std::vector<Message> parse_messages(const Tokenizer& tokenizer, std::span<const TokenId> tokens,
                                    const ParseOptions& options) {
    StreamParser parser(tokenizer, options);
    std::vector<ParserEvent> events;
    for (TokenId token : tokens) {
        parser.feed(token, events);
        events.clear();
    }
    parser.end_of_stream(events);
    return parser.messages();
}

}  // namespace neural::chat
