#include "cuda/hybrid/vram_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "cpu/kernels/expert_record.h"
#include "cuda/launch_shapes.h"
#include "neural/error.h"

namespace neural {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::uint64_t aligned(std::uint64_t bytes) {
    return (bytes + kVramAlign - 1) / kVramAlign * kVramAlign;
}

std::uint64_t expert_count(const ModelConfig& c) {
    return static_cast<std::uint64_t>(c.num_layers) * static_cast<std::uint64_t>(c.num_experts);
}

// The block the K/V ring and the auto context are sized for: 0 when prompts run token by token.
int ring_block(const GpuOptions& o) { return o.prefill_order == "token" ? 0 : o.prefill_block; }

// Every row that does not depend on the budget (all but the pool and the reserve), in the order
// the backend allocates them, with what they are sized from.
VramPlan fixed_plan(const ModelConfig& c, const GpuOptions& o, std::int64_t context) {
    const std::uint64_t H = static_cast<std::uint64_t>(c.hidden_size),
                        I = static_cast<std::uint64_t>(c.intermediate_size),
                        E = static_cast<std::uint64_t>(c.num_experts),
                        K = static_cast<std::uint64_t>(c.experts_per_token),
                        Q = static_cast<std::uint64_t>(c.q_dim()),
                        KV = static_cast<std::uint64_t>(c.kv_dim()),
                        V = static_cast<std::uint64_t>(c.vocab_size),
                        L = static_cast<std::uint64_t>(c.num_layers),
                        nq = static_cast<std::uint64_t>(c.num_heads),
                        d = static_cast<std::uint64_t>(c.head_dim);
    VramPlan p;
    p.context = std::max<std::int64_t>(context, 1);
    const auto ctx = static_cast<std::uint64_t>(p.context);
    p.slot_bytes = expert_slot_bytes(c);
    p.kv_ring = kv_ring_positions(c, p.context, o.kv_ring, ring_block(o));
    p.attention_splits = static_cast<int>(std::clamp<std::uint64_t>(ctx / 512, 1, 16));
    p.gpu_prefill = o.prefill_order != "token" && c.head_dim == cuda::shape::kPrefillHeadDim;
    const auto add = [&](const char* name, VramUse use, std::uint64_t count, std::uint64_t bytes) {
        if (count > 0) p.rows.push_back({name, use, count, aligned(bytes)});
    };
    using U = VramUse;
    // The dense core (bf16), per layer and then the final norm and the lm_head
    // (DeviceModel::upload_dense_core); each layer's router outputs beside it.
    add("layer norms", U::core_weights, 2 * L, 2 * H);
    add("QKV weights", U::core_weights, L, 2 * (Q + 2 * KV) * H);
    add("QKV bias", U::core_weights, L, 2 * (Q + 2 * KV));
    add("output projection", U::core_weights, L, 2 * H * Q);
    add("output bias", U::core_weights, L, 2 * H);
    add("sinks", U::core_weights, L, 2 * nq);
    add("router", U::core_weights, L, 2 * E * H);
    add("router bias", U::core_weights, L, 2 * E);
    add("expert gate_up biases", U::core_weights, L, 2 * E * 2 * I);
    add("expert down biases", U::core_weights, L, 2 * E * H);
    add("router outputs", U::decode_buffers, 3 * L, 4 * K);  // selected, slots, gates
    add("final norm", U::core_weights, 1, 2 * H);
    add("lm_head", U::core_weights, 1, 2 * V * H);
    // RoPE's frequencies and the K/V cache (init_kv_cache): fp32 K and V of every layer, a
    // sliding layer's ring where there is one.
    add("RoPE frequencies", U::kv_cache, 1, 4 * (d / 2));
    std::uint64_t sliding = 0;
    for (std::uint64_t l = 0; l < L; ++l)
        sliding += l < c.layer_is_sliding.size() && c.layer_is_sliding[l] ? 1 : 0;
    const auto ring = static_cast<std::uint64_t>(p.kv_ring);
    add("K/V cache", U::kv_cache, 2 * (L - sliding), 4 * ctx * KV);
    add("K/V cache (sliding layers)", U::kv_cache, 2 * sliding, 4 * (ring > 0 ? ring : ctx) * KV);
    // The decode graphs' buffers (DecodeStep's constructor) and the slot table.
    add("decode hidden rows", U::decode_buffers, 3, 4 * H);  // residual, normed, experts' sum
    add("decode QKV", U::decode_buffers, 1, 4 * (Q + 2 * KV));
    add("decode attention", U::decode_buffers, 1, 4 * Q);
    add("attention scratch", U::decode_buffers, 1,
        4 * nq * static_cast<std::uint64_t>(p.attention_splits) * (d + 2));
    add("router logits", U::decode_buffers, 1, 4 * E);
    add("expert activations", U::decode_buffers, 1, 4 * K * I);
    add("logits", U::decode_buffers, 1, 4 * V);
    add("position", U::decode_buffers, 1, 4);
    add("decode counters", U::decode_buffers, 1, 4 * (1 + nq));
    add("slot table", U::decode_buffers, 1, 4 * L * E);
    // The GPU prefill (head_dim 64 only; PromptPipeline's constructor): prompt-sized rows (residual
    // stream, experts' sum, their input; routing), block-sized buffers, the scratch slots. The
    // second act rows of --expert-streams 2 and grouped GEMM's down rows are the QKV rows where
    // those are as wide (gpt-oss), else their own.
    if (p.gpu_prefill) {
        if (o.prefill_block < 1) fail("--prefill-block must be at least 1");
        if (o.scratch_slots < 1) fail("--scratch must be at least 1");
        if (o.prompt_rows < 0) fail("--prompt-rows must be 0 (auto) or more");
        p.prefill_block = static_cast<int>(std::min<std::int64_t>(o.prefill_block, p.context));
        p.prompt_rows = prompt_rows(c, p.context, o.prompt_rows);
        const auto B = static_cast<std::uint64_t>(p.prefill_block),
                   R = static_cast<std::uint64_t>(p.prompt_rows);
        add("prompt rows", U::prefill_buffers, 3, 4 * R * H);
        add("prefill routing", U::prefill_buffers, 3, 4 * ctx * K);  // selected, gates, entries
        add("prefill hidden block", U::prefill_buffers, 1, 4 * B * H);
        add("prefill QKV", U::prefill_buffers, 1, 4 * B * (Q + 2 * KV));
        add("prefill attention", U::prefill_buffers, 1, 4 * B * Q);
        add("prefill router logits", U::prefill_buffers, 1, 4 * B * E);
        add("prefill expert activations", U::prefill_buffers, 1, 4 * B * I);
        add("prefill second expert activations", U::prefill_buffers,
            o.expert_streams == 2 && Q + 2 * KV < I ? 1 : 0, 4 * B * I);
        add("prefill down rows", U::prefill_buffers, o.grouped_gemm && Q + 2 * KV < H ? 1 : 0,
            4 * B * H);
        add("prefill scratch slots", U::scratch_slots, 1,
            static_cast<std::uint64_t>(o.scratch_slots) * p.slot_bytes);
        // The streamed misses' per-choice scratch slots and slices (streamed_misses.cpp): where
        // --stream-misses may stream (it needs two scratch slots; whether it does is chosen at
        // load from the probes).
        add("streamed misses", U::decode_buffers,
            o.stream_misses != 0 && o.scratch_slots >= 2 ? 1 : 0, 4 * 3 * K);
    }
    return p;
}

}  // namespace

