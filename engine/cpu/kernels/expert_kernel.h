// Fused MXFP4 expert kernels on the CPU, reading expert-store records in place
// (cpu/kernels/expert_record.h). Per expert (docs/MODEL.md "Experts"):
//   gu  = W1 x + b1              W1 [2I, H] MXFP4, rows 2i / 2i+1 = gate_i / up_i
//   a_i = min(g_i, L) * sigmoid(alpha * min(g_i, L)) * (clamp(u_i, -L, L) + 1)
//   y   = W2 a + b2              W2 [H, I] MXFP4
// decode(): one token, 1-4 experts of a layer: out[H] += sum_k w_k * y_k, added in k order.
// multi():  up to 16 tokens of one expert: out[t][H] += w_t * y_t.
//
// Determinism: every output row (a gate/up pair, a down row) is computed by one task in one
// fixed order, and the experts' down rows are combined in k order by that same task, so the
// result does not depend on the team, its thread count or the schedule (bit-identical). multi()
// and decode() share the per-row accumulation order, so a token's multi() result equals its
// single-expert decode() bit for bit. The scalar variant reproduces the reference forward pass
// (cpu/reference_model.cpp: decode_row + cpu::dot, the C library's expf) exactly; the AVX2 and
// AVX-512 variants give the same bits as each other (one lane order, exp_poly: docs/KERNELS.md
// "Every variant the same bits") and agree with the scalar one to fp32 rounding.
//
// Capture: with ExpertInput::capture set, the record's bytes are written to that buffer while
// the kernel reads them (code blocks from the same registers the kernel decodes, with streaming
// stores when the buffer is 16-byte aligned; scale rows and the escape area per task), so no
// second pass over RAM is needed to admit the expert elsewhere. Stores are fenced before the
// call returns.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "cpu/kernels/expert_record.h"

namespace neural::cpu {

class WorkerTeam;

enum class KernelIsa : std::uint8_t { scalar = 0, avx2 = 1, avx512 = 2 };

const char* kernel_isa_name(KernelIsa isa);  // "scalar", "avx2", "avx512"
// This build contains the variant and this CPU (and OS) can run it.
bool kernel_isa_available(KernelIsa isa);
// The fastest available variant.
KernelIsa best_kernel_isa();
// $NEURAL_KERNEL (scalar | avx2 | avx512) when set, else best_kernel_isa(). Throws neural::Error
// for an unknown name or a variant this CPU/build cannot run.
KernelIsa select_kernel_isa();

struct ExpertInput {
    ExpertRecordView record;
    const std::uint8_t* gate_up_bias = nullptr;  // bf16 [2I], interleaved like the rows; null: 0
    const std::uint8_t* down_bias = nullptr;     // bf16 [H]; null: 0
    float weight = 1.0f;                         // router weight (decode(); multi() ignores it)
    std::uint8_t* capture = nullptr;             // record.bytes() bytes to fill, or null
};

struct SwigluParams {
    float limit = 7.0f;  // config swiglu_limit
    float alpha = 1.702f;
};

class ExpertKernel {
public:
    static constexpr int kMaxExperts = 4;
    static constexpr int kMaxTokens = 16;

    explicit ExpertKernel(KernelIsa isa = select_kernel_isa(), SwigluParams params = {});
    ~ExpertKernel();
    ExpertKernel(const ExpertKernel&) = delete;
    ExpertKernel& operator=(const ExpertKernel&) = delete;

    KernelIsa isa() const { return isa_; }

    // Software prefetch distance of the SIMD variants, in code bytes ahead of the block being
    // decoded (0: off; default kDefaultPrefetchBytes, or $NEURAL_KERNEL_PREFETCH). Hardware
    // prefetchers alone leave a single thread well below its streaming rate (docs/BENCHMARKS.md
    // "Measurements behind code defaults").
    static constexpr int kDefaultPrefetchBytes = 4096;
    void set_prefetch_bytes(int bytes);
    int prefetch_bytes() const { return prefetch_; }

    // out[H] += sum_k experts[k].weight * y_k(x), k = 0, 1, ... in order; x [H] fp32. All
    // experts must have the same H and I, except slices (ExpertRecordView::slice) of experts of
    // that I, which have fewer neurons. Throws neural::Error for 0 or > 4 experts or mismatched
    // shapes. Not reentrant: one call at a time per ExpertKernel (it owns scratch).
    void decode(WorkerTeam& team, std::span<const ExpertInput> experts, const float* x, float* out);

    // For t < T (1..16): out[t][H] += weights[t] * y(x[t]). x, weights, out have T entries;
    // x[t] and out[t] point to H floats; out rows must be distinct.
    void multi(WorkerTeam& team, const ExpertInput& expert, std::span<const float* const> x,
               std::span<const float> weights, std::span<float* const> out);

private:
    struct Scratch;
    KernelIsa isa_;
    SwigluParams params_;
    int prefetch_ = kDefaultPrefetchBytes;
    std::unique_ptr<Scratch> scratch_;
};

}  // namespace neural::cpu
