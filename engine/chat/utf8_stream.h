// Incremental UTF-8 decoding for streamed tokens: a byte-level BPE token can end in the middle
// of a multi-byte character, so the incomplete tail is held back until the next token completes
// it. Bytes that can never become valid UTF-8 are replaced by U+FFFD, one per maximal invalid
// subpart (the Unicode "substitution of maximal subparts" practice, as harmony does).
#pragma once

#include <string>
#include <string_view>

namespace neural::chat {

class Utf8Stream {
public:
    // Adds bytes; returns the text that is complete now (valid UTF-8, possibly empty).
    std::string push(std::string_view bytes);
    // Ends the stream: a held-back incomplete sequence becomes one U+FFFD.
    std::string flush();
    // True while bytes are held back.
    bool pending() const { return !pending_.empty(); }
    void reset() { pending_.clear(); }

private:
    std::string pending_;
};

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";

// Appends code point `cp` (at most U+10FFFF) to `out` as UTF-8.
void append_utf8(std::string& out, char32_t cp);

}  // namespace neural::chat
