// MXFP4 as gpt-oss checkpoints store it: per weight row, blocks of 32 values along the input
// dimension; each block is 16 bytes of E2M1 codes (element 2j in the LOW nibble of byte j,
// element 2j+1 in the high nibble) plus one E8M0 scale byte (2^(s-127)).
#pragma once

#include <cstdint>

namespace neural::mxfp4 {

constexpr int kBlockValues = 32;
constexpr int kBlockBytes = 16;

// E2M1 code (0..15) -> value: sign bit 3, exponent bits 2..1, mantissa bit 0.
extern const float kE2M1[16];

// 2^(s-127) for s in 0..254; s = 255 is NaN in the OCP spec and decodes to NaN.
float e8m0_to_float(std::uint8_t s);

// Decodes one row: `n_blocks` blocks (16 code bytes each, contiguous) and their `n_blocks` scale
// bytes into n_blocks * 32 floats.
void decode_row(const std::uint8_t* blocks, const std::uint8_t* scales, int n_blocks, float* out);

}  // namespace neural::mxfp4
