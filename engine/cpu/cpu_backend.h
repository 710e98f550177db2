// The CPU backend behind Model::forward (runtime/backend.h): the fp32 reference forward pass
// (reference_model.h), its experts computed either by the reference decode-then-dot loop or by
// the fused MXFP4 kernels on a worker team from an expert store (store_moe.h).
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cpu/kernels/expert_kernel.h"
#include "cpu/reference_model.h"
#include "cpu/team/worker_team.h"
#include "runtime/backend.h"

namespace neural {

// The fused kernel LoadOptions::kernel names for a store's experts: nullopt for "reference" (the
// plain path), the fastest one this CPU runs for "auto" ($NEURAL_KERNEL overrides), else
// "scalar" / "avx2" / "avx512". Throws neural::Error for an unknown name or a kernel this CPU or
// build cannot run.
std::optional<cpu::KernelIsa> parse_cpu_kernel(const std::string& kernel);

// What the CPU backend needs from the loaded model.
struct CpuBackendInputs {
  const ModelConfig* config = nullptr;
  const ModelWeights* weights = nullptr;
  const store::ExpertStore* store = nullptr;  // nullptr: experts from the checkpoint tensors
  // The fused kernel for the store's experts (parse_cpu_kernel); nullopt or no store: the
  // reference path.
  std::optional<cpu::KernelIsa> kernel;
  cpu::TeamOptions team;                   // the fused kernel's worker team
  telemetry::MoeCounters* moe = nullptr;  // where the MoE part adds its time, bytes and experts
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(const CpuBackendInputs& in);

  const char* name() const override { return "cpu"; }
  std::string describe() const override;
  std::string experts() const override;
  std::vector<float> forward(std::span<const TokenId> tokens, KvCache& cache,
                             const ForwardOptions& options) const override {
    return model_.forward(tokens, cache, options);
  }

  const CpuModel& model() const { return model_; }

 private:
  CpuModel model_;
};

}  // namespace neural
