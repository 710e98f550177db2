#include "cpu/cpu_backend.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "cpu/kernels/dense_int8.h"
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

CpuDense parse_cpu_dense(const std::string& dense, cpu::KernelIsa /*kernel*/) {
    if (dense == "reference") return CpuDense::reference;
    if (dense == "bf16") return CpuDense::bf16;
    if (dense == "int8-head") return CpuDense::int8_head;
    if (dense == "int8") return CpuDense::int8;
    // The default keeps the checkpoint's bf16 weights: the int8 paths change the answers and are
    // only taken when asked for by name (docs/USER_GUIDE.md "What each setting does to the
    // answers").
    if (dense == "auto") return CpuDense::bf16;
    fail("unknown dense path \"{}\" (auto, reference, bf16, int8-head, int8)", dense);
}

CpuPrompt parse_prompt_kernel(const std::string& name, std::optional<cpu::KernelIsa> kernel) {
    if (name != "auto" && name != "bf16" && name != "bf16x2" && name != "int8" &&
        name != "int8-vnni" && name != "fp32") {
        fail("unknown prompt kernel \"{}\" (auto, bf16x2, bf16, fp32, int8, int8-vnni)", name);
    }
    CpuPrompt out;
    if (!kernel || name == "fp32") return out;
    if (name == "int8" || name == "int8-vnni") {
        out.kind = CpuPrompt::Kind::int8;
        out.int8 = cpu::best_prompt_isa();
        if (name == "int8-vnni") {
            if (!cpu::prompt_isa_available(cpu::PromptIsa::avx512vnni))
                fail("--prompt-kernel int8-vnni: this CPU has no AVX512_VNNI");
            out.int8 = cpu::PromptIsa::avx512vnni;
        }
        return out;
    }
    // auto: the bf16 GEMM on split (hi + lo) activations (exact class, the same bits on every
    // CPU) for the conversation's context -- system, tools, the first user message: the long
    // prompts -- and the fused fp32 kernels, decode's bits, from its first reply on, so the
    // replies decode computed stay in the prompt cache (docs/KERNELS.md "Context prompts"). The
    // single-rounded operand (`bf16`, as the GPU's matmuls) flips near-tied argmaxes of the
    // fixtures: by name only.
    out.kind = CpuPrompt::Kind::bf16;
    out.bf16 = cpu::select_bf16_expert_isa();
    out.operand = name == "bf16" ? cpu::Bf16PromptOperand::bf16 : cpu::Bf16PromptOperand::split;
    out.context = name == "auto";
    return out;
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
    // Prompts on AMX tiles go together: where the int8 prompt kernel runs on AMX, so do the
    // prompt blocks' dense GEMMs (--prompt-kernel int8-vnni or fp32 keep both off). The bf16
    // prompt path runs every projection and router call of a prompt pass in the tile order
    // (dense_kernel.h), whose bits are the same on AMX, AVX-512F, AVX2 and scalar code, on the
    // variant that goes with its expert GEMM's; with `fp32` prompts the dense calls keep the
    // lane tree, so prefill equals decoding token by token.
    const bool int8_prompts = in.prompt.kind == CpuPrompt::Kind::int8;
    const bool bf16_prompts = in.prompt.kind == CpuPrompt::Kind::bf16;
    const cpu::DenseIsa dense_prompt = int8_prompts && in.prompt.int8 == cpu::PromptIsa::amx_int8
                                           ? cpu::dense_amx_prompt_isa(dense)
                                       : bf16_prompts ? cpu::dense_tile_isa_for(in.prompt.bf16)
                                                      : dense;
    const cpu::DensePrompts dense_prompts =
        bf16_prompts ? cpu::DensePrompts::passes : cpu::DensePrompts::blocks;
    const cpu::Int8Isa int8 = cpu::int8_isa_for(*in.kernel);
    const cpu::SwigluParams swiglu{in.config->swiglu_limit, in.config->swiglu_alpha};
    if (int8_prompts)
        moe->set_prompt_kernel(std::make_unique<cpu::PromptKernel>(in.prompt.int8, swiglu));
    if (in.prompt.kind == CpuPrompt::Kind::bf16)
        moe->set_bf16_prompt_kernel(
            std::make_unique<cpu::Bf16PromptKernel>(in.prompt.bf16, in.prompt.operand, swiglu));
    model_.set_store_moe(std::move(moe));
    model_.set_context_prompts(in.prompt.kind == CpuPrompt::Kind::bf16 && in.prompt.context);
    const bool int8_head = in.dense == CpuDense::int8_head, int8_all = in.dense == CpuDense::int8;
    const std::string prompts =
        dense_prompt != dense ? std::string(" (prompts ") + cpu::dense_isa_name(dense_prompt) + ")"
                              : std::string();
    dense_ = in.dense == CpuDense::reference ? std::string("fp32 reference")
             : int8_head ? std::string(cpu::int8_isa_name(int8)) + " lm_head, " +
                               cpu::dense_isa_name(dense) + prompts + " attention"
             : int8_all ? std::string(cpu::int8_isa_name(int8))
                        : std::string(cpu::dense_isa_name(dense)) + prompts;
    if (in.dense == CpuDense::reference) return;
    model_.set_dense_kernel(std::make_unique<cpu::DenseKernel>(dense, dense_prompt, dense_prompts));
    if (in.dense == CpuDense::bf16 && in.lm_head_screen) {
        // Once per load, on the team (docs/KERNELS.md "Screened lm_head"): the int8 screening
        // copy of the lm_head beside the bf16 weights, which stay the logits' source.
        const auto t0 = std::chrono::steady_clock::now();
        const std::uint64_t bytes = model_.set_lm_head_screen(int8);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        spdlog::info("lm_head screen ({}): {:.2f} GB in {:.2f} s", cpu::int8_isa_name(int8),
                     static_cast<double>(bytes) / 1e9, s);
        dense_ += ", screened lm_head";
    }
    if (int8_head || int8_all) {
        // Once per load, on the team (docs/KERNELS.md "Int8 dense weights"): from here on a
        // token reads the int8 copies, and the bf16 pages of these matrices go cold.
        const auto t0 = std::chrono::steady_clock::now();
        const std::uint64_t bytes =
            model_.set_int8_kernel(std::make_unique<cpu::Int8DenseKernel>(int8), int8_all);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        spdlog::info("dense weights quantized to int8 ({}): {:.2f} GB in {:.2f} s",
                     cpu::int8_isa_name(int8), static_cast<double>(bytes) / 1e9, s);
    }
}

bool CpuBackend::prompt_matches_decode() const {
    const auto* moe = model_.store_moe();
    return moe == nullptr || model_.context_prompts() ||
           (moe->prompt_kernel() == nullptr && moe->bf16_prompt_kernel() == nullptr);
}

std::string CpuBackend::describe() const {
    if (const auto* moe = model_.store_moe()) {
        // "...; bf16x2 for the context": the prompt kernel runs a conversation's context only.
        return "cpu (" + moe->describe() + "; dense " + dense_ +
               (model_.context_prompts() ? "; bf16x2 for the context" : "") + ")";
    }
    return "cpu (fp32 reference)";
}

std::string CpuBackend::experts() const {
    if (const auto* moe = model_.store_moe()) return moe->describe();
    return "reference path";
}

}  // namespace neural
