#include "cpu/reference_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "cpu/kernels/exp_poly.h"
#include "cpu/ops.h"
#include "cpu/parallel.h"
#include "cpu/team/worker_team.h"
#include "model/mxfp4.h"
#include "neural/error.h"
#include "platform/thread_scratch.h"

namespace neural {

CpuModel::CpuModel(const ModelConfig& config, const ModelWeights& weights,
                   const ExpertSource* experts)
    : config_(config), weights_(weights), experts_(experts), rope_(config) {}

void CpuModel::set_dense_kernel(std::unique_ptr<cpu::DenseKernel> dense) {
    if (dense && !store_moe_)
        fail("the dense kernels run on the expert kernels' team: set it first");
    if (!dense) {
        set_int8_kernel(nullptr, false);
        screen_.reset();
    }
    if (dense && config_.num_heads / config_.num_kv_heads > kMaxAttentionGroup) {
        fail(
            "the fast path's attention takes at most {} query heads per K/V head; this model has "
            "{}",
            kMaxAttentionGroup, config_.num_heads / config_.num_kv_heads);
    }
    // The attention variant follows the dense kernels' ISA. The AVX-512 and AVX2 variants give
    // the same bits (docs/KERNELS.md "Attention"); the scalar dense kernel keeps the reference.
    const bool avx512 = dense && (dense->isa() == cpu::DenseIsa::avx512 ||
                                  dense->isa() == cpu::DenseIsa::avx512bf16);
    const bool avx2 = dense && dense->isa() == cpu::DenseIsa::avx2;
    attention_isa_ = cpu::AttentionIsa::reference;
    if (avx512 && cpu::attention_isa_available(cpu::AttentionIsa::avx512)) {
        attention_isa_ = cpu::AttentionIsa::avx512;
    } else if ((avx512 || avx2) && cpu::attention_isa_available(cpu::AttentionIsa::avx2)) {
        attention_isa_ = cpu::AttentionIsa::avx2;
    }
    dense_ = std::move(dense);
}

std::uint64_t CpuModel::set_int8_kernel(std::unique_ptr<cpu::Int8DenseKernel> int8,
                                        bool attention) {
    int8_.reset();
    int8_layers_.clear();
    int8_lm_head_ = cpu::Int8Matrix();
    if (!int8) return 0;
    if (!dense_) fail("the int8 dense kernel runs beside the bf16 one: set it first");
    std::vector<Int8Layer> layers(attention ? weights_.layers.size() : 0);
    std::vector<const Bf16View*> in;
    std::vector<cpu::Int8Matrix*> out;
    for (std::size_t l = 0; l < layers.size(); ++l) {
        const LayerWeights& w = weights_.layers[l];
        for (auto [from, to] : {std::pair{&w.q_w, &layers[l].q}, std::pair{&w.k_w, &layers[l].k},
                                std::pair{&w.v_w, &layers[l].v}, std::pair{&w.o_w, &layers[l].o}}) {
            in.push_back(from);
            out.push_back(to);
        }
    }
    cpu::Int8Matrix lm_head;
    in.push_back(&weights_.lm_head);
    out.push_back(&lm_head);
    const std::uint64_t bytes = cpu::quantize_on_team(store_moe_->worker_team(), in, out);
    int8_layers_ = std::move(layers);
    int8_lm_head_ = std::move(lm_head);
    int8_ = std::move(int8);
    return bytes;
}

std::uint64_t CpuModel::set_lm_head_screen(std::optional<cpu::Int8Isa> isa) {
    screen_.reset();
    if (!isa) return 0;
    if (!dense_) fail("the screened lm_head runs beside the bf16 dense kernel: set it first");
    screen_ =
        std::make_unique<cpu::LmHeadScreen>(store_moe_->worker_team(), weights_.lm_head, *isa);
    return screen_->bytes();
}

cpu::WorkerTeam* CpuModel::token_team() const {
    return dense_ ? &store_moe_->worker_team() : nullptr;
}

void CpuModel::project(const Bf16View& w, const cpu::Int8Matrix* q8, const Bf16View* b,
                       const float* x, std::int64_t tokens, float* y, bool prompt_pass,
                       bool lm_head) const {
    if (q8 != nullptr) {
        int8_->run(store_moe_->worker_team(), cpu::Int8Output{q8, b, y, 0}, x, tokens, w.cols);
    } else {
        linear(w, b, x, tokens, y, prompt_pass, lm_head);
    }
}

void CpuModel::linear(const Bf16View& w, const Bf16View* b, const float* x, std::int64_t tokens,
                      float* y, bool prompt_pass, bool lm_head) const {
    if (dense_) {
        dense_->run(store_moe_->worker_team(), cpu::DenseOutput{&w, b, y, 0}, x, tokens, w.cols,
                    dense_->prompt_call(tokens, prompt_pass, lm_head));
    } else {
        cpu::matmul_bf16(w, b, x, tokens, y);
    }
}

namespace {

// fn(t) for t < n: as team tasks on the fast path's team for a prompt block (per-token work that
// would otherwise leave the other threads waiting: norms, RoPE, residual adds, routing), on the
// caller for one token or without a team. Per-token work, so the same bits either way.
template <class F>
void for_each_token(cpu::WorkerTeam* team, std::int64_t n, F&& fn) {
    if (team == nullptr || n < 2) {
        for (std::int64_t t = 0; t < n; ++t) fn(t);
        return;
    }
    struct Ctx {
        F* f;
        static void task(void* c, std::int64_t t, std::int32_t) { (*static_cast<Ctx*>(c)->f)(t); }
    } ctx{&fn};
    team->run(cpu::TeamPhase{n, &Ctx::task, &ctx});
}

// Attention rows of a prompt block as team tasks: task = (token, KV head).
struct AttentionJob {
    const CpuModel* model;
    void (CpuModel::*group)(int, int, const float*, std::int64_t, const KvCache&, float*) const;
    int layer, kv_heads;
    std::int64_t q_dim, p0;
    const float* q;
    const KvCache* cache;
    float* out;
    const std::atomic<bool>* cancel;
    std::atomic<bool> stopped{false};

