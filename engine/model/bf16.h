// bfloat16 <-> float. bf16 is the upper half of an IEEE float32.
#pragma once

#include <cstdint>
#include <cstring>

namespace neural {

inline float bf16_to_float(std::uint16_t v) {
    std::uint32_t bits = static_cast<std::uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

// Round to nearest even; NaN stays NaN (quiet).
inline std::uint16_t float_to_bf16(float f) {
    std::uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return static_cast<std::uint16_t>(bits >> 16);
}

// Reads element i of a little-endian bf16 array that may be unaligned (mmapped tensors).
inline float load_bf16(const std::uint8_t* base, std::int64_t i) {
    std::uint16_t v;
    std::memcpy(&v, base + 2 * i, 2);
    return bf16_to_float(v);
}

}  // namespace neural
