#include "chat/utf8_stream.h"

namespace neural::chat {

namespace {

// Length of the sequence a lead byte starts and the allowed range of its second byte
// (Unicode table 3-7: this rules out overlongs, surrogates and code points above U+10FFFF).
struct Lead {
    int length = 0;  // 0: not a lead byte
    unsigned char second_min = 0x80;
    unsigned char second_max = 0xBF;
};

Lead classify(unsigned char b) {
    if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
    if (b == 0xE0) return {3, 0xA0, 0xBF};
    if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {3, 0x80, 0xBF};
    if (b == 0xED) return {3, 0x80, 0x9F};
    if (b == 0xF0) return {4, 0x90, 0xBF};
    if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
    if (b == 0xF4) return {4, 0x80, 0x8F};
    return {};
}

}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
    pending_.append(bytes);
    std::string out;
    std::size_t i = 0;
    const std::size_t n = pending_.size();
    while (i < n) {
        auto b = static_cast<unsigned char>(pending_[i]);
        if (b < 0x80) {
            out.push_back(static_cast<char>(b));
            ++i;
            continue;
        }
        Lead lead = classify(b);
        if (lead.length == 0) {
            out.append(kReplacementCharacter);
            ++i;
            continue;
        }
        std::size_t k = 1;
        bool broken = false;
        for (; k < static_cast<std::size_t>(lead.length) && i + k < n; ++k) {
            auto c = static_cast<unsigned char>(pending_[i + k]);
            unsigned char lo = k == 1 ? lead.second_min : 0x80;
            unsigned char hi = k == 1 ? lead.second_max : 0xBF;
            if (c < lo || c > hi) {
                broken = true;
                break;
            }
        }
        if (broken) {
            // The bytes so far were a valid prefix: together they are one maximal subpart.
            out.append(kReplacementCharacter);
            i += k;
            continue;
        }
        if (k < static_cast<std::size_t>(lead.length)) break;  // incomplete: wait for more
        out.append(pending_, i, k);
        i += k;
    }
    pending_.erase(0, i);
    return out;
}

std::string Utf8Stream::flush() {
    if (pending_.empty()) return {};
    pending_.clear();
    return std::string(kReplacementCharacter);
}

void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

}  // namespace neural::chat
