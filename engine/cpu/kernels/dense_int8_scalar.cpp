// Scalar int8 dense kernel: the reference arithmetic of dense_int8.h written out lane by lane
// (compiled with -ffp-contract=off, so `lane + float(L) * s` is a rounded product and a rounded
// add, as the SIMD variants compute it).
#include <cstdint>

#include "cpu/kernels/dense_int8_impl.h"
#include "model/bf16.h"

namespace neural::cpu::int8_detail {
namespace {

// The 16 lanes in the tree every variant uses: 8 + 8, 4 + 4, 2 + 2, 1 + 1.
inline float lane_tree(const float* a) {
    float s8[8], s4[4];
    for (int i = 0; i < 8; ++i) s8[i] = a[i] + a[i + 8];
    for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
    const float s2a = s4[0] + s4[2], s2b = s4[1] + s4[3];
    return s2a + s2b;
}

struct Isa {
    template <int NT>
    static void group(const std::uint8_t* g, std::int64_t padded, std::int64_t chunks,
                      const std::int8_t* const* xq, const float* const* xd, float* res) {
        const std::uint8_t* scales = g + 4 * padded;
        const std::int64_t blocks = 2 * chunks;
        for (int r = 0; r < 4; ++r) {
            for (int t = 0; t < NT; ++t) {
                float acc[16] = {};
                for (std::int64_t k = 0; k < chunks; ++k) {
                    const std::uint8_t* w = g + 256 * k + 64 * r;
                    const std::int8_t* x = xq[t] + 64 * k;
                    for (int j = 0; j < 16; ++j) {
                        std::int32_t l = 0;
                        for (int i = 0; i < 4; ++i) {
                            l += (static_cast<std::int32_t>(w[4 * j + i]) - 128) * x[4 * j + i];
                        }
                        const float dw = load_bf16(scales, r * blocks + 2 * k + j / 8);
                        const float s = dw * xd[t][16 * k + j];
                        const float p = static_cast<float>(l) * s;
                        acc[j] = acc[j] + p;
                    }
                }
                res[r * NT + t] = lane_tree(acc);
            }
        }
    }
};

#include "cpu/kernels/dense_int8_tasks.inl"

}  // namespace

TaskFn task_scalar() { return &int8_task; }

}  // namespace neural::cpu::int8_detail
