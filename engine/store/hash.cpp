#include "store/hash.h"

#include <new>

#include <fmt/format.h>

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t is a complete type (no heap allocation)
#include <xxhash.h>

namespace neural::store {

struct Xxh3::State {
    XXH3_state_t s;
};

std::uint64_t xxh3_64(const void* data, std::size_t n) { return XXH3_64bits(data, n); }

Xxh3::Xxh3() : state_(std::make_unique<State>()) {
    XXH3_INITSTATE(&state_->s);
    XXH3_64bits_reset(&state_->s);
}
Xxh3::~Xxh3() = default;
Xxh3::Xxh3(Xxh3&& other) noexcept = default;
Xxh3& Xxh3::operator=(Xxh3&& other) noexcept = default;

void Xxh3::update(const void* data, std::size_t n) { XXH3_64bits_update(&state_->s, data, n); }

std::uint64_t Xxh3::digest() const { return XXH3_64bits_digest(&state_->s); }

std::string hex64(std::uint64_t v) { return fmt::format("{:016x}", v); }

std::optional<std::uint64_t> parse_hex64(std::string_view text) {
    if (text.size() != 16) return std::nullopt;
    std::uint64_t v = 0;
    for (char c : text) {
        int d = 0;
        if (c >= '0' && c <= '9') {
            d = c - '0';
        } else if (c >= 'a' && c <= 'f') {
            d = c - 'a' + 10;
        } else if (c >= 'A' && c <= 'F') {
            d = c - 'A' + 10;
        } else {
            return std::nullopt;
        }
        v = (v << 4) | static_cast<std::uint64_t>(d);
    }
    return v;
}

}  // namespace neural::store