    static void task(void* ctx, std::int64_t i, std::int32_t) {
        auto& j = *static_cast<AttentionJob*>(ctx);
        if (cancel_requested(j.cancel)) {
            j.stopped.store(true, std::memory_order_relaxed);
            return;
        }
        const std::int64_t t = i / j.kv_heads;
        const int hk = static_cast<int>(i % j.kv_heads);
        (j.model->*j.group)(j.layer, hk, j.q + t * j.q_dim, j.p0 + t, *j.cache,
                            j.out + t * j.q_dim);
    }
};

}  // namespace

std::vector<float> CpuModel::forward(std::span<const TokenId> tokens, KvCache& cache,
                                     const ForwardOptions& opt) const {
    const ModelConfig& c = config_;
    const std::int64_t T = static_cast<std::int64_t>(tokens.size());
    const std::int64_t H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), V = c.vocab_size;
    if (T == 0) fail("forward: no tokens to process");
    for (TokenId t : tokens) {
        if (t < 0 || t >= c.vocab_size) {
            fail("token id {} is outside the model's vocabulary (0..{})", t, c.vocab_size - 1);
        }
    }
    const std::int64_t pos0 = cache.size();
    if (pos0 + T > c.max_position_embeddings) {
        fail("context of {} tokens exceeds the model's maximum of {}", pos0 + T,
             c.max_position_embeddings);
    }
    if (context_prompts_ && pos0 < opt.context_end && opt.context_end < pos0 + T) {
        // The context prompt path decides by position (docs/KERNELS.md "Context prompts"): a
        // pass that straddles the context's end runs as two, the context first. A cancel in the
        // second leaves the cache as it found it, as for one pass.
        const auto head = static_cast<std::size_t>(opt.context_end - pos0);
        ForwardOptions context = opt;
        context.screen = nullptr;
        std::vector<float> logits = forward(tokens.first(head), cache, context);
        std::vector<float> rest;
        try {
            rest = forward(tokens.subspan(head), cache, opt);
        } catch (...) {
            cache.truncate(pos0);
            throw;
        }
        if (!opt.all_logits) return rest;
        logits.insert(logits.end(), rest.begin(), rest.end());
        return logits;
    }
    cache.reserve_more(T);
    // Nothing is committed before the end: a cancel leaves cache.size() at pos0, whatever K/V
    // rows past it were written.

