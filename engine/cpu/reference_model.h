// The fp32 CPU reference forward pass of gpt-oss (docs/MODEL.md "Forward pass"): the plain path
// every optimized backend is checked against. Weights stay bf16 / MXFP4 in the mapped checkpoint
// and are widened to fp32 row by row; all math is fp32.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "backend/forward.h"
#include "backend/kv_cache.h"
#include "cpu/kernels/attention_kernel.h"
#include "cpu/kernels/dense_int8.h"
#include "cpu/kernels/dense_kernel.h"
#include "cpu/kernels/lm_head_screen.h"
#include "cpu/rope.h"
#include "cpu/store_moe.h"
#include "model/config.h"
#include "model/expert_source.h"
#include "model/weights.h"
#include "telemetry/telemetry.h"

namespace neural {

// Tokens of a prompt that CpuModel::forward runs through all layers at a time.
inline constexpr std::int64_t kPromptBlock = 512;

class CpuModel {
public:
    // `experts`: where the MXFP4 expert rows come from (an expert store); nullptr = the
    // checkpoint's expert tensors in `weights`. Biases, router and the dense core always come
    // from `weights`. Both sources give bit-identical results.
    CpuModel(const ModelConfig& config, const ModelWeights& weights,
             const ExpertSource* experts = nullptr);

    // Runs `tokens` at positions [cache.size(), cache.size() + n) and appends them to the cache.
    // Returns logits [n_out, vocab] with n_out = n (all_logits) or 1. Throws neural::Error for a
    // token id outside the vocabulary, and neural::Cancelled (leaving the cache unchanged) when
    // cancelled: a long prompt stops within a block's attention row or expert of the cancel.
    std::vector<float> forward(std::span<const TokenId> tokens, KvCache& cache,
                               const ForwardOptions& options = {}) const;

    const ModelConfig& config() const { return config_; }

    // Computes the experts with the fused kernels from an expert store instead of the reference
    // decode-then-dot loop (nullptr: back to the reference path).
    void set_store_moe(std::unique_ptr<cpu::StoreMoe> moe) {
        store_moe_ = std::move(moe);
        if (store_moe_) store_moe_->set_counters(counters_);
    }
    const cpu::StoreMoe* store_moe() const { return store_moe_.get(); }

    // The fast path's dense part: q/k/v/o, router and lm_head by the bf16 kernels
    // (cpu/kernels/dense_kernel.h) and attention split over (token, KV head), all on the store
    // MoE's worker team, so one set of threads runs the whole pass (no OpenMP team spinning
    // beside a persistent one). Needs set_store_moe() first; nullptr: the fp32 reference ops.
    void set_dense_kernel(std::unique_ptr<cpu::DenseKernel> dense);
    const cpu::DenseKernel* dense_kernel() const { return dense_.get(); }

    // The int8 dense path (cpu/kernels/dense_int8.h) beside the bf16 kernels: quantizes the
    // lm_head, and with `attention` the attention projections (q, k, v, o) too, once on the
    // team, and runs them on the int8 kernel from then on; the router and (without
    // `attention`) the projections stay on the bf16 kernel. Needs set_dense_kernel() first;
    // nullptr drops the int8 copies. Returns the bytes of the int8 copies.
    std::uint64_t set_int8_kernel(std::unique_ptr<cpu::Int8DenseKernel> int8, bool attention);
    const cpu::Int8DenseKernel* int8_kernel() const { return int8_.get(); }
    bool int8_attention() const { return !int8_layers_.empty(); }

    // The screened lm_head (cpu/kernels/lm_head_screen.h) beside the bf16 kernels: an int8
    // screening copy of the lm_head made on the team (isa: its int8 variant), after which a
    // single-position pass with ForwardOptions::screen computes the exact bf16 logits of only
    // the rows that can matter to the consumer (the same bits for those; -infinity for the
    // others). Needs set_dense_kernel() first; nullopt drops it. Returns the copy's bytes.
    std::uint64_t set_lm_head_screen(std::optional<cpu::Int8Isa> isa);
    const cpu::LmHeadScreen* lm_head_screen() const { return screen_.get(); }

    // The context prompt path (`--prompt-kernel auto`, docs/KERNELS.md "Context prompts"): the
    // prompt kernels run the positions before ForwardOptions::context_end, whatever the pass,
    // and no other position; off: every prompt pass (two or more tokens, or
    // ForwardOptions::prompt) runs them.
    void set_context_prompts(bool on) { context_prompts_ = on; }
    bool context_prompts() const { return context_prompts_; }

    // Where the MoE part adds its time, bytes and expert count (nullptr: not counted).
    void set_counters(telemetry::MoeCounters* counters) {
        counters_ = counters;
        if (store_moe_) store_moe_->set_counters(counters);
    }

private:
    void attention(int layer, const float* q, std::int64_t pos, const KvCache& cache,
                   float* out) const;
    // The query heads of KV head `hk` (one GQA group) for one position.
    void attention_group(int layer, int hk, const float* q, std::int64_t pos, const KvCache& cache,
                         float* out) const;
    // y = W x + b over `tokens` rows: the dense kernel when set (its prompt variant where
    // DenseKernel::prompt_call says so for a call of a prompt pass or not, the lm_head or not),
    // else cpu::matmul_bf16.
    void linear(const Bf16View& w, const Bf16View* b, const float* x, std::int64_t tokens, float* y,
                bool prompt_pass, bool lm_head = false) const;
    // The same on the int8 kernel from q8, the int8 copy of w (nullptr: linear()).
    void project(const Bf16View& w, const cpu::Int8Matrix* q8, const Bf16View* b, const float* x,
                 std::int64_t tokens, float* y, bool prompt_pass, bool lm_head = false) const;
    void screened_head(const float* x, const LogitsScreen& want, float* logits) const;
    // prompt: the block belongs to a prompt pass (StoreMoe::run).
    void moe(int layer, const float* h, std::int64_t tokens, std::int64_t pos0,
             const ForwardOptions& options, float* x, bool prompt) const;
    // The team that runs a prompt block's per-token work (norms, RoPE, residual adds, routing):
    // the fast path's, nullptr on the reference path (which runs that work on the caller).
    cpu::WorkerTeam* token_team() const;

    const ModelConfig& config_;
    const ModelWeights& weights_;
    const ExpertSource* experts_ = nullptr;
    bool context_prompts_ = false;
    std::unique_ptr<cpu::StoreMoe> store_moe_;
    std::unique_ptr<cpu::DenseKernel> dense_;
    // The fast path's attention (cpu/kernels/attention_kernel.h): AVX-512 with an AVX-512 dense
    // kernel, else the reference.
    cpu::AttentionIsa attention_isa_ = cpu::AttentionIsa::reference;
    // Query heads per K/V head the fast path's attention_group takes (its sinks buffer).
    static constexpr int kMaxAttentionGroup = 64;
    struct Int8Layer {
        cpu::Int8Matrix q, k, v, o;
    };
    std::unique_ptr<cpu::Int8DenseKernel> int8_;
    std::vector<Int8Layer> int8_layers_;  // empty: the projections on the bf16 kernel
    cpu::Int8Matrix int8_lm_head_;
    std::unique_ptr<cpu::LmHeadScreen> screen_;
    telemetry::MoeCounters* counters_ = nullptr;
    cpu::Rope rope_;
};

}  // namespace neural
