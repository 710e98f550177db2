// Constrained sampling for structured output: the token strings of the vocabulary (computed once
// per tokenizer) and the masks that keep a JSON recogniser (chat/json_schema_grammar.h) valid.
//
// Per step the sampler first draws from the whole distribution and checks only the drawn token
// (fast: the model mostly picks valid tokens); after a few rejected draws it masks the whole
// vocabulary with TokenVocabulary::mask, which walks the recogniser over the token strings in
// sorted order so that tokens sharing a prefix share the work (and a dead prefix rules out every
// token starting with it). ConstraintOptions::full_mask always masks first: the reference path.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/json_schema_grammar.h"
#include "tokenizer/tokenizer.h"

namespace neural {

class TokenVocabulary {
public:
    // Token ids [0, sampleable): their bytes; special tokens are kept apart.
    TokenVocabulary(const Tokenizer& tokenizer, std::size_t sampleable);

    std::size_t size() const { return text_.size(); }
    bool is_special(TokenId id) const { return special_[static_cast<std::size_t>(id)] != 0; }
    const std::string& text(TokenId id) const { return text_[static_cast<std::size_t>(id)]; }

    // allowed[id] = 1 for every ordinary token whose bytes `rec` accepts, else 0 (special tokens
    // are 0: the caller decides about terminators). `allowed` is resized to size().
    void mask(const chat::JsonRecognizer& rec, std::vector<std::uint8_t>& allowed) const;
    // The same, token by token without sharing prefixes (the reference for mask()).
    void mask_plain(const chat::JsonRecognizer& rec, std::vector<std::uint8_t>& allowed) const;

private:
    std::vector<std::string> text_;
    std::vector<std::uint8_t> special_;
    std::vector<TokenId> order_;      // ordinary non-empty tokens, sorted by bytes
    std::vector<std::uint32_t> lcp_;  // common prefix with the previous token in order_
};

// What the session constrains: the final answer, and the arguments of calls to the named
// functions (strict tools). Grammars are shared, immutable.
struct OutputConstraint {
    std::shared_ptr<const chat::JsonSchemaGrammar> final_answer;
    // Keyed by function name ("get_weather"), or by "namespace.name" for a tool of a namespace
    // other than functions.
    std::map<std::string, std::shared_ptr<const chat::JsonSchemaGrammar>> function_arguments;
    // Every function the reply may call (strict or not): the recipients the framing allows
    // ("get_weather" for functions.get_weather; "namespace.name" for a tool of a namespace).
    std::vector<std::string> functions;
    // Of those, freeform (custom) tools: their call's body is plain text, so its header has no
    // <|constrain|>json; a grammar for it (JsonSchemaGrammar::text) is in function_arguments.
    std::vector<std::string> text_functions;
    // Reference path (tests): mask the whole vocabulary at every constrained step.
    bool full_mask = false;

    bool empty() const { return !final_answer && function_arguments.empty(); }
};

// Counters of one turn's constrained steps.
struct ConstraintStats {
    std::int64_t steps = 0;        // tokens sampled under a constraint
    std::int64_t full_masks = 0;   // of those, steps that needed the whole-vocabulary mask
    std::int64_t completions = 0;  // messages closed by the shortest completion (token budget)
    std::int64_t forced = 0;       // framing tokens forced: the final channel after the budget
};

// One constrained message in progress: the recogniser and the token that ends the message.
class ActiveConstraint {
public:
    ActiveConstraint(std::shared_ptr<const chat::JsonSchemaGrammar> grammar, TokenId terminator);

