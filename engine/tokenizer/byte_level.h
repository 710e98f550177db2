// The GPT-2 byte-level alphabet used by Hugging Face tokenizer.json vocab keys: every byte is
// written as one printable code point so that byte strings can be JSON object keys.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace neural::byte_level {

// Code point that stands for `byte` in a vocab key (printable Latin-1 bytes stand for
// themselves; the rest are moved to U+0100..U+0143 in byte order).
char32_t byte_to_code_point(std::uint8_t byte);

// Inverse of byte_to_code_point; -1 for a code point outside the alphabet.
int code_point_to_byte(char32_t code_point);

// Appends the raw bytes a vocab key stands for to `out`. Returns false (leaving `out` in an
// unspecified state) when the key is not valid UTF-8 or uses a code point outside the alphabet.
bool decode_key(std::string_view key, std::string& out);

}  // namespace neural::byte_level