    const std::int64_t first = opt.all_logits ? 0 : T - 1;
    const std::int64_t n_out = T - first;
    std::vector<float> logits(static_cast<size_t>(n_out * V));
    // A prompt runs in blocks of kPromptBlock tokens, all layers per block (docs/RELIABILITY.md
    // "Cancelling a prompt"): the cancel flag is checked per block and layer, per query row of
    // the attention and per expert, so a long prompt stops within one expert's work. Every
    // position's result is the same bits whatever the block (per-row ops, attention reads the
    // cache), so blocking changes no output.
    const std::int64_t B = std::min(T, kPromptBlock);
    // Every block of a prompt pass (a one-token block or pass too) takes the prompt kernels
    // (StoreMoe::run, DenseKernel::prompt_call); on the context prompt path, every position
    // before ForwardOptions::context_end and no other (a straddling pass ran as two above).
    const bool prompt = context_prompts_ ? pos0 < opt.context_end : (T > 1 || opt.prompt);
    cpu::WorkerTeam* team = token_team();
    // Residual stream x [B, H]; scratch buffers reused across blocks and layers.
    std::vector<float> x(static_cast<size_t>(B * H)), h(x.size());
    std::vector<float> q(static_cast<size_t>(B * Q)), k(static_cast<size_t>(B * KV)),
        v(static_cast<size_t>(B * KV)), attn(static_cast<size_t>(B * Q)), o(x.size());
    for (std::int64_t b0 = 0; b0 < T; b0 += B) {
        const std::int64_t n = std::min(B, T - b0);
        const std::int64_t p0 = pos0 + b0;  // position of the block's first token
        for (std::int64_t t = 0; t < n; ++t) {
            const Bf16View& e = weights_.embed;
            for (std::int64_t i = 0; i < H; ++i) {
                x[static_cast<size_t>(t * H + i)] = e.at(tokens[static_cast<size_t>(b0 + t)], i);
            }
        }
        for (int l = 0; l < c.num_layers; ++l) {
            throw_if_cancelled(opt.cancel);
            const LayerWeights& w = weights_.layers[static_cast<size_t>(l)];
            for_each_token(team, n, [&](std::int64_t t) {
                cpu::rms_norm(x.data() + t * H, w.input_norm, c.rms_norm_eps, 1, h.data() + t * H);
            });
            if (!int8_layers_.empty()) {  // q, k and v in one team job over the once-quantized h
                const Int8Layer& q8 = int8_layers_[static_cast<size_t>(l)];
                const cpu::Int8Output qkv[3] = {{&q8.q, &w.q_b, q.data(), 0},
                                                {&q8.k, &w.k_b, k.data(), 0},
                                                {&q8.v, &w.v_b, v.data(), 0}};
                int8_->run(store_moe_->worker_team(), qkv, h.data(), n, H);
            } else if (dense_) {  // q, k and v in one team job over the once-rounded h
                const cpu::DenseOutput qkv[3] = {{&w.q_w, &w.q_b, q.data(), 0},
                                                 {&w.k_w, &w.k_b, k.data(), 0},
                                                 {&w.v_w, &w.v_b, v.data(), 0}};
                dense_->run(store_moe_->worker_team(), qkv, h.data(), n, H,
                            dense_->prompt_call(n, prompt, false));
            } else {
                cpu::matmul_bf16(w.q_w, &w.q_b, h.data(), n, q.data());
                cpu::matmul_bf16(w.k_w, &w.k_b, h.data(), n, k.data());
                cpu::matmul_bf16(w.v_w, &w.v_b, h.data(), n, v.data());
            }
            for_each_token(team, n, [&](std::int64_t t) {
                rope_.apply(q.data() + t * Q, c.num_heads, p0 + t);
                rope_.apply(k.data() + t * KV, c.num_kv_heads, p0 + t);
                std::copy_n(k.data() + t * KV, KV, cache.k(l, p0 + t));
                std::copy_n(v.data() + t * KV, KV, cache.v(l, p0 + t));
            });
            // A row of a long context's full-attention layer reads every cached key: the flag is
            // checked per row, and the rows after a cancel are skipped.
            if (dense_) {
                AttentionJob job;
                job.model = this;
                job.group = &CpuModel::attention_group;
                job.layer = l;
                job.kv_heads = c.num_kv_heads;
                job.q_dim = Q;
                job.p0 = p0;
                job.q = q.data();
                job.cache = &cache;
                job.out = attn.data();
                job.cancel = opt.cancel;
                store_moe_->worker_team().run(
                    cpu::TeamPhase{n * c.num_kv_heads, &AttentionJob::task, &job});
                if (job.stopped.load(std::memory_order_relaxed)) throw Cancelled();
            }
            std::atomic<bool> stopped{false};
            if (!dense_)
                cpu::parallel_for(n, 1, [&](std::int64_t t0, std::int64_t t1) {
                    for (std::int64_t t = t0; t < t1; ++t) {
                        if (cancel_requested(opt.cancel)) {
                            stopped.store(true, std::memory_order_relaxed);
                            return;
                        }
                        attention(l, q.data() + t * Q, p0 + t, cache, attn.data() + t * Q);
                    }
                });
            if (stopped.load(std::memory_order_relaxed)) throw Cancelled();
            project(w.o_w,
                    !int8_layers_.empty() ? &int8_layers_[static_cast<size_t>(l)].o : nullptr,
                    &w.o_b, attn.data(), n, o.data(), prompt);
            for_each_token(team, n, [&](std::int64_t t) {
                float* xt = x.data() + t * H;
                const float* ot = o.data() + t * H;
                for (std::int64_t i = 0; i < H; ++i) xt[i] += ot[i];
                cpu::rms_norm(xt, w.post_norm, c.rms_norm_eps, 1, h.data() + t * H);
            });
            moe(l, h.data(), n, p0, opt, x.data(), prompt);
        }
        // Logits of this block's rows from `first` on.
        const std::int64_t from = std::max(first, b0);
        if (from < b0 + n) {
            const std::int64_t rows = b0 + n - from;
            std::vector<float> normed(static_cast<size_t>(rows * H));
            cpu::rms_norm(x.data() + (from - b0) * H, weights_.final_norm, c.rms_norm_eps, rows,
                          normed.data());
            float* out = logits.data() + (from - first) * V;
            if (rows == 1 && opt.screen != nullptr && screen_ && dense_ && !int8_) {
                screened_head(normed.data(), *opt.screen, out);
            } else {
                project(weights_.lm_head, int8_ ? &int8_lm_head_ : nullptr, nullptr, normed.data(),
                        rows, out, prompt, true);
            }
        }
    }
    cache.commit(pos0 + T);
    return logits;
}

