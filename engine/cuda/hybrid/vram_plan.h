// The hybrid CUDA backend's VRAM plan: from the model's shape, GpuOptions and the budget (which
// comes from the device's free memory and the one margin rule), every GPU allocation the backend
// makes, as named rows (name, purpose, count, bytes), and the expert slots that the budget leaves.
// The backend allocates exactly these rows, each under its name (DeviceModel::allocate, from
// setup.cpp, device_model.cpp, decode.cpp, prompt_pipeline.cpp); `neural fit`, the setup wizard
// and the auto context read the same plan. Pure functions, built without CUDA too (docs/CUDA.md "VRAM budget").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"

namespace neural {

// What a row of the plan holds.
enum class VramUse {
    core_weights,  // the bf16 dense core without the embedding (norms, attention, router, lm_head)
    kv_cache,      // fp32 K and V of every layer, and RoPE's frequencies
    decode_buffers,   // the decode graphs' activations, logits, router outputs, the slot table
    prefill_buffers,  // the GPU prefill's prompt rows, routing and block buffers
    scratch_slots,    // the GPU prefill's scratch slots (staged experts)
    expert_slots,     // the expert slot pool: what the budget leaves
    reserve,          // kept free for graphs and the allocator (not allocated)
};
// "core weights", "K/V cache", ...
const char* vram_use_name(VramUse use);

// One row: `count` device allocations of `each` bytes (every allocation rounded up to
// kVramAlign), made under `name`.
struct VramRow {
    std::string name;
    VramUse use = VramUse::core_weights;
    std::uint64_t count = 1;
    std::uint64_t each = 0;
    std::uint64_t bytes() const { return count * each; }
    bool allocated() const { return use != VramUse::reserve; }
};

inline constexpr std::uint64_t kVramAlign = 256;  // every allocation, and the slot stride
inline constexpr std::uint64_t kVramReserve = 64ull << 20;

// The one margin rule: VRAM left to the display and other programs when --vram-budget is 0 (auto):
// max(kVramMinMargin, kVramMarginShare of the card's total memory). The backend's default budget,
// `neural fit` and the setup wizard all use it.
inline constexpr std::uint64_t kVramMinMargin = 512ull << 20;
inline constexpr double kVramMarginShare = 0.05;
std::uint64_t vram_margin(std::uint64_t total_bytes);

// What the plan needs to know of the device.
struct VramDevice {
    std::string name;
    std::uint64_t free_bytes = 0;
    std::uint64_t total_bytes = 0;
};
// The budget for `options` on `device`: GpuOptions::vram_budget_gib where it is > 0 (an error
// where it is more than the device has free), else free - vram_margin(total). `line` says which.
struct VramBudget {
    std::uint64_t bytes = 0;
    std::string line;
};
VramBudget vram_budget(const GpuOptions& options, const VramDevice& device);

// Bytes of one expert slot: a raw record (the slot image), rounded up to kVramAlign.
std::uint64_t expert_slot_bytes(const ModelConfig& config);

struct VramPlan {
    std::uint64_t budget = 0;
    std::int64_t context = 0;      // K/V positions (GpuOptions::context, or auto_context's choice)
    std::string context_line;      // with an auto context: the choice and why
    int kv_ring = 0;               // the sliding layers' ring (kv_ring_positions), 0: none
    int attention_splits = 1;      // the decode attention's split-K partitions
    bool gpu_prefill = false;      // prompts on the GPU (else token by token: no prefill rows)
    int prefill_block = 0;         // positions of a prefill block (at most the context)
    std::int64_t prompt_rows = 0;  // prompt positions held at once (prompt_rows())
    std::uint64_t slot_bytes = 0;  // expert_slot_bytes
    std::int64_t pool_slots = 0;   // expert slots in the pool
    // Every row in allocation order: the allocations, then the reserve (what the budget keeps
    // free, up to kVramReserve). Rows with a count of 0 are not listed.
    std::vector<VramRow> rows;
    // Empty when the plan fits the budget; else why not, naming the budget and the first row
    // that does not fit ("raise --vram-budget, lower --context or use --backend cpu").
    std::string shortfall;

    const VramRow* find(std::string_view name) const;
    std::uint64_t bytes(VramUse use) const;
    std::uint64_t total() const;        // every row: at most the budget when the plan fits
    std::uint64_t allocated() const;    // every row but the reserve
    std::uint64_t fixed_bytes() const;  // every allocated row but the expert slot pool
    // Expert slots that `budget` leaves after the fixed rows and the reserve.
    std::int64_t slots_for(std::uint64_t budget) const;
    void require_fits() const;  // fails with `shortfall`
};

// The plan for `config` with `options` within `budget` bytes. Errors for options the plan cannot
// size (--kv-ring too small, --prefill-block / --scratch / --prompt-rows out of range); a budget
// too small is `shortfall`, not an error, so `neural fit` can plan around it.
VramPlan plan_vram(const ModelConfig& config, const GpuOptions& options, std::uint64_t budget);

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
// most the model's maximum) where the plan keeps at least min_slots expert slots beside them
// within `budget` (about 1 GiB of slots or 4% of the experts, whichever is more), else the
// largest multiple of 1024 down to kMinAutoContext that does, else kMinAutoContext. With
// --pool / --pool-slots (GpuOptions::pool_gib / pool_slots) the context must leave that pool
// instead. plan_vram chooses with it.
inline constexpr std::int64_t kAutoContext = 16384, kMinAutoContext = 2048;
struct ContextChoice {
    std::int64_t context = 0;
    std::int64_t wanted = 0;     // kAutoContext capped at the model's maximum
    std::int64_t min_slots = 0;  // the slots the context had to leave
    std::string line;            // one line: the choice and why
};
ContextChoice auto_context(const ModelConfig& config, const GpuOptions& options,
                           std::uint64_t budget);

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
