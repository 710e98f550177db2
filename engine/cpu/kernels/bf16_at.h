// Element i of a bf16 array as fp32, 0 for a null array (an absent bias): the kernels' one
// helper for biases and bf16 values. `static inline`, so every ISA file that includes it gets a
// private copy compiled with its own flags (expert_kernel_impl.h).
#pragma once

#include <cstdint>
#include <cstring>

namespace neural::cpu::kernel_detail {

static inline float bf16_at(const std::uint8_t* p, std::int64_t i) {
    if (p == nullptr) return 0.0f;
    std::uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    const std::uint32_t bits = static_cast<std::uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

}  // namespace neural::cpu::kernel_detail