namespace {

float penalise_one(const void* ctx, std::int32_t id, float v) {
    return static_cast<const LogitPenalties*>(ctx)->apply_one(id, v);
}

}  // namespace

// The lm_head of one position for a consumer that reads only some logits (ForwardOptions::
// screen): the screen's exact rows, -infinity elsewhere (docs/KERNELS.md "Screened lm_head").
void CpuModel::screened_head(const float* x, const LogitsScreen& want, float* logits) const {
    std::vector<std::int32_t> penalised;
    cpu::ScreenRequest req;
    req.valid = static_cast<std::int64_t>(
        std::min<std::size_t>(want.valid, static_cast<std::size_t>(config_.vocab_size)));
    req.top_k = want.top_k;
    req.window = want.window;
    if (want.penalties != nullptr) {
        penalised = want.penalties->ids();
        req.penalised = penalised;
        req.penalise = &penalise_one;
        req.ctx = want.penalties;
    }
    cpu::ScreenStats stats;
    screen_->run(store_moe_->worker_team(), *dense_, weights_.lm_head, x, req, logits, &stats);
    if (counters_ != nullptr) {
        counters_->screened_tokens.fetch_add(1, std::memory_order_relaxed);
        counters_->screened_exact_rows.fetch_add(static_cast<std::uint64_t>(stats.exact_rows),
                                                 std::memory_order_relaxed);
        if (stats.full) counters_->screened_full.fetch_add(1, std::memory_order_relaxed);
    }
}

