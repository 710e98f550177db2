// Scalar reference of the int8 prompt kernels: the plain loops of the math every variant
// computes (prompt_tasks.inl), read straight from the record, weights decoded per use.
#include <math.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "cpu/kernels/exact_fma.h"
#include "cpu/kernels/prompt_impl.h"

namespace neural::cpu::prompt_detail {
namespace {

using kernel_detail::kE8M0Table;
using kernel_detail::kMaxBlocks;
using kernel_detail::RecordRef;

struct Isa {
    static void gemm16(const ExpertArgs& e, int p, std::int64_t row0, const Operands& x, int n,
                       std::uint8_t*, float* out, std::int64_t ld) {
        const RecordRef& rec = e.rec;
        const int G = rec.blocks[p];
        std::uint8_t sbuf[kMaxBlocks + 32];
        for (int r = 0; r < kSubRows; ++r) {
            const std::int64_t row = row0 + r;
            const std::uint8_t* codes = rec.code_base[p] + static_cast<std::uint64_t>(row) *
                                                               static_cast<std::uint64_t>(G) * 16;
            const std::uint8_t* scales = kernel_detail::record_row_scales(rec, p, row, sbuf);
            for (int i = 0; i < n; ++i) {
                const std::uint8_t* q = x.q + i * x.q_stride;
                const float* d = x.d + i * x.d_stride;
                float acc = 0.0f;
                for (int b = 0; b < G; ++b) {
                    std::int32_t sum[kPasses] = {};
                    for (int pos = 0; pos < 32; ++pos) {
                        const int k = operand_element(pos);
                        const std::uint8_t byte = codes[16 * b + k / 2];
                        const int code = (k & 1) ? (byte >> 4) : (byte & 0x0F);
                        const std::int32_t w = kE2M1x2.v[code];
                        for (int j = 0; j < kPasses; ++j) {
                            sum[j] +=
                                (static_cast<std::int32_t>(q[kQ8Bytes * b + 32 * j + pos]) - 128) *
                                w;
                        }
                    }
                    const float scale = kE8M0Table.v[scales[b]] * 0.5f * d[b];
                    acc = exact_fmaf(static_cast<float>(sum[0] * 256 + sum[1]), scale, acc);
                    if constexpr (kPasses == 3)
                        acc = exact_fmaf(static_cast<float>(sum[2]), scale * (1.0f / 256.0f), acc);
                }
                out[i * ld + r] = acc;
            }
        }
    }
};

#include "cpu/kernels/prompt_tasks.inl"

constexpr PromptOps kOps = make_prompt_ops("scalar");

}  // namespace

const PromptOps* prompt_ops_scalar() { return &kOps; }

}  // namespace neural::cpu::prompt_detail
