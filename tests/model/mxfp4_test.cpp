// MXFP4 decoding: E2M1 codes, E8M0 scales and the nibble order of gpt-oss checkpoints.
#include <cmath>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "model/mxfp4.h"

namespace neural {
namespace {

using mxfp4::decode_row;
using mxfp4::e8m0_to_float;

TEST(Mxfp4, WorkedExample) {
    // Scale byte 128 = 2^1; byte 0 = 0x1F: low nibble 0xF (-6.0) is element 0, high nibble 0x1
    // (+0.5) is element 1.
    std::uint8_t blocks[16] = {0x1F};
    std::uint8_t scale = 128;
    float out[32];
    decode_row(blocks, &scale, 1, out);
    EXPECT_EQ(out[0], -12.0f);
    EXPECT_EQ(out[1], 1.0f);
    for (int i = 2; i < 32; ++i) EXPECT_EQ(out[i], 0.0f) << i;
}

TEST(Mxfp4, WholeE2M1TableThroughDecodeRow) {
    const float expected[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    // Codes 0..15 in element order: byte j holds element 2j (low) and 2j+1 (high).
    std::uint8_t blocks[16] = {};
    for (int j = 0; j < 8; ++j) {
        blocks[j] = static_cast<std::uint8_t>((2 * j) | ((2 * j + 1) << 4));
    }
    std::uint8_t scale = 127;  // 2^0
    float out[32];
    decode_row(blocks, &scale, 1, out);
    for (int c = 0; c < 16; ++c) {
        EXPECT_EQ(out[c], expected[c]) << "code " << c;
        EXPECT_EQ(std::signbit(out[c]), c >= 8) << "code " << c;
        EXPECT_EQ(mxfp4::kE2M1[c], expected[c]) << "code " << c;
    }
}

TEST(Mxfp4, ScaleTable) {
    EXPECT_EQ(e8m0_to_float(127), 1.0f);
    EXPECT_EQ(e8m0_to_float(128), 2.0f);
    EXPECT_EQ(e8m0_to_float(126), 0.5f);
    EXPECT_EQ(e8m0_to_float(254), std::ldexp(1.0f, 127));
    EXPECT_EQ(e8m0_to_float(1), std::ldexp(1.0f, -126));
    EXPECT_TRUE(std::isnan(e8m0_to_float(255)));
}

TEST(Mxfp4, Scale255IsNaN) {
    std::uint8_t blocks[16];
    for (int j = 0; j < 16; ++j) blocks[j] = static_cast<std::uint8_t>(j * 17);
    std::uint8_t scale = 255;
    float out[32];
    decode_row(blocks, &scale, 1, out);
    for (int i = 0; i < 32; ++i) EXPECT_TRUE(std::isnan(out[i])) << i;
}

TEST(Mxfp4, Scale0IsSubnormal) {
    const float s = e8m0_to_float(0);
    EXPECT_EQ(s, std::ldexp(1.0f, -127));
    EXPECT_GT(s, 0.0f);
    EXPECT_EQ(std::fpclassify(s), FP_SUBNORMAL);

    // 2^-127 times each value: +1.0, -6.0, +0.5 (2^-128, also subnormal), -0.
    std::uint8_t blocks[16] = {0xF2, 0x81};
    std::uint8_t scale = 0;
    float out[32];
    decode_row(blocks, &scale, 1, out);
    EXPECT_EQ(out[0], std::ldexp(1.0f, -127));
    EXPECT_EQ(out[1], -6.0f * std::ldexp(1.0f, -127));
    EXPECT_EQ(out[1], -1.5f * std::ldexp(1.0f, -125));
    EXPECT_EQ(out[2], std::ldexp(1.0f, -128));
    EXPECT_EQ(std::fpclassify(out[2]), FP_SUBNORMAL);
    EXPECT_EQ(out[3], 0.0f);
    EXPECT_TRUE(std::signbit(out[3]));
}

TEST(Mxfp4, NibbleOrderLowFirstAcrossBlocks) {
    // Two blocks with different scales; element i of block g gets code (i + 3g) % 16.
    const int n_blocks = 2;
    std::vector<std::uint8_t> blocks(16 * n_blocks);
    std::vector<int> codes(32 * n_blocks);
    for (int g = 0; g < n_blocks; ++g) {
        for (int i = 0; i < 32; ++i) codes[static_cast<size_t>(32 * g + i)] = (i + 3 * g) % 16;
        for (int j = 0; j < 16; ++j) {
            const int lo = codes[static_cast<size_t>(32 * g + 2 * j)];
            const int hi = codes[static_cast<size_t>(32 * g + 2 * j + 1)];
            blocks[static_cast<size_t>(16 * g + j)] = static_cast<std::uint8_t>(lo | (hi << 4));
        }
    }
    const std::uint8_t scales[2] = {127, 125};  // 1 and 1/4
    std::vector<float> out(32 * n_blocks, 12345.0f);
    decode_row(blocks.data(), scales, n_blocks, out.data());
    for (int g = 0; g < n_blocks; ++g) {
        const float scale = g == 0 ? 1.0f : 0.25f;
        for (int i = 0; i < 32; ++i) {
            const size_t k = static_cast<size_t>(32 * g + i);
            EXPECT_EQ(out[k], mxfp4::kE2M1[codes[k]] * scale) << "block " << g << " element " << i;
        }
    }
    // Spot checks written out: block 0 byte 1 = 0x32 -> elements 2, 3 = +1.0, +1.5.
    EXPECT_EQ(blocks[1], 0x32);
    EXPECT_EQ(out[2], 1.0f);
    EXPECT_EQ(out[3], 1.5f);
    // Block 1 element 0 has code 3 (+1.5) at scale 1/4.
    EXPECT_EQ(out[32], 0.375f);
}

TEST(Mxfp4, ZeroBlocksWriteNothing) {
    float out[2] = {7.0f, 8.0f};
    decode_row(nullptr, nullptr, 0, out);
    EXPECT_EQ(out[0], 7.0f);
    EXPECT_EQ(out[1], 8.0f);
}

}  // namespace
}  // namespace neural
