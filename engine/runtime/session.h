// A chat session: one conversation (harmony messages) and the KV cache of its rendered tokens.
// Every turn renders the whole conversation, keeps the cached prefix that still matches and
// processes only the tokens after it, so adding a turn costs the new tokens, and editing or
// regenerating an earlier turn re-processes from the first changed token, not from scratch.
#pragma once

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/kv_cache.h"
#include "chat/message.h"
#include "chat/parser.h"
#include "chat/render.h"
#include "runtime/constraint.h"
#include "runtime/model.h"
#include "runtime/sampler.h"

namespace neural {

struct TurnOptions {
    int max_tokens = 2048;
    SamplingParams sampling;
    // Emitted instead of sampling for the first forced_tokens.size() steps; sampling continues
    // after them. Everything after the sampler (parser, stop tokens, history) is the real path.
    // Used to pin a tool-call header (a named tool_choice) and by tests that need tool calls or
    // reasoning from a random-weight model.
    std::vector<TokenId> forced_tokens;
    // The beginning of the reply, already written (Continue a reply cut by the token limit:
    // chat::render_reply_start). Processed with the prompt, so its K/V come from the cache when
    // the previous turn generated these tokens; read by the parser without events; the result's
    // reasoning and content include it and generation continues after it.
    std::vector<TokenId> prefill_tokens;
    // Text stop sequences, matched in the visible answer (content and preambles): generation
    // stops at the first one, which is not part of the reply (finish reason stop).
    std::vector<std::string> stop_sequences;
    // A caller-owned cancel flag (the server's per-request flag). When set, the forward pass
    // watches it instead of cancel()'s flag, so a cancel that arrives before the turn starts is
    // not lost to respond() resetting the session's own flag.
    const std::atomic<bool>* cancel = nullptr;
    // Structured output (runtime/constraint.h): the final answer and the arguments of strict
    // function calls are sampled so that they match their JSON schema. The reasoning's text stays
    // free; a constrained message is closed with its shortest valid completion when the token budget
    // would otherwise cut it. Null: nothing is constrained.
    std::shared_ptr<const OutputConstraint> constraint;
    // With a constraint, the reply's harmony framing is constrained too (ReplyFraming): only
    // analysis, final and calls to the constraint's functions, and from step `reasoning_budget`
    // on (-1: auto, 3/4 of max_tokens, less where the final answer needs the room) the reasoning
    // is ended and the final channel forced, so the answer is always written.
    std::int64_t reasoning_budget = -1;
    // The API's logprobs: -1 off; else the content tokens' events and TurnResult::logprobs carry
    // each token's log-probability with this many most likely alternatives (0-20).
    int logprobs = -1;
};

struct TurnStats {
    std::int64_t prompt_tokens = 0;  // tokens of the rendered prompt
    std::int64_t cached_tokens = 0;  // of those, reused from the KV cache
    std::int64_t generated_tokens = 0;
    std::int64_t reasoning_tokens = 0;  // of those, tokens of analysis messages (with headers)
    ConstraintStats constraint;
    double prompt_seconds = 0;       // processing the new prompt tokens
    double first_token_seconds = 0;  // request start -> first generated token
    double decode_seconds = 0;       // first -> last generated token
};

struct TurnResult {
    std::string reasoning;  // analysis channel
    std::string content;    // final answer (and preambles)
    std::vector<chat::ToolCall> tool_calls;
    std::vector<chat::TokenLogprob> logprobs;  // of `content`'s tokens, with options.logprobs
    chat::FinishReason finish = chat::FinishReason::length;
    bool cancelled = false;
    TurnStats stats;
};

// The conversation a turn renders: the system message, the developer message when it carries
// anything (instructions, tools, a response format), then the history. ChatSession::conversation()
// and the desktop's prompt count (its context meter) both build it here.
chat::Conversation turn_conversation(const chat::SystemContent& system,
                                     const chat::DeveloperContent& developer,
                                     const std::vector<chat::Message>& history);

class ChatSession {
public:
    explicit ChatSession(Model& model);

    // Conversation setup. The system message carries identity, dates and the reasoning effort;
    // the developer message the instructions and function tools.
    chat::SystemContent& system() { return system_; }
    chat::DeveloperContent& developer() { return developer_; }
    void set_reasoning(chat::ReasoningEffort effort) { system_.reasoning_effort = effort; }
    void set_instructions(std::optional<std::string> text) {
        developer_.instructions = std::move(text);
    }

