#include "cpu/cpu_backend.h"

#include <spdlog/spdlog.h>

#include "cpu/kernels/dense_kernel.h"
#include "neural/error.h"

namespace neural {

std::optional<cpu::KernelIsa> parse_cpu_kernel(const std::string& kernel) {
    if (kernel == "reference") return std::nullopt;
    if (kernel == "auto") return cpu::select_kernel_isa();
    if (kernel != "scalar" && kernel != "avx2" && kernel != "avx512") {
        fail("unknown kernel \"{}\" (reference, auto, scalar, avx2, avx512)", kernel);
    }
    const cpu::KernelIsa isa = kernel == "scalar" ? cpu::KernelIsa::scalar
                               : kernel == "avx2" ? cpu::KernelIsa::avx2
                                                  : cpu::KernelIsa::avx512;
    if (!cpu::kernel_isa_available(isa)) {
        fail("kernel \"{}\" cannot run on this CPU or build (available: {})", kernel,
             cpu::kernel_isa_name(cpu::best_kernel_isa()));
    }
    return isa;
}

std::optional<cpu::PromptIsa> parse_prompt_kernel(const std::string& name,
                                                  std::optional<cpu::KernelIsa> kernel) {
    if (name != "auto" && name != "int8" && name != "fp32") {
        fail("unknown prompt kernel \"{}\" (auto, int8, fp32)", name);
    }
    if (!kernel || name == "fp32") return std::nullopt;
    if (name == "int8") return cpu::best_prompt_isa();
    if (*kernel == cpu::KernelIsa::avx512 && cpu::prompt_isa_available(cpu::PromptIsa::avx512vnni))
        return cpu::PromptIsa::avx512vnni;
    return std::nullopt;
}

CpuBackend::CpuBackend(const CpuBackendInputs& in) : model_(*in.config, *in.weights, in.store) {
    model_.set_counters(in.moe);
    if (!in.kernel) return;
    if (in.store == nullptr && in.weights->layers.front().gate_up.ggml != nullptr) {
        // A GGUF's experts are in ggml's block order, which the fused kernels do not read (and
        // the dense kernels run on the fused kernels' team): the fp32 reference path, converting
        // rows as it reads them, until the GGUF is repacked into a store.
        spdlog::info(
            "a GGUF without an expert store runs on the reference path; `neural repack "
            "--checkpoint FILE.gguf` makes the store the fast kernels read");
        return;
    }
    std::string fallback;
    auto team = cpu::make_worker_team(in.team, &fallback);
    auto moe =
        in.store != nullptr
            ? std::make_unique<cpu::StoreMoe>(*in.config, *in.weights, *in.store, *in.kernel,
                                              std::move(team))
            : std::make_unique<cpu::StoreMoe>(*in.config, *in.weights, *in.kernel, std::move(team));
    if (!fallback.empty()) spdlog::warn("persistent CPU team unavailable: {}", fallback);
    const cpu::DenseIsa dense = cpu::dense_isa_for(*in.kernel);
    spdlog::debug("experts: {}; dense: {}", moe->describe(),
                  in.dense_kernels ? cpu::dense_isa_name(dense) : "fp32 reference");
    if (in.prompt) {
        moe->set_prompt_kernel(std::make_unique<cpu::PromptKernel>(
            *in.prompt, cpu::SwigluParams{in.config->swiglu_limit, in.config->swiglu_alpha}));
    }
    model_.set_store_moe(std::move(moe));
    if (in.dense_kernels) model_.set_dense_kernel(std::make_unique<cpu::DenseKernel>(dense));
}

std::string CpuBackend::describe() const {
    if (const auto* moe = model_.store_moe()) return "cpu (" + moe->describe() + ")";
    return "cpu (fp32 reference)";
}

std::string CpuBackend::experts() const {
    if (const auto* moe = model_.store_moe()) return moe->describe();
    return "reference path";
}

}  // namespace neural
