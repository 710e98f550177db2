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
#include "cpu/kernels/expert_kernel.h"
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

// The int8 prompt kernel LoadOptions::prompt_kernel names beside the fused kernel `kernel`:
// nullopt for "fp32", "auto" (the fused fp32 kernels, as decode: a token gives the same bits in
// a prompt and alone) and the reference path (no kernel); "int8": the AMX or VNNI variant, else
// its scalar reference (lossy, opt-in). Throws neural::Error for an unknown name.
std::optional<cpu::PromptIsa> parse_prompt_kernel(const std::string& name,
                                                  std::optional<cpu::KernelIsa> kernel);

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
    // With a kernel: the int8 prompt kernel for the experts of passes of more than one token
    // (parse_prompt_kernel); nullopt: the fused fp32 expert kernels for those too.
    std::optional<cpu::PromptIsa> prompt;
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

    const CpuModel& model() const { return model_; }

private:
    CpuModel model_;
    std::string dense_;  // the dense part, for describe(): "int8-avx512vnni", "avx512bf16", ...
};

}  // namespace neural
