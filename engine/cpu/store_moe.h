// The fast MoE path: experts computed by the fused MXFP4 kernels (cpu/kernels/) straight from
// expert-store records, or from the checkpoint's own expert tensors (which hold a raw record's
// bytes: ExpertRecordView::make_split), on a worker team (OpenMP or the persistent DLL). The
// router stays in CpuModel; this class only turns (token, expert, weight) choices into
// x += sum_k w_k * y_k.
//
// A prompt's tokens are grouped by expert. With the bf16 prompt kernel (prompt_bf16.h, the
// default where the bf16 GEMM has a SIMD variant) or the int8 one (prompt_kernel.h, opt-in,
// lossy) all of a layer's experts run in one team job of bf16 or int8 GEMMs; a token's result
// then does not depend on the batch or the split (every pass of a prompt takes this path, a
// one-token block of a longer prompt too), and differs from the fp32 decode() of the same token
// by the activations' rounding (docs/KERNELS.md "Prompt path").
// Otherwise (the fp32 path): one multi() call per expert and chunk of up to 16 tokens (the
// expert's rows read once per chunk), each (token, k) output into a zeroed slot, and the slots
// are added to x in k order, exactly like the reference path. One token (decode) runs its K
// experts in one decode() call (two team phases instead of 2K, 4x the tasks per phase), which
// computes the same expression: the same bits. So on the fp32 path prefill and decode produce
// identical bits for a token whatever the batch, raw and packed stores give identical bits (on
// both paths), and the scalar kernel matches the reference path bit for bit; the SIMD kernels
// differ from it by fp32 rounding only.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cpu/kernels/expert_kernel.h"
#include "cpu/kernels/prompt_bf16.h"
#include "cpu/kernels/prompt_kernel.h"
#include "cpu/team/worker_team.h"
#include "model/config.h"
#include "model/weights.h"
#include "store/store.h"
#include "telemetry/telemetry.h"

namespace neural::cpu {

class StoreMoe {
public:
    StoreMoe(const ModelConfig& config, const ModelWeights& weights,
             const store::ExpertStore& store, KernelIsa isa, std::unique_ptr<WorkerTeam> team);
    // Experts from the checkpoint's MXFP4 tensors in `weights` (no store).
    StoreMoe(const ModelConfig& config, const ModelWeights& weights, KernelIsa isa,
             std::unique_ptr<WorkerTeam> team);
    ~StoreMoe();

    // h [T, H] normalized hidden states; sel/gate [T, K] router choices and weights; x [T, H]
    // residual stream, updated in place. `cancel`, when set, is checked before each expert:
    // throws neural::Cancelled (x is then partly updated; the caller drops the pass).
    // `prompt`: the tokens take the prompt kernel where one is set (CpuModel::forward decides:
    // a prompt pass, or a context pass on the context prompt path); else a single token runs on
    // decode() and more tokens on multi() per expert, decode's bits.
    void run(int layer, const float* h, std::int64_t tokens, const int* sel, const float* gate,
             float* x, const std::atomic<bool>* cancel = nullptr, bool prompt = false) const;

    // Runs the experts of prompt passes on the int8 prompt kernel (all of a layer's experts in
    // one team job) instead of multi() per expert and 16 tokens; nullptr: back to the fp32
    // kernels. A pass of one token (decode) always runs on decode().
    void set_prompt_kernel(std::unique_ptr<PromptKernel> prompt) { prompt_ = std::move(prompt); }
    const PromptKernel* prompt_kernel() const { return prompt_.get(); }
    // Likewise on the bf16 prompt kernel (taken before the int8 one where both are set).
    void set_bf16_prompt_kernel(std::unique_ptr<Bf16PromptKernel> prompt) {
        bf16_ = std::move(prompt);
    }
    const Bf16PromptKernel* bf16_prompt_kernel() const { return bf16_.get(); }

    // "avx512 kernel, bf16 amx-bf16 prompts, persistent team, 8 threads"
    std::string describe() const;
    const WorkerTeam& team() const { return *team_; }
    // The team, for the dense kernels of the same forward pass (one set of threads for both).
    WorkerTeam& worker_team() const { return *team_; }
    KernelIsa isa() const { return kernel_->isa(); }

    // Where run() adds the team's fallbacks (MoeCounters::team_fallbacks); nullptr: not counted.
    void set_counters(telemetry::MoeCounters* counters) { counters_ = counters; }

private:
    // Expert e of `layer`: its store record (verified on first use) or checkpoint tensors.
    ExpertInput input(int layer, int e) const;

    const ModelConfig& config_;
    const ModelWeights& weights_;
    const store::ExpertStore* store_;  // nullptr: the checkpoint's tensors
    std::unique_ptr<WorkerTeam> team_;
    std::unique_ptr<ExpertKernel> kernel_;     // owns scratch: one forward pass at a time
    std::unique_ptr<PromptKernel> prompt_;     // likewise; nullptr: prompts on kernel_ too
    std::unique_ptr<Bf16PromptKernel> bf16_;   // likewise
    mutable std::vector<ExpertInput> inputs_;  // [E] the layer's experts for prompt_
    mutable std::vector<float> slots_;         // [T * K, H]
    telemetry::MoeCounters* counters_ = nullptr;
};

}  // namespace neural::cpu
