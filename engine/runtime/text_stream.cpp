#include "runtime/text_stream.h"

namespace neural {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Length of a UTF-8 sequence from its lead byte; 0 for a byte that cannot start one.
int sequence_length(unsigned char b) {
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;
}

// Valid range of the second byte for lead bytes with restrictions (overlongs, surrogates).
bool second_ok(unsigned char lead, unsigned char b) {
    if (lead == 0xE0) return b >= 0xA0 && b <= 0xBF;
    if (lead == 0xED) return b >= 0x80 && b <= 0x9F;
    if (lead == 0xF0) return b >= 0x90 && b <= 0xBF;
    if (lead == 0xF4) return b >= 0x80 && b <= 0x8F;
    return b >= 0x80 && b <= 0xBF;
}

}  // namespace

std::string Utf8Stream::push(std::string_view bytes) {
    pending_.append(bytes);
    std::string out;
    size_t i = 0;
    while (i < pending_.size()) {
        const auto lead = static_cast<unsigned char>(pending_[i]);
        const int len = sequence_length(lead);
        if (len == 0) {
            out += kReplacement;
            ++i;
            continue;
        }
        int have = 1;
        bool bad = false;
        while (have < len && i + static_cast<size_t>(have) < pending_.size()) {
            const auto b = static_cast<unsigned char>(pending_[i + static_cast<size_t>(have)]);
            if (have == 1 ? !second_ok(lead, b) : (b < 0x80 || b > 0xBF)) {
                bad = true;
                break;
            }
            ++have;
        }
        if (bad) {
            out += kReplacement;  // the lead byte alone is invalid; resync on the next byte
            ++i;
            continue;
        }
        if (have < len) break;  // incomplete: wait for more bytes
        out.append(pending_, i, static_cast<size_t>(len));
        i += static_cast<size_t>(len);
    }
    pending_.erase(0, i);
    return out;
}

std::string Utf8Stream::flush() {
    std::string out;
    if (!pending_.empty()) out += kReplacement;
    pending_.clear();
    return out;
}

}  // namespace neural