    // True when `id` may come next: a token whose bytes keep the value valid, or the terminator
    // once the value is complete.
    bool allows(const TokenVocabulary& vocab, TokenId id) const;
    // Sets logits of every token that may not come next to -infinity.
    void mask_logits(const TokenVocabulary& vocab, std::vector<float>& logits,
                     std::vector<std::uint8_t>& scratch) const;
    // Advances past a chosen token; false when the token does not fit (a forced token).
    bool accept(const TokenVocabulary& vocab, TokenId id);
    const chat::JsonRecognizer& recognizer() const { return rec_; }
    TokenId terminator() const { return terminator_; }
    bool complete() const { return rec_.complete(); }

private:
    std::shared_ptr<const chat::JsonSchemaGrammar> grammar_;
    chat::JsonRecognizer rec_;
    TokenId terminator_;
};

// The harmony framing of the assistant's reply while structured output is required (docs/API.md
// "Structured output"): only the headers the format allows,
//   <|channel|>analysis<|message|>                                  reasoning, ends <|end|>
//   <|channel|>final<|message|>                                     the answer, ends <|return|>
//   <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>   a call, ends <|call|>
//   <|channel|>commentary to=functions.NAME<|message|>              a freeform tool's call
// (the call only for the functions given; a tool of a namespace is addressed as to=NS.NAME), each after <|start|>assistant from the second message
// on; reasoning takes ordinary tokens and <|end|>; an answer or call body takes ordinary tokens
// and its end token (ActiveConstraint narrows a constrained body further). From the step
// `final_from` on, a reasoning message is ended and the final header follows as forced tokens,
// so a model that never writes the final channel by itself still answers. Headers are matched
// token by token: a special token must be the pattern's special token there, an ordinary token's
// bytes must continue a pattern's text without crossing a special token.
class ReplyFraming {
public:
    enum class Part { header, reasoning, body, ended };

    ReplyFraming(const Tokenizer& tok, const std::vector<std::string>& functions,
                 const std::vector<std::string>& text_functions = {});

    Part part() const { return part_; }
    // The step from which the final channel is forced (default: never).
    std::int64_t final_from() const { return final_from_; }
    void set_final_from(std::int64_t step) { final_from_ = std::max<std::int64_t>(0, step); }
    // Tokens the framing takes at worst before the final answer's body once `final_from` is
    // reached: a header under way (one token a byte) and the forced end and final header.
    std::size_t worst_case_to_final() const { return worst_to_final_; }

    // Before choosing token `step`: once the limit is reached, queues the end of the reasoning
    // and the final header. Then the token that must come next, if any.
    std::optional<TokenId> forced(std::int64_t step);
    // True when `id` may come next (header, reasoning, or a free body).
    bool allows(const TokenVocabulary& vocab, TokenId id) const;
    // Sets the logits of every token that may not come next to -infinity.
    void mask_logits(const TokenVocabulary& vocab, std::vector<float>& logits) const;
    // Advances past a chosen token; false when it breaks the framing (a forced token).
    bool accept(const TokenVocabulary& vocab, TokenId id);

private:
    struct Piece {
        TokenId special = -1;  // a special token, or
        std::string text;      // ordinary text (never empty)
    };
    struct Pattern {
        std::vector<Piece> pieces;
        Part then = Part::body;
        TokenId end = -1;  // the token that ends the message it opens
    };
    struct Cursor {
        std::size_t pattern = 0, piece = 0, offset = 0;
    };
    void open_header(bool after_message);
    bool advance(const Cursor& c, const TokenVocabulary& vocab, TokenId id, Cursor& out) const;

    std::vector<Pattern> patterns_;  // the first-message forms; later ones get <|start|>assistant
    std::vector<Piece> start_;       // <|start|> assistant
    std::vector<Pattern> open_;      // the patterns of the header under way
    std::vector<Cursor> cursors_;    // where each live pattern stands
    static constexpr std::size_t kFinal = 1;  // patterns_[kFinal]: the final header
    std::vector<TokenId> final_header_;  // <|end|><|start|>assistant<|channel|>final<|message|>
    std::vector<TokenId> first_final_header_;  // <|channel|>final<|message|>
    std::vector<TokenId> queue_;
    std::size_t queued_ = 0;
    Part part_ = Part::header;
    TokenId end_ = -1;  // the open message's end token
    TokenId end_of_reasoning_ = -1;
    std::int64_t final_from_ = INT64_MAX;
    std::size_t worst_to_final_ = 0;
    bool final_only_ = false;
};

}  // namespace neural
