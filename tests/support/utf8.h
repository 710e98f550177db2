// UTF-8 text as code points, for tests that match text against a code-point automaton
// (the Lark grammar tests and the freeform-tool constraint tests). Well-formed input only.
#pragma once

#include <string>
#include <string_view>

namespace neural::test {

inline std::u32string code_points(std::string_view s) {
    std::u32string out;
    for (std::size_t i = 0; i < s.size();) {
        const auto b = static_cast<unsigned char>(s[i]);
        int n = b < 0x80 ? 0 : b < 0xE0 ? 1 : b < 0xF0 ? 2 : 3;
        char32_t cp = n == 0 ? b : b & (0x3F >> n);
        ++i;
        while (n-- > 0 && i < s.size()) cp = cp << 6 | (static_cast<unsigned char>(s[i++]) & 0x3F);
        out += cp;
    }
    return out;
}

}  // namespace neural::test
