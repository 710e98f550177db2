// Scalar expert kernel: the plain reference every SIMD variant is checked against. Each row is
// decoded block by block into the same floats mxfp4::decode_row produces (table value * scale,
// exact) and summed in cpu::dot's order (8 partial sums, element k into sum k % 8, combined
// ((0+1)+(2+3))+((4+5)+(6+7))), so it matches cpu/reference_model.cpp bit for bit. Compiled
// with -ffp-contract=off like the other variants: no fused multiply-adds are introduced.
#include <math.h>

#include <cstdint>
#include <cstring>

#include "cpu/kernels/expert_kernel_impl.h"

namespace neural::cpu::kernel_detail {
namespace {

struct Isa {
    static constexpr bool kReference = true;
    static constexpr bool kDeinterleaved = false;
    static constexpr int kGroup = 16;

    template <int NR, int NT, bool kCapture>
    static void dot(const Row* rows, int G, const float* const* x, float* res, bool, int) {
        float acc[NR][NT][8] = {};
        float w[32];
        for (int g = 0; g < G; ++g) {
            for (int r = 0; r < NR; ++r) {
                const std::uint8_t* b = rows[r].codes + 16 * g;
                if (kCapture && rows[r].cap != nullptr) std::memcpy(rows[r].cap + 16 * g, b, 16);
                const float s = kE8M0Table.v[rows[r].scales[g]];
                for (int j = 0; j < 16; ++j) {
                    w[2 * j] = kE2M1Table.v[b[j] & 0x0F] * s;
                    w[2 * j + 1] = kE2M1Table.v[b[j] >> 4] * s;
                }
                for (int t = 0; t < NT; ++t) {
                    const float* xt = x[t] + 32 * g;
                    for (int j = 0; j < 32; ++j) acc[r][t][j & 7] += w[j] * xt[j];
                }
            }
        }
        for (int r = 0; r < NR; ++r) {
            for (int t = 0; t < NT; ++t) {
                const float* a = acc[r][t];
                res[r * NT + t] = ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
            }
        }
    }

    static void fence() {}  // plain stores only
};

#include "cpu/kernels/expert_tasks.inl"

constexpr IsaOps kOps = make_ops("scalar");

}  // namespace

const IsaOps* ops_scalar() { return &kOps; }

}  // namespace neural::cpu::kernel_detail