// Attention with sinks for one query position: the sink logit joins the softmax denominator
// and has no value vector. Sliding layers see the last `sliding_window` keys including pos.
void CpuModel::attention(int layer, const float* q, std::int64_t pos, const KvCache& cache,
                         float* out) const {
    const ModelConfig& c = config_;
    const int d = c.head_dim, group = c.num_heads / c.num_kv_heads;
    const std::int64_t first = c.layer_is_sliding[static_cast<size_t>(layer)]
                                   ? std::max<std::int64_t>(0, pos - c.sliding_window + 1)
                                   : 0;
    const std::int64_t n = pos - first + 1;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const Bf16View& sinks = weights_.layers[static_cast<size_t>(layer)].sinks;
    for (int hq = 0; hq < c.num_heads; ++hq) {
        const int hk = hq / group;
        cpu::attend_with_sink(q + static_cast<std::ptrdiff_t>(hq) * d,
                              cache.k(layer, first) + hk * d, cache.v(layer, first) + hk * d,
                              cache.kv_dim(), n, d, sinks.at(hq), scale,
                              out + static_cast<std::ptrdiff_t>(hq) * d);
    }
}

// attention() for the group of query heads sharing KV head hk, on the fast path's attention
// kernel (cpu/kernels/attention_kernel.h): one task reads the group's keys and values, which
// stay in cache across its heads.
void CpuModel::attention_group(int layer, int hk, const float* q, std::int64_t pos,
                               const KvCache& cache, float* out) const {
    const ModelConfig& c = config_;
    const int d = c.head_dim, group = c.num_heads / c.num_kv_heads;
    const std::int64_t first = c.layer_is_sliding[static_cast<size_t>(layer)]
                                   ? std::max<std::int64_t>(0, pos - c.sliding_window + 1)
                                   : 0;
    const std::int64_t n = pos - first + 1;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    const Bf16View& sinks = weights_.layers[static_cast<size_t>(layer)].sinks;
    float group_sinks[kMaxAttentionGroup];  // group <= kMaxAttentionGroup: set_dense_kernel
    for (int i = 0; i < group; ++i) group_sinks[i] = sinks.at(hk * group + i);
    cpu::attend_group(attention_isa_, q + static_cast<std::ptrdiff_t>(hk) * group * d, group,
                      cache.k(layer, first) + hk * d, cache.v(layer, first) + hk * d,
                      cache.kv_dim(), n, d, group_sinks, scale,
                      out + static_cast<std::ptrdiff_t>(hk) * group * d);
}

