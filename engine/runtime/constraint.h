// Constrained sampling for structured output: the token strings of the vocabulary (computed once
// per tokenizer) and the masks that keep a JSON recogniser (chat/json_schema_grammar.h) valid.
//
// Per step the sampler first draws from the whole distribution and checks only the drawn token
// (fast: the model mostly picks valid tokens); after a few rejected draws it masks the whole
// vocabulary with TokenVocabulary::mask, which walks the recogniser over the token strings in
// sorted order so that tokens sharing a prefix share the work (and a dead prefix rules out every
// token starting with it). ConstraintOptions::full_mask always masks first: the reference path.
#pragma once

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
    // Reference path (tests): mask the whole vocabulary at every constrained step.
    bool full_mask = false;

    bool empty() const { return !final_answer && function_arguments.empty(); }
};

// Counters of one turn's constrained steps.
struct ConstraintStats {
    std::int64_t steps = 0;        // tokens sampled under a constraint
    std::int64_t full_masks = 0;   // of those, steps that needed the whole-vocabulary mask
    std::int64_t completions = 0;  // messages closed by the shortest completion (token budget)
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

}  // namespace neural
