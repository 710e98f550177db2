#include "runtime/constraint.h"

#include <algorithm>
#include <limits>
#include <numeric>

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

}  // namespace neural