// Router top-k + softmax over the selected logits, then the clamped SwiGLU experts, grouped by
// expert so each expert's rows are decoded once for all its tokens.
void CpuModel::moe(int layer, const float* h, std::int64_t T, std::int64_t pos0,
                   const ForwardOptions& opt, float* x, bool prompt) const {
    const ModelConfig& c = config_;
    const LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
    const std::int64_t H = c.hidden_size, I = c.intermediate_size, E = c.num_experts;
    const int K = c.experts_per_token;

    std::vector<float> logits(static_cast<size_t>(T * E));
    linear(w.router_w, &w.router_b, h, T, logits.data(), prompt);
    std::vector<int> sel(static_cast<size_t>(T * K));
    std::vector<float> gate(static_cast<size_t>(T * K));
    // Top-K per token (per-token work: on the team for a prompt block), then the observer in
    // token order on the caller.
    cpu::WorkerTeam* team = token_team();
    for_each_token(team, T, [&](std::int64_t t) {
        const float* lt = logits.data() + t * E;
        auto& order = thread_scratch<std::vector<int>, struct RouterOrder>();
        order.resize(static_cast<size_t>(E));
        std::iota(order.begin(), order.end(), 0);
        // Descending logit; ties go to the lower expert index (deterministic).
        std::partial_sort(order.begin(), order.begin() + K, order.end(),
                          [&](int a, int b) { return lt[a] > lt[b] || (lt[a] == lt[b] && a < b); });
        float m = lt[order[0]], sum = 0.0f;
        for (int k = 0; k < K; ++k) {
            const int e = order[static_cast<size_t>(k)];
            sel[static_cast<size_t>(t * K + k)] = e;
            // The fast path's gates do not take the C library's exp, whose bits differ between
            // runtimes (exp_poly.h): the same reply to a seed on Linux and Windows.
            gate[static_cast<size_t>(t * K + k)] =
                dense_ ? cpu::exp_poly(lt[e] - m) : std::exp(lt[e] - m);
            sum += gate[static_cast<size_t>(t * K + k)];
        }
        for (int k = 0; k < K; ++k) gate[static_cast<size_t>(t * K + k)] /= sum;
    });
    if (opt.observer != nullptr) {
        for (std::int64_t t = 0; t < T; ++t) {
            opt.observer->on_route(
                layer, pos0 + t, std::span<const int>(sel.data() + t * K, static_cast<size_t>(K)),
                std::span<const float>(gate.data() + t * K, static_cast<size_t>(K)));
        }
    }

    // Telemetry: the expert part is timed and its weight bytes counted (MXFP4: 16 bytes of
    // codes + 1 scale byte per 32 weights; gate_up is [2I, H], down [H, I]) per distinct expert.
    const bool counting =
        counters_ != nullptr && counters_->enabled.load(std::memory_order_relaxed);
    const auto started =
        counting ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    struct CountOnExit {
        telemetry::MoeCounters* c;
        std::chrono::steady_clock::time_point t0;
        std::uint64_t bytes, experts;
        ~CountOnExit() {
            if (c == nullptr) return;
            const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                std::chrono::steady_clock::now() - t0)
                                .count();
            c->ns.fetch_add(static_cast<std::uint64_t>(ns), std::memory_order_relaxed);
            c->bytes.fetch_add(bytes, std::memory_order_relaxed);
            c->experts.fetch_add(experts, std::memory_order_relaxed);
        }
    } count_on_exit{counting ? counters_ : nullptr, started, 0, 0};
    if (counting) {
        std::vector<char> used(static_cast<size_t>(E), 0);
        for (int e : sel) used[static_cast<size_t>(e)] = 1;
        const auto distinct = static_cast<std::uint64_t>(std::count(used.begin(), used.end(), 1));
        const auto per_expert = static_cast<std::uint64_t>(3 * H * I / 32 * 17);
        count_on_exit.experts = distinct;
        count_on_exit.bytes = distinct * per_expert;
    }

    if (store_moe_) {
        store_moe_->run(layer, h, T, sel.data(), gate.data(), x, opt.cancel, prompt);
        return;
    }
    // y[t, k, :] = expert output of token t's k-th choice; summed per token in k order below.
    std::vector<float> y(static_cast<size_t>(T * K * H));
    const float limit = c.swiglu_limit, alpha = c.swiglu_alpha;
    // Row r of expert e: from the checkpoint's tensors, or from the expert store when attached
    // (which may decode packed scales into `scale_buf`, G bytes). A GGUF checkpoint's rows are
    // converted into `block_buf` (G * 16 bytes) and `scale_buf`.
    auto expert_row = [&](Projection p, int e, std::int64_t r, std::uint8_t* block_buf,
                          std::uint8_t* scale_buf) {
        if (experts_ != nullptr) return experts_->row(layer, p, e, r, scale_buf);
        const Mxfp4Experts& m = p == Projection::kGateUp ? w.gate_up : w.down;
        return m.row(e, r, block_buf, scale_buf);
    };
    for (int e = 0; e < E; ++e) {
        std::vector<std::int64_t> slots;  // t * K + k
        for (std::int64_t i = 0; i < T * K; ++i) {
            if (sel[static_cast<size_t>(i)] == e) slots.push_back(i);
        }
        if (slots.empty()) continue;
        throw_if_cancelled(opt.cancel);
        if (experts_ != nullptr) experts_->prepare(layer, e);  // may throw: not inside parallel_for
        const auto n = static_cast<std::int64_t>(slots.size());
        std::vector<float> act(static_cast<size_t>(n * I));
        // gate_up rows are interleaved: row 2i = gate_i, row 2i+1 = up_i.
        cpu::parallel_for(I, 16, [&](std::int64_t i0, std::int64_t i1) {
            std::vector<float> g_row(static_cast<size_t>(H)), u_row(static_cast<size_t>(H));
            std::vector<std::uint8_t> g_sc(static_cast<size_t>(H / 32)), u_sc(g_sc.size());
            std::vector<std::uint8_t> g_bl(g_sc.size() * 16), u_bl(g_bl.size());
            for (std::int64_t i = i0; i < i1; ++i) {
                const ExpertRow g =
                    expert_row(Projection::kGateUp, e, 2 * i, g_bl.data(), g_sc.data());
                const ExpertRow u =
                    expert_row(Projection::kGateUp, e, 2 * i + 1, u_bl.data(), u_sc.data());
                mxfp4::decode_row(g.blocks, g.scales, static_cast<int>(w.gate_up.blocks_per_row()),
                                  g_row.data());
                mxfp4::decode_row(u.blocks, u.scales, static_cast<int>(w.gate_up.blocks_per_row()),
                                  u_row.data());
                const float bg = w.gate_up.bias.at(e, 2 * i), bu = w.gate_up.bias.at(e, 2 * i + 1);
                for (std::int64_t s = 0; s < n; ++s) {
                    const float* hs = h + (slots[static_cast<size_t>(s)] / K) * H;
                    float g = cpu::dot(g_row.data(), hs, H) + bg;
                    float u = cpu::dot(u_row.data(), hs, H) + bu;
                    g = std::min(g, limit);            // gate: clamped from above only
                    u = std::clamp(u, -limit, limit);  // up: both sides
                    const float glu = g / (1.0f + std::exp(-alpha * g));
                    act[static_cast<size_t>(s * I + i)] = glu * (u + 1.0f);
                }
            }
        });
        cpu::parallel_for(H, 16, [&](std::int64_t r0, std::int64_t r1) {
            std::vector<float> d_row(static_cast<size_t>(I));
            std::vector<std::uint8_t> d_sc(static_cast<size_t>(I / 32)), d_bl(d_sc.size() * 16);
            for (std::int64_t r = r0; r < r1; ++r) {
                const ExpertRow d = expert_row(Projection::kDown, e, r, d_bl.data(), d_sc.data());
                mxfp4::decode_row(d.blocks, d.scales, static_cast<int>(w.down.blocks_per_row()),
                                  d_row.data());
                const float b = w.down.bias.at(e, r);
                for (std::int64_t s = 0; s < n; ++s) {
                    y[static_cast<size_t>(slots[static_cast<size_t>(s)] * H + r)] =
                        cpu::dot(d_row.data(), act.data() + s * I, I) + b;
                }
            }
        });
    }
    for (std::int64_t t = 0; t < T; ++t) {
        for (int k = 0; k < K; ++k) {
            const float g = gate[static_cast<size_t>(t * K + k)];
            const float* yk = y.data() + (t * K + k) * H;
            for (std::int64_t i = 0; i < H; ++i) x[t * H + i] += g * yk[i];
        }
    }
}

}  // namespace neural
