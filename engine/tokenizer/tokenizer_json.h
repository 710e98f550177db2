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
    // model.merges as written, byte-level keys one after another in one buffer (left, right,
    // left, right, ...; merge_ends[2i] ends merge i's left key, [2i + 1] its right key):
    // Tokenizer::load checks them against the vocab and drops them.
    std::string merge_keys;
    std::vector<std::uint32_t> merge_ends;
    std::vector<std::string> split_regexes;  // every pre_tokenizer "Regex" pattern, in order
};

// Parses `path` with a SAX reader: the file is ~27 MB, mostly merges we only validate, and
// building a DOM for it would double load time. Throws neural::Error naming the file.
TokenizerFile read_tokenizer_json(const std::filesystem::path& path);

}  // namespace neural
