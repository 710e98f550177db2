// Random expert records for the kernel tests and benchmarks, in the store's raw and packed
// layouts, plus the plain decode-then-dot reference the kernels are checked against.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "cpu/kernels/expert_kernel.h"

namespace neural::test {

// A byte buffer aligned to 64 bytes (capture buffers, records).
class AlignedBytes {
public:
    AlignedBytes() = default;
    explicit AlignedBytes(std::size_t n);
    std::uint8_t* data() { return p_.get(); }
    const std::uint8_t* data() const { return p_.get(); }
    std::size_t size() const { return n_; }

private:
    struct Free {
        void operator()(std::uint8_t* p) const;
    };
    std::unique_ptr<std::uint8_t, Free> p_;
    std::size_t n_ = 0;
};

struct ExpertSpec {
    int hidden = 64;
    int intermediate = 96;
    int gate_up_scale_lo = 114, gate_up_scale_hi = 124;  // E8M0 bytes, uniform in [lo, hi]
    int down_scale_lo = 114, down_scale_hi = 124;
    int wide_rows = 3;        // rows per projection with scales spanning > 15 (escaped if packed)
    float bias_range = 1.0f;  // biases uniform in [-range, range] ...
    int clamp_rows = 4;       // ... except a few gate/up pairs with +-20 (exercise the clamps)
    std::uint64_t seed = 1;
};

struct TestExpert {
    int hidden = 0, intermediate = 0;
    AlignedBytes raw, packed;  // records
    std::uint32_t escaped_gate_up = 0, escaped_down = 0;
    std::vector<std::uint8_t> gate_up_bias, down_bias;  // bf16 bytes, [2I] and [H]

    cpu::ExpertRecordView view(bool packed_record) const;
    cpu::ExpertInput input(bool packed_record, float weight = 1.0f) const;
};

TestExpert make_test_expert(const ExpertSpec& spec);

// Row r of a projection of the raw record decoded to fp32 by the checkpoint decoder
// (model/mxfp4.h), as the reference model reads it.
std::vector<float> decode_raw_row(const TestExpert& e, Projection p, std::int64_t r);

// Packs a raw record with the store's own scale codec (engine/store/format.h).
void pack_record(const std::uint8_t* raw, int hidden, int intermediate, AlignedBytes* packed,
                 std::uint32_t* escaped_gate_up, std::uint32_t* escaped_down);

// out[H] += sum_k weights[k] * y_k(x), computed exactly as cpu/reference_model.cpp's moe does:
// rows decoded with mxfp4::decode_row from the raw record, cpu::dot, std::min / std::clamp /
// std::exp for the activation, then the weighted sum in k order. round_act, when given, is
// applied to each SwiGLU output before the down projection (to model a kernel whose down
// operands are rounded, e.g. to fp16).
void reference_decode(const std::vector<const TestExpert*>& experts,
                      const std::vector<float>& weights, const float* x, float* out,
                      float limit = 7.0f, float alpha = 1.702f,
                      const std::function<float(float)>& round_act = {});

// The SIMD variants' arithmetic written out lane by lane (docs/KERNELS.md "Every variant the same
// bits"): per row and 32-value block, lane j of an even accumulator takes
// fma(w[2j], x[2j], e_j) and of an odd one fma(w[2j+1], x[2j+1], o_j) (fma_exact),
// blocks in order; the row's dot is the 16 lanes of e + o summed 8 + 8, 4 + 4, 2 + 2, 1 + 1;
// the SwiGLU takes cpu::exp_poly; the experts are added to out in k order as reference_decode.
// a * b + c rounded once to the nearest float (ties to even) without the C library's fmaf
// (some runtimes compute it through double, a second rounding).
float fma_exact(float a, float b, float c);

void lane_reference_decode(const std::vector<const TestExpert*>& experts,
                           const std::vector<float>& weights, const float* x, float* out,
                           float limit = 7.0f, float alpha = 1.702f);

// The same math in double precision (an independent check of the fp32 paths).
void reference_decode_f64(const std::vector<const TestExpert*>& experts,
                          const std::vector<float>& weights, const float* x, double* out,
                          float limit = 7.0f, float alpha = 1.702f);

std::vector<float> random_vector(std::size_t n, std::uint64_t seed, float stddev = 1.0f);

}  // namespace neural::test
