// Scalar dense kernel: the reference arithmetic of dense_kernel.h written out lane by lane
// (compiled with -ffp-contract=off, so every `a + w * x` is a product, exact for bf16 operands,
// and one rounded add, as the SIMD variants' FMAs and vdpbf16ps compute it).
#include <cstdint>
#include <cstring>

#include "cpu/kernels/dense_impl.h"

namespace neural::cpu::dense_detail {
namespace {

inline float widen(std::uint16_t v) {
    const std::uint32_t bits = static_cast<std::uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

inline float weight_at(const std::uint8_t* w, std::int64_t i, std::int64_t cols) {
    if (i >= cols) return 0.0f;
    std::uint16_t v;
    std::memcpy(&v, w + 2 * i, 2);
    return widen(v);
}

struct Isa {
    template <int NR, int NT>
    static void dot(const std::uint8_t* const* w, const std::uint16_t* const* x, std::int64_t lo,
                    std::int64_t cols, float* res) {
        for (int r = 0; r < NR; ++r) {
            for (int t = 0; t < NT; ++t) {
                float acc[16] = {};
                for (std::int64_t c = 0; c < cols; c += 32) {
                    for (int j = 0; j < 16; ++j) {
                        const std::int64_t odd = c + 2 * j + 1, even = c + 2 * j;
                        const float wo = weight_at(w[r], odd, cols),
                                    we = weight_at(w[r], even, cols);
                        acc[j] = acc[j] + wo * widen(x[t][odd]);
                        acc[j] = acc[j] + we * widen(x[t][even]);
                        acc[j] = acc[j] + wo * widen(x[t][lo + odd]);
                        acc[j] = acc[j] + we * widen(x[t][lo + even]);
                    }
                }
                float s8[8], s4[4];
                for (int i = 0; i < 8; ++i) s8[i] = acc[i] + acc[i + 8];
                for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
                const float s2a = s4[0] + s4[2], s2b = s4[1] + s4[3];
                res[r * NT + t] = s2a + s2b;
            }
        }
    }
};

#include "cpu/kernels/dense_tasks.inl"

}  // namespace

TaskFn task_scalar() { return &dense_task; }

}  // namespace neural::cpu::dense_detail
