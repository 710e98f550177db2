#include "cpu/cpu_backend.h"

#include <spdlog/spdlog.h>

#include "neural/error.h"

namespace neural {

std::optional<cpu::KernelIsa> parse_cpu_kernel(const std::string& kernel) {
    if (kernel == "reference") return std::nullopt;
    if (kernel == "auto") return cpu::select_kernel_isa();
    if (kernel != "scalar" && kernel != "avx2" && kernel != "avx512") {
        fail("unknown kernel \"{}\" (reference, auto, scalar, avx2, avx512)", kernel);
    }
    const cpu::KernelIsa isa = kernel == "scalar" ? cpu::KernelIsa::scalar
                               : kernel == "avx2" ? cpu::KernelIsa::avx2 : cpu::KernelIsa::avx512;
    if (!cpu::kernel_isa_available(isa)) {
        fail("kernel \"{}\" cannot run on this CPU or build (available: {})", kernel,
             cpu::kernel_isa_name(cpu::best_kernel_isa()));
    }
    return isa;
}

CpuBackend::CpuBackend(const CpuBackendInputs& in) : model_(*in.config, *in.weights, in.store) {
    model_.set_counters(in.moe);
    if (in.store != nullptr && in.kernel) {
        std::string fallback;
        auto moe = std::make_unique<cpu::StoreMoe>(*in.config, *in.weights, *in.store, *in.kernel,
                                                   cpu::make_worker_team(in.team, &fallback));
        if (!fallback.empty()) spdlog::warn("persistent CPU team unavailable: {}", fallback);
        spdlog::debug("experts: {}", moe->describe());
        model_.set_store_moe(std::move(moe));
    }
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