const char* vram_use_name(VramUse use) {
    switch (use) {
        case VramUse::core_weights:
            return "core weights";
        case VramUse::kv_cache:
            return "K/V cache";
        case VramUse::decode_buffers:
            return "decode buffers";
        case VramUse::prefill_buffers:
            return "prefill buffers";
        case VramUse::scratch_slots:
            return "scratch slots";
        case VramUse::expert_slots:
            return "expert slots";
        case VramUse::reserve:
            return "reserve";
    }
    return "?";
}

std::uint64_t vram_margin(std::uint64_t total_bytes) {
    return std::max(kVramMinMargin, static_cast<std::uint64_t>(kVramMarginShare *
                                                               static_cast<double>(total_bytes)));
}

VramBudget vram_budget(const GpuOptions& o, const VramDevice& dev) {
    VramBudget b;
    if (o.vram_budget_gib > 0) {
        b.bytes = static_cast<std::uint64_t>(o.vram_budget_gib * kGiB);
        if (b.bytes > dev.free_bytes) {
            fail("--vram-budget {:.2f} GiB is more than the {:.2f} GiB free on {}",
                 o.vram_budget_gib, static_cast<double>(dev.free_bytes) / kGiB, dev.name);
        }
        b.line = fmt::format("--vram-budget {:.2f} GiB", o.vram_budget_gib);
        return b;
    }
    const std::uint64_t margin = vram_margin(dev.total_bytes);
    b.bytes = dev.free_bytes > margin ? dev.free_bytes - margin : 0;
    b.line = fmt::format(
        "{:.2f} GiB free on {} minus a {:.2f} GiB margin for the display and other programs",
        static_cast<double>(dev.free_bytes) / kGiB, dev.name, static_cast<double>(margin) / kGiB);
    return b;
}

