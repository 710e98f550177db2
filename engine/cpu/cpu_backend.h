// The CPU backend behind Model::forward (backend/backend.h): the fp32 reference forward pass
// (reference_model.h), or its fast path: the fused MXFP4 expert kernels (store_moe.h, from the
// expert store or straight from the checkpoint's expert tensors) and the bf16 dense kernels
// (kernels/dense_kernel.h), all on one worker team (docs/KERNELS.md).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cpu/kernels/expert_bf16.h"
#include "cpu/kernels/expert_kernel.h"
#include "cpu/kernels/prompt_bf16.h"
#include "cpu/kernels/prompt_kernel.h"
#include "cpu/reference_model.h"
#include "cpu/team/worker_team.h"

namespace neural {

// The fused kernel LoadOptions::kernel names for a store's experts: nullopt for "reference" (the
// plain path), the fastest one this CPU runs for "auto" ($NEURAL_KERNEL overrides), else
// "scalar" / "avx2" / "avx512". Throws neural::Error for an unknown name or a kernel this CPU or
// build cannot run.
std::optional<cpu::KernelIsa> parse_cpu_kernel(const std::string& kernel);

// The dense part of the fast path (LoadOptions::dense): the fp32 reference layers, the bf16
// kernels, the int8 kernels for the lm_head (the projections and router on bf16), or the int8
// kernels for the lm_head and the attention projections (the router on bf16).
enum class CpuDense : std::uint8_t { reference, bf16, int8_head, int8 };

// LoadOptions::dense for an expert kernel: "reference", "bf16", "int8-head", "int8", or "auto"
// (bf16: the checkpoint's weights as published; the int8 paths are lossy and only taken by name).
// Throws neural::Error for an unknown name.
CpuDense parse_cpu_dense(const std::string& dense, cpu::KernelIsa kernel);

// The experts of a prompt pass (more than one token) on the fast path: the fused fp32 kernels
// (decode's bits), the bf16 expert GEMM (exact class: activations rounded to bf16 at the
// matmuls, as on the GPU; cpu/kernels/prompt_bf16.h) or the int8 prompt kernels (lossy).
struct CpuPrompt {
    enum class Kind : std::uint8_t { fp32, bf16, int8 };
    Kind kind = Kind::fp32;
    cpu::Bf16ExpertIsa bf16 = cpu::Bf16ExpertIsa::scalar;  // kind bf16: the GEMM's variant
    cpu::Bf16PromptOperand operand = cpu::Bf16PromptOperand::split;  // kind bf16
    cpu::PromptIsa int8 = cpu::PromptIsa::scalar;  // kind int8: the kernel's variant
    // The prompt kernel runs the conversation's context only (CpuModel::set_context_prompts),
    // every later position decode's kernels: `auto`.
    bool context = false;
};

// The prompt path LoadOptions::prompt_kernel names beside the fused kernel `kernel`: fp32 for
// "fp32" and the reference path (no kernel); "bf16": the bf16 GEMM (select_bf16_expert_isa: AMX, AVX-512, AVX2, else its
// scalar reference); "bf16x2" the same on split (hi + lo) activations; "auto": bf16x2 for the
// positions of a conversation's context only (CpuPrompt::context), decode's fp32 kernels after
// it; "int8": the AMX or VNNI variant, else its
// scalar reference (lossy, opt-in); "int8-vnni": the VNNI variant. Throws neural::Error for an
// unknown name or a variant this CPU cannot run.
CpuPrompt parse_prompt_kernel(const std::string& name, std::optional<cpu::KernelIsa> kernel);

// What the CPU backend needs from the loaded model.
struct CpuBackendInputs {
    const ModelConfig* config = nullptr;
    const ModelWeights* weights = nullptr;
    const store::ExpertStore* store = nullptr;  // nullptr: experts from the checkpoint tensors
    // The fused kernel (parse_cpu_kernel); nullopt: the fp32 reference path throughout.
    std::optional<cpu::KernelIsa> kernel;
    // With a kernel: its dense part (parse_cpu_dense); reference keeps the fp32 reference dense
    // layers beside the fused expert kernels.
    CpuDense dense = CpuDense::bf16;
    // With the bf16 dense part: the screened lm_head (cpu/kernels/lm_head_screen.h) for passes
    // whose consumer reads only some logits (ForwardOptions::screen).
    bool lm_head_screen = true;
    // With a kernel: the experts of passes of more than one token (parse_prompt_kernel).
    CpuPrompt prompt;
    cpu::TeamOptions team;                  // the fused kernel's worker team
    telemetry::MoeCounters* moe = nullptr;  // where the MoE part adds its time, bytes and experts
};

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(const CpuBackendInputs& in);

    const char* name() const override { return "cpu"; }
    std::string describe() const override;
    std::string experts() const override;
    std::vector<float> forward(std::span<const TokenId> tokens, KvCache& cache,
                               const ForwardOptions& options) override {
        return model_.forward(tokens, cache, options);
    }

    bool prompt_matches_decode() const override;

    const CpuModel& model() const { return model_; }

private:
    CpuModel model_;
    std::string dense_;  // the dense part, for describe(): "int8-avx512vnni", "avx512bf16", ...
};

}  // namespace neural
