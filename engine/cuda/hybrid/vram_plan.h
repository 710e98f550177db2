// The hybrid CUDA backend's GPU memory for a model shape, allocation by allocation, and what is
// sized from it: the auto context, the sliding layers' K/V ring, the prompt rows the GPU holds,
// the GPU prefill's pinned host memory. Pure functions of ModelConfig and GpuOptions' values,
// built without CUDA too, so the backend (setup.cpp, prefill.cpp) and `neural fit`
// (runtime/fit.h) plan with the same ones.
#pragma once

#include <cstdint>
#include <string>

#include "model/config.h"

namespace neural {

// GPU memory of the hybrid CUDA backend for a shape, allocation by allocation as
// engine/cuda/hybrid/setup.cpp makes them (each rounded up to 256 bytes).
struct GpuMemoryLayout {
    std::uint64_t core_bytes = 0;        // bf16 dense core without the embedding, router outputs
    std::uint64_t kv_bytes = 0;          // fp32 K and V of every layer for `context` positions
    std::uint64_t activation_bytes = 0;  // per-token buffers, logits, slot table
    std::uint64_t reserve_bytes = 0;     // kept free for graphs and the allocator
    std::uint64_t prefill_bytes = 0;     // GPU prefill: prompt rows, block scratch, scratch slots
    std::uint64_t slot_bytes = 0;        // one expert slot (a raw record, 256-byte aligned)
    // Slots that fit in `budget` after everything above (0 when not even the core fits).
    std::int64_t slots_for(std::uint64_t budget) const;
    std::uint64_t fixed_bytes() const {
        return core_bytes + kv_bytes + activation_bytes + reserve_bytes + prefill_bytes;
    }
};
// prefill_block / scratch_slots / kv_ring / prompt_rows: GpuOptions' (0 blocks: prompts token by
// token, no buffers; kv_ring -1: auto, 0: no ring; prompt_rows 0: auto), defaults as GpuOptions'.
GpuMemoryLayout gpu_memory_layout(const ModelConfig& config, std::int64_t context,
                                  int prefill_block = 2048, int scratch_slots = 4, int kv_ring = -1,
                                  int prompt_rows = 0);

// Positions of a prompt the GPU prefill holds at once: its residual stream, the experts' sum and
// the experts' input (three fp32 rows of `hidden` per position in VRAM, one pinned on the host).
// A longer prompt runs in chunks of that many positions, each chunk layer-major like a prompt of
// its own (a non-resident expert is staged once per chunk and layer). `rows` > 0: that many
// (GpuOptions::prompt_rows, at most the context); 0 (auto): the whole context where its rows
// cost at most kPromptRowsShare of the experts' bytes, else kPromptChunkRows. gpt-oss-120b at
// 16,384 positions: 566 MB = 0.9% of 61 GB of experts, whole prompts; gpt-oss-20b: 5.5% of 10.2
// GB, chunks of 4,096, which leaves 425 MB (33 slots, 4.3% of its experts) to the expert slots
// for the decode, where each missed expert costs a CPU or PCIe read (docs/CUDA.md "Prefill").
inline constexpr std::int64_t kPromptChunkRows = 4096;
inline constexpr double kPromptRowsShare = 0.02;
std::int64_t prompt_rows(const ModelConfig& config, std::int64_t context, int rows = 0);

// The GPU context when --context is auto (GpuOptions::context <= 0): kAutoContext positions (at
// most the model's maximum) where the VRAM budget keeps at least min_slots expert slots beside
// them (about 1 GiB of slots or 4% of the experts, whichever is more), else the largest multiple of
// 1024 down to kMinAutoContext that does, else kMinAutoContext. `pool_bytes` >= 0: the pool was
// asked for (--pool / --pool-slots), so the context must leave that much instead. The backend
// (engine/cuda/hybrid/setup.cpp) and plan_fit choose with this one function.
inline constexpr std::int64_t kAutoContext = 16384, kMinAutoContext = 2048;
struct ContextChoice {
    std::int64_t context = 0;
    std::int64_t wanted = 0;     // kAutoContext capped at the model's maximum
    std::int64_t min_slots = 0;  // the slots the context had to leave
    std::string line;            // one line: the choice and why
};
ContextChoice auto_context(const ModelConfig& config, std::uint64_t budget_bytes,
                           int prefill_block = 2048, int scratch_slots = 4, int kv_ring = -1,
                           std::int64_t pool_bytes = -1, int prompt_rows = 0);

// Positions of K/V a sliding-window layer keeps with GpuOptions::kv_ring = `ring`. A ring holds
// the window and, for the GPU prefill, a block of new positions beside it: ring >= window +
// min(prefill_block, context) - 1 (prefill_block 0: token by token, ring >= window); -1 (auto)
// is exactly that, a smaller explicit ring is a clear error. Returns 0 (no ring) for ring 0, a
// ring not smaller than the context, or a model without sliding layers.
int kv_ring_positions(const ModelConfig& config, std::int64_t context, int ring, int prefill_block);

// Pinned host memory of the GPU prefill with GpuOptions' defaults (engine/cuda/hybrid/):
// one record per staging thread and per early-staging buffer (none with a pinned store, whose
// records are copied from the store itself), the prompt's expert input rows and routing, the CPU
// path's rows. RAM the OS cannot page out; neural fit counts it.
std::uint64_t prefill_pinned_bytes(const ModelConfig& config, std::int64_t context,
                                   bool store_pinned = false, int prompt_rows = 0);

}  // namespace neural
