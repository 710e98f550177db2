#include "runtime/constraint.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "neural/error.h"

namespace neural {

TokenVocabulary::TokenVocabulary(const Tokenizer& tokenizer, std::size_t sampleable) {
    text_.resize(sampleable);
    special_.assign(sampleable, 0);
    for (std::size_t i = 0; i < sampleable; ++i) {
        const auto id = static_cast<TokenId>(i);
        if (!tokenizer.is_valid(id) || tokenizer.is_special(id)) {
            special_[i] = 1;
            continue;
        }
        text_[i] = tokenizer.token_bytes(id);
        if (!text_[i].empty()) order_.push_back(id);
    }
    std::sort(order_.begin(), order_.end(),
              [&](TokenId a, TokenId b) { return text(a) < text(b); });
    lcp_.assign(order_.size(), 0);
    for (std::size_t k = 1; k < order_.size(); ++k) {
        const std::string& a = text(order_[k - 1]);
        const std::string& b = text(order_[k]);
        std::uint32_t l = 0;
        while (l < a.size() && l < b.size() && a[l] == b[l]) ++l;
        lcp_[k] = l;
    }
}

void TokenVocabulary::mask(const chat::JsonRecognizer& rec,
                           std::vector<std::uint8_t>& allowed) const {
    allowed.assign(text_.size(), 0);
    // states[d]: the recogniser after the first d bytes of the current token; valid up to `depth`.
    std::vector<chat::JsonRecognizer> states(1, rec);
    std::size_t depth = 0;
    std::size_t dead = SIZE_MAX;  // the previous token's shortest rejected prefix, if any
    for (std::size_t k = 0; k < order_.size(); ++k) {
        const std::string& s = text(order_[k]);
        const std::size_t common = lcp_[k];
        if (dead != SIZE_MAX && common >= dead) continue;  // starts with the rejected prefix
        dead = SIZE_MAX;
        depth = std::min(depth, common);
        if (states.size() < s.size() + 1) states.resize(s.size() + 1, rec);
        bool ok = true;
        for (std::size_t d = depth; d < s.size(); ++d) {
            states[d + 1] = states[d];
            if (!states[d + 1].feed(s[d])) {
                dead = d + 1;
                depth = d;
                ok = false;
                break;
            }
            depth = d + 1;
        }
        if (ok) allowed[static_cast<std::size_t>(order_[k])] = 1;
    }
}

void TokenVocabulary::mask_plain(const chat::JsonRecognizer& rec,
                                 std::vector<std::uint8_t>& allowed) const {
    allowed.assign(text_.size(), 0);
    for (std::size_t i = 0; i < text_.size(); ++i) {
        if (special_[i] || text_[i].empty()) continue;
        chat::JsonRecognizer r = rec;
        allowed[i] = r.feed(text_[i]) ? 1 : 0;
    }
}

ActiveConstraint::ActiveConstraint(std::shared_ptr<const chat::JsonSchemaGrammar> grammar,
                                   TokenId terminator)
    : grammar_(std::move(grammar)), rec_(*grammar_), terminator_(terminator) {}

bool ActiveConstraint::allows(const TokenVocabulary& vocab, TokenId id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= vocab.size()) return false;
    if (id == terminator_) return rec_.complete();
    if (vocab.is_special(id) || vocab.text(id).empty()) return false;
    chat::JsonRecognizer r = rec_;
    return r.feed(vocab.text(id));
}

void ActiveConstraint::mask_logits(const TokenVocabulary& vocab, std::vector<float>& logits,
                                   std::vector<std::uint8_t>& scratch) const {
    vocab.mask(rec_, scratch);
    const std::size_t n = std::min(logits.size(), scratch.size());
    const bool end = rec_.complete();
    for (std::size_t i = 0; i < n; ++i) {
        const bool ok = scratch[i] != 0 || (end && static_cast<TokenId>(i) == terminator_);
        if (!ok) logits[i] = -std::numeric_limits<float>::infinity();
    }
    for (std::size_t i = n; i < logits.size(); ++i)
        logits[i] = -std::numeric_limits<float>::infinity();
}

bool ActiveConstraint::accept(const TokenVocabulary& vocab, TokenId id) {
    if (!allows(vocab, id)) return false;
    if (id != terminator_) rec_.feed(vocab.text(id));
    return true;
}

ReplyFraming::ReplyFraming(const Tokenizer& tok, const std::vector<std::string>& functions,
                           const std::vector<std::string>& text_functions) {
    auto special = [&](const char* name) {
        const std::optional<TokenId> id = tok.special_id(name);
        if (!id) fail("the tokenizer has no {} token: not a harmony (gpt-oss) tokenizer", name);
        return *id;
    };
    const TokenId start = special("<|start|>"), channel = special("<|channel|>"),
                  message = special("<|message|>"), constrain = special("<|constrain|>");
    end_of_reasoning_ = special("<|end|>");
    const TokenId ret = special("<|return|>"), call = special("<|call|>");
    start_ = {{start, {}}, {-1, "assistant"}};
    patterns_.push_back(
        {{{channel, {}}, {-1, "analysis"}, {message, {}}}, Part::reasoning, end_of_reasoning_});
    patterns_.push_back({{{channel, {}}, {-1, "final"}, {message, {}}}, Part::body, ret});
    for (const std::string& f : functions) {
        if (f.empty()) continue;
        // A tool of another namespace is named "namespace.name", a function just "name".
        const std::string recipient = f.find('.') != std::string::npos ? f : "functions." + f;
        if (std::find(text_functions.begin(), text_functions.end(), f) != text_functions.end()) {
            patterns_.push_back({{{channel, {}}, {-1, "commentary to=" + recipient}, {message, {}}},
                                 Part::body,
                                 call});
            continue;
        }
        patterns_.push_back({{{channel, {}},
                              {-1, "commentary to=" + recipient + " "},
                              {constrain, {}},
                              {-1, "json"},
                              {message, {}}},
                             Part::body,
                             call});
    }
    first_final_header_ = {channel};
    for (TokenId t : tok.encode("final")) first_final_header_.push_back(t);
    first_final_header_.push_back(message);
    final_header_ = {end_of_reasoning_, start};
    for (TokenId t : tok.encode("assistant")) final_header_.push_back(t);
    final_header_.insert(final_header_.end(), first_final_header_.begin(),
                         first_final_header_.end());
    // A header under way when the limit comes is finished by the model: at worst one token per
    // byte of the longest pattern after <|start|>assistant.
    std::size_t longest = 0;
    for (const Pattern& p : patterns_) {
        std::size_t n = 1 + 9;  // <|start|> assistant
        for (const Piece& piece : p.pieces) n += piece.special >= 0 ? 1 : piece.text.size();
        longest = std::max(longest, n);
    }
    worst_to_final_ = longest + final_header_.size();
    open_header(false);
}

