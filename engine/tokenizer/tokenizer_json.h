// Reads the parts of a Hugging Face tokenizer.json that a byte-level BPE tokenizer needs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace neural {

enum class TokenKind : std::uint8_t { absent, ordinary, special };

struct TokenizerFile {
    std::vector<std::string> tokens;  // [id] raw bytes (ordinary) or text (special); "" if absent
    std::vector<TokenKind> kinds;     // [id], same length as tokens
    std::size_t merge_count = 0;      // model.merges entries (validated, not used: rank == id)
    std::vector<std::string> split_regexes;  // every pre_tokenizer "Regex" pattern, in order
};

// Parses `path` with a SAX reader: the file is ~27 MB, mostly merges we only validate, and
// building a DOM for it would double load time. Throws neural::Error naming the file.
TokenizerFile read_tokenizer_json(const std::filesystem::path& path);

}  // namespace neural