std::uint64_t expert_slot_bytes(const ModelConfig& c) {
    return aligned(cpu::ExpertRecordView::raw_bytes(c.hidden_size, c.intermediate_size));
}

const VramRow* VramPlan::find(std::string_view name) const {
    for (const VramRow& r : rows) {
        if (r.name == name) return &r;
    }
    return nullptr;
}

std::uint64_t VramPlan::bytes(VramUse use) const {
    std::uint64_t b = 0;
    for (const VramRow& r : rows) b += r.use == use ? r.bytes() : 0;
    return b;
}

std::uint64_t VramPlan::total() const {
    std::uint64_t b = 0;
    for (const VramRow& r : rows) b += r.bytes();
    return b;
}

std::uint64_t VramPlan::allocated() const { return total() - bytes(VramUse::reserve); }

std::uint64_t VramPlan::fixed_bytes() const { return allocated() - bytes(VramUse::expert_slots); }

std::int64_t VramPlan::slots_for(std::uint64_t b) const {
    const std::uint64_t fixed = fixed_bytes() + kVramReserve;
    if (slot_bytes == 0 || b <= fixed) return 0;
    return static_cast<std::int64_t>((b - fixed) / slot_bytes);
}

void VramPlan::require_fits() const {
    if (!shortfall.empty()) fail("{}", shortfall);
}

ContextChoice auto_context(const ModelConfig& c, const GpuOptions& o, std::uint64_t budget) {
    ContextChoice ch;
    ch.wanted =
        std::max<std::int64_t>(1, std::min<std::int64_t>(c.max_position_embeddings, kAutoContext));
    const auto experts = static_cast<std::int64_t>(expert_count(c));
    const std::uint64_t slot = expert_slot_bytes(c);
    ch.min_slots = std::min<std::int64_t>(
        std::max<std::int64_t>(static_cast<std::int64_t>(kGiB / static_cast<double>(slot)),
                               experts / 25),
        experts);
    // An asked-for pool (--pool-slots, --pool) must fit beside the context as it is.
    const std::int64_t pool_bytes =
        o.pool_slots >= 0
            ? static_cast<std::int64_t>(static_cast<std::uint64_t>(o.pool_slots) * slot)
        : o.pool_gib >= 0 ? static_cast<std::int64_t>(o.pool_gib * kGiB)
                          : -1;
    const auto fits = [&](std::int64_t ctx) {
        const VramPlan m = fixed_plan(c, o, ctx);
        if (pool_bytes >= 0)
            return m.fixed_bytes() + kVramReserve + static_cast<std::uint64_t>(pool_bytes) <=
                   budget;
        return m.slots_for(budget) >= ch.min_slots;
    };
    const std::int64_t lo = std::min(kMinAutoContext, ch.wanted);
    ch.context = ch.wanted;
    if (!fits(ch.context)) {
        ch.context = (ch.wanted - 1) / 1024 * 1024;
        while (ch.context > lo && !fits(ch.context)) ch.context -= 1024;
        ch.context = std::max(ch.context, lo);
    }
    const std::string room = pool_bytes >= 0
                                 ? fmt::format("the asked-for pool of {:.2f} GiB",
                                               static_cast<double>(pool_bytes) / kGiB)
                                 : fmt::format("at least {} expert slots", ch.min_slots);
    ch.line = ch.context == ch.wanted
                  ? fmt::format("context {} positions of K/V on the GPU (auto: {} fit beside {})",
                                ch.context, ch.wanted, room)
                  : fmt::format(
                        "context {} positions of K/V on the GPU (auto: {} would not leave "
                        "{} in the {:.2f} GiB budget)",
                        ch.context, ch.wanted, room, static_cast<double>(budget) / kGiB);
    return ch;
}