void ReplyFraming::open_header(bool after_message) {
    part_ = Part::header;
    open_.clear();
    cursors_.clear();
    for (std::size_t k = 0; k < patterns_.size(); ++k) {
        if (final_only_ && k != kFinal) continue;
        Pattern q = patterns_[k];
        if (after_message) q.pieces.insert(q.pieces.begin(), start_.begin(), start_.end());
        cursors_.push_back({open_.size(), 0, 0});
        open_.push_back(std::move(q));
    }
}

std::optional<TokenId> ReplyFraming::forced(std::int64_t step) {
    if (queued_ < queue_.size()) return queue_[queued_];
    if (step < final_from_ || final_only_) return std::nullopt;
    if (part_ == Part::reasoning) {
        // The budget is spent: end the reasoning and open the final channel.
        final_only_ = true;
        queue_ = final_header_;
        queued_ = 0;
        return queue_[queued_];
    }
    if (part_ == Part::header && cursors_.size() == open_.size() &&
        std::all_of(cursors_.begin(), cursors_.end(),
                    [](const Cursor& c) { return c.piece == 0 && c.offset == 0; })) {
        // A header not yet begun: the final one, as the canonical tokens.
        final_only_ = true;
        const bool after_message = open_.front().pieces.front().special == start_.front().special;
        open_header(after_message);
        if (after_message) {
            queue_.assign(final_header_.begin() + 1, final_header_.end());  // no <|end|>
        } else {
            queue_ = first_final_header_;
        }
        queued_ = 0;
        return queue_[queued_];
    }
    return std::nullopt;  // a header under way, or a body: they finish
}

bool ReplyFraming::advance(const Cursor& c, const TokenVocabulary& vocab, TokenId id,
                           Cursor& out) const {
    const std::vector<Piece>& pieces = open_[c.pattern].pieces;
    if (c.piece >= pieces.size()) return false;
    const Piece& piece = pieces[c.piece];
    out = c;
    if (piece.special >= 0) {
        if (id != piece.special) return false;
        ++out.piece;
        return true;
    }
    if (id < 0 || static_cast<std::size_t>(id) >= vocab.size() || vocab.is_special(id))
        return false;
    const std::string& t = vocab.text(id);
    if (t.empty() || c.offset + t.size() > piece.text.size() ||
        piece.text.compare(c.offset, t.size(), t) != 0) {
        return false;
    }
    out.offset += t.size();
    if (out.offset == piece.text.size()) {
        ++out.piece;
        out.offset = 0;
    }
    return true;
}

bool ReplyFraming::allows(const TokenVocabulary& vocab, TokenId id) const {
    if (queued_ < queue_.size()) return id == queue_[queued_];
    switch (part_) {
        case Part::header: {
            Cursor next;
            return std::any_of(cursors_.begin(), cursors_.end(),
                               [&](const Cursor& c) { return advance(c, vocab, id, next); });
        }
        case Part::reasoning:
        case Part::body:
            if (id == end_) return true;
            return id >= 0 && static_cast<std::size_t>(id) < vocab.size() &&
                   !vocab.is_special(id) && !vocab.text(id).empty();
        case Part::ended:
            return false;
    }
    return false;
}

void ReplyFraming::mask_logits(const TokenVocabulary& vocab, std::vector<float>& logits) const {
    for (std::size_t i = 0; i < logits.size(); ++i) {
        if (!allows(vocab, static_cast<TokenId>(i)))
            logits[i] = -std::numeric_limits<float>::infinity();
    }
}

bool ReplyFraming::accept(const TokenVocabulary& vocab, TokenId id) {
    if (!allows(vocab, id)) return false;
    if (queued_ < queue_.size()) ++queued_;
    switch (part_) {
        case Part::header: {
            std::vector<Cursor> live;
            for (const Cursor& c : cursors_) {
                Cursor next;
                if (advance(c, vocab, id, next)) live.push_back(next);
            }
            cursors_ = std::move(live);
            for (const Cursor& c : cursors_) {
                const Pattern& p = open_[c.pattern];
                if (c.piece == p.pieces.size()) {  // <|message|>: the header is complete
                    part_ = p.then;
                    end_ = p.end;
                    break;
                }
            }
            break;
        }
        case Part::reasoning:
            if (id == end_) open_header(true);
            break;
        case Part::body:
            if (id == end_) part_ = Part::ended;
            break;
        case Part::ended:
            break;
    }
    return true;
}

}  // namespace neural
