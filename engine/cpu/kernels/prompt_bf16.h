// The bf16 prompt (prefill) path of the CPU experts (docs/KERNELS.md "Prompt path"): one layer's
// MoE for the tokens of a prompt pass on the bf16 expert GEMM (expert_bf16.h), as one team job of
// six phases:
//   0. round: each token's h to bf16 (bf16_round_activations), copied into one operand row per
//      (token, k), the rows grouped by expert;
//   1. prepare gate_up: tasks = experts: each expert's operand rows laid out once for the GEMM
//      variant (bf16_expert_prepare: the AMX B tiles, the SIMD variants' fp32 planes), shared by
//      all of its row tasks instead of each task repacking them;
//   2. gate_up: tasks = (expert, 64 rows = 32 gate/up pairs) over all of that expert's tokens:
//      the GEMM on the prepared operand, then the bias and SwiGLU of the fp32 path's SIMD
//      variants (the clamp, alpha and limit of docs/MODEL.md "Experts", exp_poly) and the 32
//      activations rounded to bf16;
//   3. prepare down: tasks = experts: their activation rows prepared likewise (the bytes of
//      phase 1's operands reused);
//   4. down: tasks = (expert, 64 or 32 rows) over the expert's tokens, bias added, one output
//      slot per (token, k);
//   5. combine: x[t] += sum_k w_k y[t, k], k in order (the fp32 path's expression).
// Exact class: the weights are MXFP4 as published (exact in bf16); the activations round to
// bf16 at the two matmuls' inputs, as on the GPU; the sums are fp32 in the tiles' order.
//
// Determinism: every output is computed by one task in one fixed order from per-token inputs (the
// GEMM's result for a (token, row) does not depend on the other tokens, the rows of the call or
// the variant), so a prompt's bits do not depend on the team, its size, the schedule, the other
// tokens of the pass or how the prompt is split into passes and blocks; every GEMM variant
// (scalar, avx2, avx512, amx-bf16) gives the same bits. They are not decode()'s bits (fp32
// activations): runtime/session.h reuses a cached prefix only up to the first token computed by
// decode (Backend::prompt_matches_decode).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "cpu/kernels/expert_bf16.h"
#include "cpu/kernels/expert_kernel.h"

namespace neural::cpu {

class WorkerTeam;

// The matmuls' activation operand: `bf16`, x rounded to bf16 (8 significant bits, as the GPU's
// bf16 matmuls); `split`, x as hi = bf16(x) plus lo = bf16(x - hi), two GEMM rows per token
// whose sums are added (16 significant bits, as the dense kernels' operand: dense_kernel.h), at
// twice the GEMM work.
enum class Bf16PromptOperand : std::uint8_t { bf16 = 0, split = 1 };
const char* bf16_prompt_operand_name(Bf16PromptOperand operand);  // "bf16", "bf16x2"

class Bf16PromptKernel {
public:
    explicit Bf16PromptKernel(Bf16ExpertIsa isa = select_bf16_expert_isa(),
                              Bf16PromptOperand operand = Bf16PromptOperand::split,
                              SwigluParams params = {});
    ~Bf16PromptKernel();
    Bf16PromptKernel(const Bf16PromptKernel&) = delete;
    Bf16PromptKernel& operator=(const Bf16PromptKernel&) = delete;

    Bf16ExpertIsa isa() const { return isa_; }
    Bf16PromptOperand operand() const { return operand_; }

    // x[t] += sum_k gate[t * K + k] * y_{sel[t * K + k]}(h[t]) for t < T. experts[e] is expert
    // e of the layer (records only needed for the selected ones; all one shape, whole records).
    // h, x [T][H]; sel, gate [T][K]. Throws neural::Error for a selection outside the experts
    // or a missing record, neural::Cancelled when `cancel` is set before or during the job (x
    // unchanged). Not reentrant (it owns scratch).
    void run(WorkerTeam& team, std::span<const ExpertInput> experts, const float* h, std::int64_t T,
             int K, const int* sel, const float* gate, float* x,
             const std::atomic<bool>* cancel = nullptr);

private:
    struct Scratch;
    Bf16ExpertIsa isa_;
    Bf16PromptOperand operand_;
    SwigluParams params_;
    std::unique_ptr<Scratch> scratch_;
};

}  // namespace neural::cpu
