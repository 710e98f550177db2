// XXH3-64 (xxHash, Debian libxxhash-dev) behind a small interface, so only hash.cpp includes
// xxhash.h (the library is linked PRIVATE to neural_engine) and tests can use the same hash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace neural::store {

// XXH3-64 with seed 0 of `n` bytes (what `xxhsum -H3` prints for a file).
std::uint64_t xxh3_64(const void* data, std::size_t n);

// Streaming XXH3-64: update() over pieces == xxh3_64() over their concatenation.
class Xxh3 {
public:
    Xxh3();
    ~Xxh3();
    Xxh3(Xxh3&& other) noexcept;
    Xxh3& operator=(Xxh3&& other) noexcept;
    Xxh3(const Xxh3&) = delete;
    Xxh3& operator=(const Xxh3&) = delete;

    void update(const void* data, std::size_t n);
    std::uint64_t digest() const;

private:
    struct State;
    std::unique_ptr<State> state_;
};

// 16 lowercase hex digits, most significant first (the form the store metadata uses).
std::string hex64(std::uint64_t v);
// Inverse of hex64: exactly 16 hex digits, else nullopt.
std::optional<std::uint64_t> parse_hex64(std::string_view text);

}  // namespace neural::store
