// o200k_harmony byte-level BPE tokenizer, loaded from a Hugging Face tokenizer.json.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace neural {

using TokenId = std::int32_t;
class GgufFile;
struct TokenizerFile;

class Tokenizer {
public:
    // Loads `tokenizer.json` (HF format: model.vocab, model.merges, added_tokens,
    // pre_tokenizer). Throws neural::Error naming the file on anything malformed.
    static Tokenizer load(const std::filesystem::path& tokenizer_json);
    // The same tokenizer from a GGUF's metadata (tokenizer.ggml.*: tokenizer/tokenizer_gguf.h).
    static Tokenizer load(const GgufFile& gguf);

    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    ~Tokenizer();

    // Encodes UTF-8 text. With allow_special == false (the default) text that looks like a
    // special token ("<|start|>") is ordinary text; with true, exact special-token strings become
    // their ids. Invalid UTF-8 is encoded byte-wise (byte-level BPE covers all 256 bytes).
    std::vector<TokenId> encode(std::string_view text, bool allow_special = false) const;

    // Concatenated bytes of the tokens (may end in an incomplete UTF-8 sequence; streaming
    // callers hold such tails back). Special tokens decode to their text. Unknown ids throw.
    std::string decode(std::span<const TokenId> ids) const;

    // The raw bytes of one token; throws neural::Error for an id outside the vocabulary.
    const std::string& token_bytes(TokenId id) const;

    // Id of a special token by its text ("<|start|>"), if it exists.
    std::optional<TokenId> special_id(std::string_view text) const;
    bool is_special(TokenId id) const;
    bool is_valid(TokenId id) const;

    // One past the largest id the tokenizer defines (200019 for o200k_harmony).
    std::size_t vocab_size() const;

private:
    struct Impl;
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    // Checks `parsed` (pre-tokenizer, vocabulary, merges) and builds the tokenizer; `source`
    // names it in errors.
    static Tokenizer build(TokenizerFile parsed, std::string source);
    std::unique_ptr<Impl> impl_;
};

}  // namespace neural
