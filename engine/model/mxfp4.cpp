#include "model/mxfp4.h"

#include <array>
#include <cmath>
#include <limits>

namespace neural::mxfp4 {

const float kE2M1[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                         -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

namespace {
std::array<float, 256> make_scale_table() {
    std::array<float, 256> t{};
    for (int s = 0; s < 255; ++s) t[static_cast<size_t>(s)] = std::ldexp(1.0f, s - 127);
    t[255] = std::numeric_limits<float>::quiet_NaN();
    return t;
}
const std::array<float, 256> kScale = make_scale_table();
}  // namespace

float e8m0_to_float(std::uint8_t s) { return kScale[s]; }

void decode_row(const std::uint8_t* blocks, const std::uint8_t* scales, int n_blocks, float* out) {
    for (int g = 0; g < n_blocks; ++g) {
        const float scale = kScale[scales[g]];
        const std::uint8_t* b = blocks + static_cast<std::ptrdiff_t>(g) * kBlockBytes;
        float* o = out + static_cast<std::ptrdiff_t>(g) * kBlockValues;
        for (int j = 0; j < kBlockBytes; ++j) {
            o[2 * j] = kE2M1[b[j] & 0x0f] * scale;
            o[2 * j + 1] = kE2M1[b[j] >> 4] * scale;
        }
    }
}

}  // namespace neural::mxfp4
