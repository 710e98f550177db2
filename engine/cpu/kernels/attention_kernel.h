// Attention with sinks for the fast CPU path (docs/KERNELS.md "Attention"): the query heads of
// one GQA group against the n cached keys and values of their K/V head, one query position.
//
// The reference is cpu::attend_with_sink (attention_reference.h), one head at a time; the fp32
// reference model keeps it. The AVX-512 variant computes the same softmax with sinks: per head,
// scores q.k_j * scale (16-lane partial sums, a fixed reduction tree), their maximum with the
// sink, exp(s - max) by a degree-6 polynomial (Cephes expf, ~1 ulp) instead of the C library,
// the sum of those with exp(sink - max), then out = sum_j (e_j / sum) v_j with one fused
// multiply-add per element. Different roundings than the reference (not the same bits; within
// 1e-5 relative of it, tests/kernels/attention_kernel_test.cpp), but the same bits for a
// position whatever the prompt block, thread or team: a token decoded alone and the same token
// inside a prompt give the same result. The AVX2 + FMA variant holds each 16-lane vector as two
// 8-lane halves and gives the AVX-512 variant's bits (tested bit for bit), so the reply to a
// seed does not depend on which of the two a CPU has.
#pragma once

#include <cstdint>

namespace neural::cpu {

enum class AttentionIsa : std::uint8_t { reference = 0, avx512 = 1, avx2 = 2 };

const char* attention_isa_name(AttentionIsa isa);  // "reference", "avx512", "avx2"
// This build contains the variant and this CPU (and OS) can run it.
bool attention_isa_available(AttentionIsa isa);

// One GQA group: heads query heads at q + h * d (h < heads), keys k + j * stride and values
// v + j * stride (j < n, n >= 1), sinks[h] the heads' sink logits, out + h * d their outputs.
// The AVX-512 and AVX2 variants have code for d = 16, 32, 64 and 128; other sizes run the
// reference.
void attend_group(AttentionIsa isa, const float* q, int heads, const float* k, const float* v,
                  std::int64_t stride, std::int64_t n, int d, const float* sinks, float scale,
                  float* out);

namespace detail {
// The AVX-512 variant (attention_avx512.cpp); false (nothing written) for a head size it has no
// code for.
bool attend_group_avx512(const float* q, int heads, const float* k, const float* v,
                         std::int64_t stride, std::int64_t n, int d, const float* sinks,
                         float scale, float* out);
// The AVX2 + FMA variant (attention_avx2.cpp), the same contract and the AVX-512 variant's bits.
bool attend_group_avx2(const float* q, int heads, const float* k, const float* v,
                       std::int64_t stride, std::int64_t n, int d, const float* sinks, float scale,
                       float* out);
}  // namespace detail

}  // namespace neural::cpu
