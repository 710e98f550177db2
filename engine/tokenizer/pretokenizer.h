// Splits text into pre-tokens with the o200k pattern (docs/CHAT_FORMAT.md "Tokens") on PCRE2.
#pragma once

#include <string_view>
#include <vector>

namespace neural {

class PreTokenizer {
public:
    // The o200k_base / o200k_harmony split pattern, exactly as tokenizer.json and tiktoken
    // spell it.
    static const std::string_view kO200kPattern;

    // Compiles kO200kPattern, with whitespace spelled as Unicode White_Space (see the .cpp), JIT
    // when PCRE2 has it. Throws neural::Error if PCRE2 refuses.
    PreTokenizer();
    ~PreTokenizer();
    PreTokenizer(const PreTokenizer&) = delete;
    PreTokenizer& operator=(const PreTokenizer&) = delete;

    // Appends the pre-tokens of `text` to `pieces`, in order; together they cover `text`
    // exactly. Bytes the pattern cannot match (invalid UTF-8) come out as pieces of their own,
    // one per maximal run. Safe to call from several threads at once.
    void split(std::string_view text, std::vector<std::string_view>& pieces) const;

    bool jit() const { return jit_; }

private:
    void* code_ = nullptr;  // pcre2_code_8*; void keeps pcre2.h out of this header
    bool jit_ = false;
};

}  // namespace neural