VramPlan plan_vram(const ModelConfig& c, const GpuOptions& o, std::uint64_t budget) {
    std::int64_t context = 0;
    std::string line;
    if (o.context > 0) {
        context = std::min<std::int64_t>(o.context, c.max_position_embeddings);
    } else {
        const ContextChoice cc = auto_context(c, o, budget);
        context = cc.context;
        line = cc.line;
    }
    VramPlan p = fixed_plan(c, o, context);
    p.budget = budget;
    p.context_line = line;
    // The expert slot pool: exactly what was asked, else what the budget leaves after the rows
    // above and the reserve; never more slots than experts.
    const std::uint64_t fixed = p.fixed_bytes();
    std::int64_t slots = 0;
    if (o.pool_slots >= 0) {
        slots = o.pool_slots;
    } else if (o.pool_gib >= 0) {
        slots = static_cast<std::int64_t>(o.pool_gib * kGiB / static_cast<double>(p.slot_bytes));
    } else {
        slots = p.slots_for(budget);
    }
    p.pool_slots = std::min<std::int64_t>(slots, static_cast<std::int64_t>(expert_count(c)));
    if (p.pool_slots > 0) {
        p.rows.push_back({"expert slot pool", VramUse::expert_slots, 1,
                          static_cast<std::uint64_t>(p.pool_slots) * p.slot_bytes});
    }
    // Within the budget allocation by allocation, as the backend allocates them.
    std::uint64_t used = 0;
    for (const VramRow& r : p.rows) {
        if (used + r.bytes() <= budget) {
            used += r.bytes();
            continue;
        }
        const std::uint64_t fit = (budget - used) / r.each;
        p.shortfall = fmt::format(
            "the CUDA backend needs more than the VRAM budget of {:.2f} GiB ({}: {:.1f} MiB more "
            "after {:.2f} GiB); raise --vram-budget, lower --context or use --backend cpu",
            static_cast<double>(budget) / kGiB, r.name, static_cast<double>(r.each) / 1048576.0,
            static_cast<double>(used + fit * r.each) / kGiB);
        break;
    }
    if (p.shortfall.empty() && budget > fixed) {
        const std::uint64_t left = budget - p.allocated();
        if (left > 0)
            p.rows.push_back({"reserve", VramUse::reserve, 1, std::min(kVramReserve, left)});
    }
    return p;
}

int kv_ring_positions(const ModelConfig& c, std::int64_t context, int ring, int prefill_block) {
    if (ring < -1) fail("--kv-ring must be auto, 0 (off) or a number of positions, got {}", ring);
    const bool sliding =
        c.sliding_window > 0 &&
        std::any_of(c.layer_is_sliding.begin(), c.layer_is_sliding.end(), [](bool b) { return b; });
    if (ring == 0 || !sliding) return 0;
    const std::int64_t block =
        prefill_block > 0
            ? std::min<std::int64_t>(prefill_block, std::max<std::int64_t>(context, 1))
            : 1;
    const std::int64_t need = c.sliding_window + block - 1;
    if (ring == -1) return need < context ? static_cast<int>(need) : 0;
    if (ring < need) {
        fail(
            "--kv-ring {} is too small: a sliding layer's ring must hold its window ({}) and a "
            "prefill "
            "block ({}) beside it: at least {} positions (or --kv-ring 0)",
            ring, c.sliding_window, block, need);
    }
    return ring >= context ? 0 : ring;
}

std::int64_t prompt_rows(const ModelConfig& c, std::int64_t context, int rows) {
    const std::int64_t ctx = std::max<std::int64_t>(context, 1);
    if (rows > 0) return std::min<std::int64_t>(rows, ctx);
    const double row_bytes =
        3.0 * 4.0 * static_cast<double>(c.hidden_size) * static_cast<double>(ctx);
    const double expert_bytes =
        static_cast<double>(expert_count(c)) *
        static_cast<double>(cpu::ExpertRecordView::raw_bytes(c.hidden_size, c.intermediate_size));
    if (row_bytes <= kPromptRowsShare * expert_bytes) return ctx;
    return std::min(ctx, kPromptChunkRows);
}

std::uint64_t prefill_pinned_bytes(const ModelConfig& c, std::int64_t context, bool store_pinned,
                                   int prompt_rows_option) {
    if (c.head_dim != cuda::shape::kPrefillHeadDim) return 0;  // no GPU prefill (plan_vram)
    const GpuOptions d;
    const auto ctx = static_cast<std::uint64_t>(std::max<std::int64_t>(context, 1)),
               H = static_cast<std::uint64_t>(c.hidden_size),
               K = static_cast<std::uint64_t>(c.experts_per_token),
               E = static_cast<std::uint64_t>(c.num_experts);
    const std::uint64_t block =
        std::min<std::uint64_t>(static_cast<std::uint64_t>(d.prefill_block), ctx);
    const std::uint64_t record =
        cpu::ExpertRecordView::raw_bytes(c.hidden_size, c.intermediate_size);
    const std::uint64_t rings =
        store_pinned ? 0 : static_cast<std::uint64_t>(d.staging_threads + d.prefill_early);
    return rings * record               // staging + early rings
           + block * H * 4              // embeddings of a block
           + ctx * K * 8 + ctx * K * 4  // routing, expert entries
           + static_cast<std::uint64_t>(prompt_rows(c, context, prompt_rows_option)) * H *
                 4  // the experts' input rows
           + E * static_cast<std::uint64_t>(d.prefill_cpu_tokens) * H * 4 +
           (ctx + 1) * 4;  // CPU path rows
}

}  // namespace neural
