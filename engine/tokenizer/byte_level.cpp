#include "tokenizer/byte_level.h"

#include <array>

namespace neural::byte_level {

namespace {

// Bytes that are printable in Latin-1 keep their own code point; GPT-2 chose these ranges.
constexpr bool is_printable(unsigned byte) {
    return (byte >= 0x21 && byte <= 0x7E) || (byte >= 0xA1 && byte <= 0xAC) ||
           (byte >= 0xAE && byte <= 0xFF);
}

struct Tables {
    std::array<char32_t, 256> to_code_point{};
    // Code points used by the alphabet are all below 0x100 + 68 (the non-printable bytes).
    std::array<std::int16_t, 0x144> to_byte{};
};

constexpr Tables make_tables() {
    Tables t;
    for (auto& b : t.to_byte) b = -1;
    unsigned shifted = 0;
    for (unsigned byte = 0; byte < 256; ++byte) {
        char32_t cp = is_printable(byte) ? char32_t(byte) : char32_t(0x100 + shifted++);
        t.to_code_point[byte] = cp;
        t.to_byte[cp] = static_cast<std::int16_t>(byte);
    }
    return t;
}

constexpr Tables kTables = make_tables();

}  // namespace

char32_t byte_to_code_point(std::uint8_t byte) { return kTables.to_code_point[byte]; }

int code_point_to_byte(char32_t code_point) {
    return code_point < kTables.to_byte.size() ? kTables.to_byte[code_point] : -1;
}

bool decode_key(std::string_view key, std::string& out) {
    // Every alphabet code point is below U+0800, so only 1- and 2-byte UTF-8 sequences occur.
    for (std::size_t i = 0; i < key.size();) {
        const auto c0 = static_cast<unsigned char>(key[i]);
        char32_t cp;
        if (c0 < 0x80) {
            cp = c0;
            i += 1;
        } else if (c0 >= 0xC2 && c0 <= 0xDF && i + 1 < key.size() &&
                   (static_cast<unsigned char>(key[i + 1]) & 0xC0) == 0x80) {
            cp = (char32_t(c0 & 0x1F) << 6) | (static_cast<unsigned char>(key[i + 1]) & 0x3F);
            i += 2;
        } else {
            return false;
        }
        const int byte = code_point_to_byte(cp);
        if (byte < 0) return false;
        out.push_back(static_cast<char>(byte));
    }
    return true;
}

}  // namespace neural::byte_level
