// The tokens of a prompt pass grouped by expert, for both prompt kernels (prompt_kernel.h, int8;
// prompt_bf16.h, bf16): one slot per (token, k), the slots of one expert contiguous, the experts
// ordered by their token count. Baseline code (defined in prompt_kernel.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cpu/kernels/expert_kernel.h"

namespace neural::cpu {

struct PromptGroups {
    // Checks K and every selection (sel [T][K] of `experts`), counts each expert's tokens, orders
    // the used experts biggest group first (ties by id: the longest tasks are claimed first),
    // checks that each has a whole record and that all share one shape, and lays out the slots.
    // Throws neural::Error, its message starting with `kernel`. Reuses the vectors' memory.
    void build(const char* kernel, std::span<const ExpertInput> experts, std::int64_t T, int K,
               const int* sel);
    int n_used() const { return static_cast<int>(used.size()); }

    std::vector<std::int32_t> count;       // [E] tokens routed to each expert
    std::vector<int> used;                 // [n_used] expert ids, biggest group first
    std::vector<std::int32_t> rank;        // [E] position in `used`, -1 for an unused expert
    std::vector<std::int32_t> slot_begin;  // [n_used + 1] first slot of each used expert
    std::vector<std::int32_t> slots;       // [T * K] slot -> t * K + k
    std::vector<std::int32_t> row_of;      // [T * K] t * K + k -> slot
    std::vector<std::int32_t> fill;        // [n_used] next free slot while laying out
    std::int32_t max_count = 0;            // the biggest group
    std::int64_t hidden = 0, inter = 0;    // the experts' H and I
};

}  // namespace neural::cpu
