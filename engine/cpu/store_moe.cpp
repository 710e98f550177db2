#include "cpu/store_moe.h"

#include <algorithm>
#include <span>

#include <fmt/format.h>

#include "cpu/kernels/expert_record.h"
#include "cpu/record_checks.h"
#include "neural/error.h"

namespace neural::cpu {

StoreMoe::StoreMoe(const ModelConfig& config, const ModelWeights& weights,
                   const store::ExpertStore& store, KernelIsa isa, std::unique_ptr<WorkerTeam> team)
    : config_(config),
      weights_(weights),
      store_(&store),
      team_(std::move(team)),
      kernel_(std::make_unique<ExpertKernel>(
          isa, SwigluParams{config.swiglu_limit, config.swiglu_alpha})) {}

StoreMoe::StoreMoe(const ModelConfig& config, const ModelWeights& weights, KernelIsa isa,
                   std::unique_ptr<WorkerTeam> team)
    : config_(config),
      weights_(weights),
      store_(nullptr),
      team_(std::move(team)),
      kernel_(std::make_unique<ExpertKernel>(
          isa, SwigluParams{config.swiglu_limit, config.swiglu_alpha})) {}

StoreMoe::~StoreMoe() = default;

std::string StoreMoe::describe() const {
    const std::string prompt =
        bf16_     ? fmt::format("{} {} prompts, ", bf16_prompt_operand_name(bf16_->operand()),
                                bf16_expert_isa_name(bf16_->isa()))
        : prompt_ ? fmt::format("int8 {} prompts, ", prompt_isa_name(prompt_->isa()))
                  : "";
    return fmt::format("{} kernel, {}{} team, {} threads", kernel_isa_name(kernel_->isa()), prompt,
                       team_->name(), team_->size());
}

ExpertInput StoreMoe::input(int layer, int e) const {
    const std::int64_t H = config_.hidden_size, I = config_.intermediate_size;
    const LayerWeights& w = weights_.layers[static_cast<std::size_t>(layer)];
    ExpertInput in;
    if (store_ != nullptr) {
        // A damaged record is an error naming it (checksum, escapes), never a wrong answer or a
        // wild read; checked the first time only.
        store_->verify_record(layer, e);
        const auto record = store_->record(layer, e);
        const RecordKind kind =
            store_->kind() == store::StoreKind::kRaw ? RecordKind::raw : RecordKind::packed;
        in.record = ExpertRecordView::make(record.data(), H, I, kind,
                                           store_->entry(layer, e).payload_bytes);
    } else {
        // The checkpoint's tensors were checked for dtype and shape at bind; any byte is a
        // valid MXFP4 code / E8M0 scale.
        in.record =
            ExpertRecordView::make_split(w.gate_up.row_blocks(e, 0), w.gate_up.row_scales(e, 0),
                                         w.down.row_blocks(e, 0), w.down.row_scales(e, 0), H, I);
    }
    in.gate_up_bias = w.gate_up.bias.row(e);
    in.down_bias = w.down.bias.row(e);
    return in;
}

void StoreMoe::run(int layer, const float* h, std::int64_t T, const int* sel, const float* gate,
                   float* x, const std::atomic<bool>* cancel, bool prompt) const {
    const std::int64_t H = config_.hidden_size;
    const int K = config_.experts_per_token, E = config_.num_experts;
    // Jobs the persistent team handed to its reference team during this call, for telemetry.
    const std::uint64_t fallbacks_before = counters_ != nullptr ? team_->counters().fallbacks : 0;
    struct CountFallbacks {
        const WorkerTeam& team;
        telemetry::MoeCounters* counters;
        std::uint64_t before;
        ~CountFallbacks() {
            if (counters == nullptr) return;
            const std::uint64_t n = team.counters().fallbacks - before;
            if (n != 0) counters->team_fallbacks.fetch_add(n, std::memory_order_relaxed);
        }
    } count_fallbacks{*team_, counters_, fallbacks_before};

    const bool prompt_kernel = prompt && (bf16_ || prompt_);
    if (T == 1 && !prompt_kernel && K <= ExpertKernel::kMaxExperts) {
        // decode(): x[r] = ((x[r] + w_0 y_0[r]) + w_1 y_1[r]) + ..., the expression the slots
        // below are added with (the kernels' per-row dot order does not depend on the call).
        throw_if_cancelled(cancel);
        if (store_ != nullptr) {
            verify_records(*store_, layer, std::span<const int>(sel, static_cast<std::size_t>(K)),
                           *team_);
        }
        ExpertInput in[ExpertKernel::kMaxExperts];
        for (int k = 0; k < K; ++k) {
            in[k] = input(layer, sel[k]);
            in[k].weight = gate[k];
        }
        kernel_->decode(*team_, std::span<const ExpertInput>(in, static_cast<std::size_t>(K)), h,
                        x);
        return;
    }
    if (prompt_kernel) {
        // The selected experts' records first (verify_record may throw: not inside the job);
        // those read for the first time are checked on the team.
        throw_if_cancelled(cancel);
        if (store_ != nullptr) {
            verify_records(*store_, layer,
                           std::span<const int>(sel, static_cast<std::size_t>(T * K)), *team_);
        }
        inputs_.assign(static_cast<std::size_t>(E), ExpertInput{});
        for (std::int64_t i = 0; i < T * K; ++i) {
            if (sel[i] < 0 || sel[i] >= E) fail("expert {} selected of {}", sel[i], E);
            ExpertInput& in = inputs_[static_cast<std::size_t>(sel[i])];
            if (in.record.data() == nullptr) in = input(layer, sel[i]);
        }
        if (bf16_)
            bf16_->run(*team_, inputs_, h, T, K, sel, gate, x, cancel);
        else
            prompt_->run(*team_, inputs_, h, T, K, sel, gate, x, cancel);
        return;
    }
    slots_.assign(static_cast<std::size_t>(T * K * H), 0.0f);
    std::vector<const float*> xs;
    std::vector<float*> outs;
    std::vector<float> ones;
    for (int e = 0; e < E; ++e) {
        std::vector<std::int64_t> slots;  // t * K + k
        for (std::int64_t i = 0; i < T * K; ++i) {
            if (sel[i] == e) slots.push_back(i);
        }
        if (slots.empty()) continue;
        throw_if_cancelled(cancel);
        const ExpertInput in = input(layer, e);
        for (std::size_t c = 0; c < slots.size(); c += ExpertKernel::kMaxTokens) {
            const std::size_t n = std::min<std::size_t>(ExpertKernel::kMaxTokens, slots.size() - c);
            xs.clear();
            outs.clear();
            for (std::size_t s = c; s < c + n; ++s) {
                xs.push_back(h + (slots[s] / K) * H);
                outs.push_back(slots_.data() + slots[s] * H);
            }
            ones.assign(n, 1.0f);  // slots start at 0: out = 0 + 1 * y = y exactly
            kernel_->multi(*team_, in, xs, ones, outs);
        }
    }
    for (std::int64_t t = 0; t < T; ++t) {
        for (int k = 0; k < K; ++k) {
            const float g = gate[t * K + k];
            const float* yk = slots_.data() + (t * K + k) * H;
            for (std::int64_t i = 0; i < H; ++i) x[t * H + i] += g * yk[i];
        }
    }
}

}  // namespace neural::cpu
