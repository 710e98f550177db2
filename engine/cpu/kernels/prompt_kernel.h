// The int8 prompt (prefill) path of the CPU experts (docs/KERNELS.md "Prompt path"): one layer's
// MoE for a block of tokens as one team job of four phases:
//   0. h to multi-pass Q8 (per token, per 32-element block: two int8 passes, the second
//      quantizing what the first left with a 256 times finer step, and one fp32 step: a value
//      is off by ~1/65000 of its block's largest value; prompt_impl.h),
//   1. gate_up: tasks = (expert, 64 rows), each over all of that expert's tokens; the 64 rows are
//      32 gate/up pairs, so the task also applies the bias and SwiGLU and quantizes the 32
//      activations (one Q8 block) of every token,
//   2. down: tasks = (expert, 32 rows) over the expert's tokens, bias added, one output slot per
//      (token, k),
//   3. combine: x[t] += sum_k w_k y[t, k], k in order.
// The GEMMs multiply the MXFP4 codes as the integers 2 x E2M1 in {0, +-1, +-2, +-3, +-4, +-6,
// +-8, +-12} with every pass's Q8 bytes against the same decoded weights (int32 sums per block,
// exact), then add each block's sums times (e8m0 / 2) x step with fp32 fmas, blocks in order.
// The weights are exact, so the activations' quantization is the only rounding beside the fp32
// sums. A weight tile is decoded once per task and
// reused by all of the expert's tokens.
//
// Determinism: every output (a token's activation block, a down row of a slot, a combined row)
// is computed by one task in one fixed order from per-token inputs, so the result does not depend
// on the team, its thread count, the schedule, the other tokens of the block or where a prompt
// is split into blocks; the scalar reference, the VNNI and the AMX variants give the same bits
// (integer block sums, then the same fp32 operations in the same order).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "cpu/kernels/expert_kernel.h"

namespace neural::cpu {

class WorkerTeam;

// The GEMM's variants, all bit-identical: scalar (the reference), avx512vnni (vpdpbusd),
// amx_int8 (AMX tiles, prompt_amx.inl), and amx_emulated, the AMX variant's code on tiles
// emulated in plain C++ so that CPUs without AMX test it (tests only; never chosen).
enum class PromptIsa : std::uint8_t { scalar = 0, avx512vnni = 1, amx_int8 = 2, amx_emulated = 3 };

// "scalar", "avx512vnni", "amx-int8", "amx-emulated"
const char* prompt_isa_name(PromptIsa isa);
// This build contains the variant and this CPU (and OS) can run it.
bool prompt_isa_available(PromptIsa isa);
// amx_int8, else avx512vnni, where available, else scalar.
PromptIsa best_prompt_isa();

class PromptKernel {
public:
    explicit PromptKernel(PromptIsa isa = best_prompt_isa(), SwigluParams params = {});
    ~PromptKernel();
    PromptKernel(const PromptKernel&) = delete;
    PromptKernel& operator=(const PromptKernel&) = delete;

    PromptIsa isa() const { return isa_; }

    // x[t] += sum_k gate[t * K + k] * y_{sel[t * K + k]}(h[t]) for t < T. experts[e] is expert
    // e of the layer (records only needed for the selected ones; all one shape). h, x [T][H];
    // sel, gate [T][K]. Throws neural::Error for a selection outside the experts or a missing
    // record, neural::Cancelled when `cancel` is set before or during the job (x unchanged).
    // Not reentrant (it owns scratch).
    void run(WorkerTeam& team, std::span<const ExpertInput> experts, const float* h, std::int64_t T,
             int K, const int* sel, const float* gate, float* x,
             const std::atomic<bool>* cancel = nullptr);

private:
    struct Scratch;
    PromptIsa isa_;
    SwigluParams params_;
    std::unique_ptr<Scratch> scratch_;
};

// Multi-pass Q8 of one block of 32 values in the kernels' operand order (tests):
// q[prompt_q8_bytes()] bytes, 32 per pass (q_j + 128), and the step *d of pass 1: a value is
// ~ *d x (256 q_0 + q_1), + *d x q_2 / 256 with a third pass (prompt_impl.h).
int prompt_q8_passes();
int prompt_q8_bytes();
void prompt_quantize_block(const float* v, std::uint8_t* q, float* d);

// The int8 GEMM alone (tests): out[i * 16 + r] for rows row0..row0+15 of projection p (0 =
// gate_up, 1 = down) and the n Q8 operand rows q + i * cols / 32 * prompt_q8_bytes(),
// d + i * cols / 32 (copied into padded rows first: the AMX variant reads whole tiles).
void prompt_gemm16(PromptIsa isa, const ExpertRecordView& record, int p, std::int64_t row0,
                   const std::uint8_t* q, const float* d, int n, float* out);

}  // namespace neural::cpu
