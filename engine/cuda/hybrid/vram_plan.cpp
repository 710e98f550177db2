#include "cuda/hybrid/vram_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "backend/backend.h"
#include "cpu/kernels/expert_record.h"
#include "neural/error.h"

namespace neural {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr std::uint64_t kAlign = 256;  // the hybrid backend rounds every allocation up

std::uint64_t aligned(std::uint64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

std::uint64_t expert_count(const ModelConfig& c) {
    return static_cast<std::uint64_t>(c.num_layers) * static_cast<std::uint64_t>(c.num_experts);
}

}  // namespace

std::int64_t GpuMemoryLayout::slots_for(std::uint64_t budget) const {
    if (slot_bytes == 0 || budget <= fixed_bytes()) return 0;
    return static_cast<std::int64_t>((budget - fixed_bytes()) / slot_bytes);
}

ContextChoice auto_context(const ModelConfig& c, std::uint64_t budget, int prefill_block,
                           int scratch_slots, int kv_ring, std::int64_t pool_bytes,
                           int prompt_rows) {
    ContextChoice ch;
    ch.wanted =
        std::max<std::int64_t>(1, std::min<std::int64_t>(c.max_position_embeddings, kAutoContext));
    const auto experts = static_cast<std::int64_t>(expert_count(c));
    const GpuMemoryLayout first =
        gpu_memory_layout(c, ch.wanted, prefill_block, scratch_slots, kv_ring, prompt_rows);
    ch.min_slots = std::min<std::int64_t>(
        std::max<std::int64_t>(
            static_cast<std::int64_t>(
                kGiB / static_cast<double>(std::max<std::uint64_t>(first.slot_bytes, 1))),
            experts / 25),
        experts);
    const auto fits = [&](std::int64_t ctx) {
        const GpuMemoryLayout m =
            gpu_memory_layout(c, ctx, prefill_block, scratch_slots, kv_ring, prompt_rows);
        if (pool_bytes >= 0)
            return m.fixed_bytes() + static_cast<std::uint64_t>(pool_bytes) <= budget;
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

GpuMemoryLayout gpu_memory_layout(const ModelConfig& c, std::int64_t context, int prefill_block,
                                  int scratch_slots, int kv_ring, int prompt_rows_option) {
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
    GpuMemoryLayout m;
    const std::uint64_t per_layer =
        aligned(2 * H) * 2 + aligned(2 * (Q + 2 * KV) * H) + aligned(2 * (Q + 2 * KV)) +
        aligned(2 * H * Q) + aligned(2 * H) + aligned(2 * nq) + aligned(2 * E * H) +
        aligned(2 * E) + aligned(2 * E * 2 * I) + aligned(2 * E * H) + 3 * aligned(4 * K);
    m.core_bytes = L * per_layer + aligned(2 * H) + aligned(2 * V * H);
    const auto ctx = static_cast<std::uint64_t>(std::max<std::int64_t>(context, 1));
    const auto ring =
        static_cast<std::uint64_t>(kv_ring_positions(c, context, kv_ring, prefill_block));
    m.kv_bytes = aligned(4 * (d / 2));
    for (std::uint64_t l = 0; l < L; ++l) {
        const bool sliding = l < c.layer_is_sliding.size() && c.layer_is_sliding[l];
        m.kv_bytes += 2 * aligned(4 * (sliding && ring > 0 ? ring : ctx) * KV);
    }
    const std::uint64_t splits = std::clamp<std::uint64_t>(ctx / 512, 1, 16);
    m.activation_bytes = aligned(4 * H) * 3 + aligned(4 * (Q + 2 * KV)) + aligned(4 * Q) +
                         aligned(4 * nq * splits * (d + 2)) + aligned(4 * E) + aligned(4 * K * I) +
                         aligned(4 * V) + aligned(4) + aligned(4 * L * E);
    m.reserve_bytes = 64ull << 20;
    m.slot_bytes = aligned(cpu::ExpertRecordView::raw_bytes(c.hidden_size, c.intermediate_size));
    // GPU prefill (head_dim 64 only): prompt-sized rows (residual stream, experts' sum, their
    // bf16 input, routing), block-sized scratch, and the scratch slots. The second act rows of
    // --expert-streams 2 are the QKV rows where those are as wide (gpt-oss), else their own.
    if (prefill_block > 0 && c.head_dim == 64) {
        const std::uint64_t B =
            std::min<std::uint64_t>(static_cast<std::uint64_t>(prefill_block), ctx);
        const auto rows = static_cast<std::uint64_t>(prompt_rows(c, context, prompt_rows_option));
        m.prefill_bytes =
            3 * aligned(4 * rows * H) + 3 * aligned(4 * ctx * K) + aligned(4 * B * H) +
            aligned(4 * B * (Q + 2 * KV)) + aligned(4 * B * Q) + aligned(4 * B * E) +
            aligned(4 * B * I) + (Q + 2 * KV >= I ? 0 : aligned(4 * B * I)) +
            aligned(static_cast<std::uint64_t>(std::max(scratch_slots, 0)) * m.slot_bytes);
    }
    return m;
}

std::uint64_t prefill_pinned_bytes(const ModelConfig& c, std::int64_t context, bool store_pinned,
                                   int prompt_rows_option) {
    if (c.head_dim != 64) return 0;  // no GPU prefill (gpu_memory_layout)
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