    // The turns after the system/developer messages (user, assistant, tool).
    const std::vector<chat::Message>& history() const { return history_; }
    void add_user(std::string text);
    // Replaces message `index` (edit-and-resend) and drops everything after it.
    void edit(std::size_t index, std::string text);
    // Forgets the conversation (and the cache).
    void reset();
    // Replaces system, developer content and history but keeps the KV cache: the next respond()
    // reuses the longest prefix the new rendering shares with the cached tokens. An API server
    // gets the whole history with every request, so this is its prompt cache.
    void set_conversation(chat::SystemContent system, chat::DeveloperContent developer,
                          std::vector<chat::Message> history);

    // Generates the assistant's reply to the conversation and appends it to the history.
    // `on_event` sees the parser's streaming events (reasoning/content deltas, tool calls).
    // A cancel() from another thread stops promptly; the partial reply is kept and the session
    // stays usable.
    TurnResult respond(const TurnOptions& options,
                       const std::function<void(const chat::ParserEvent&)>& on_event = {});
    void cancel() { cancel_.store(true); }

    // The whole conversation as harmony messages (system, developer, history).
    chat::Conversation conversation() const;
    std::int64_t cached_tokens() const { return static_cast<std::int64_t>(cached_.size()); }
    // Of those, the ones the next turn may reuse (the prefix a prompt pass computed, where the
    // backend's prompt bits differ from decode's: Backend::prompt_matches_decode).
    std::int64_t reusable_cached_tokens() const {
        return static_cast<std::int64_t>(reusable_tokens());
    }

    // Versioned conversation file (JSON). With `with_kv` the KV state goes into PATH.kv beside
    // it, so a restored conversation continues without re-processing. Both are written atomically
    // (temp file, fsync, rename), the KV file first; the JSON then names it with its checksum
    // ("kv": {file, tokens, checksum}), so the JSON is the commit point of the pair: a crash
    // between the two renames leaves the old JSON, whose checksum the new PATH.kv does not match.
    // Saving without KV removes a PATH.kv left by an earlier save (after the JSON is in place).
    void save(const std::filesystem::path& path, bool with_kv = false) const;
    // Restores messages, and the KV state when the JSON names a PATH.kv whose checksum matches
    // (and that matches this model). Any other KV file -- missing, damaged, of another model, or
    // not the one this JSON was saved with (an interrupted save, a stale file) -- is not loaded:
    // the conversation loads, a warning says why (also kv_restore_note()), and the next turn
    // recomputes the K/V. Files of format version 1 without the "kv" entry load PATH.kv as before.
    void load(const std::filesystem::path& path);
    // Why the last load() did not restore a KV file it found or expected; empty when it did, or
    // when there was none to restore.
    const std::string& kv_restore_note() const { return kv_note_; }

private:
    Model& model_;
    chat::SystemContent system_;
    chat::DeveloperContent developer_;
    std::vector<chat::Message> history_;
    KvCache cache_;
    std::vector<TokenId> cached_;  // the tokens whose K/V are in cache_, in order
    // Of those, the leading ones whose K/V a prompt pass (two or more tokens) computed. Where the
    // backend's prompt bits differ from decode's (Model::prompt_matches_decode), only these are
    // reused: a token a decode step computed is re-run with the next prompt, so a conversation
    // gives the same K/V -- and a seed the same reply -- with the cache and from a fresh load.
    std::size_t prompt_cached_ = 0;
    // Where the context ended when the cached positions were computed (chat::context_end).
    std::int64_t context_end_ = 0;
    // The cached tokens a new prompt may reuse (all of them where prompt and decode agree).
    std::size_t reusable_tokens() const;
    std::atomic<bool> cancel_{false};
    std::string kv_note_;
    std::shared_ptr<const TokenVocabulary> vocab_;  // built on the first constrained turn
};

// Finds text stop sequences in streamed text. Text that may still turn out to be the start of a
// stop sequence is held back, so nothing from a stop sequence on is ever released.
class StopMatcher {
public:
    explicit StopMatcher(std::vector<std::string> stops);

    bool active() const { return !stops_.empty(); }
    // Adds text and returns what can be released now. On a match it returns the text before the
    // match, stopped() becomes true and later calls return "".
    std::string push(std::string_view text);
    // Releases the held-back text (the stream or message ended without a match).
    std::string flush();
    bool stopped() const { return stopped_; }
    // Position of the earliest stop sequence in `text`, or npos.
    std::size_t find(std::string_view text) const;

private:
    std::vector<std::string> stops_;
    std::string held_;
    bool stopped_ = false;
};

// Today's date as YYYY-MM-DD (local time), for the system message.
std::string today_iso_date();

}  // namespace neural
