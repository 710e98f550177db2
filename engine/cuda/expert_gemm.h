// Prefill's experts: one expert over many tokens on tensor cores (gemm_tile.cuh), from a raw
// expert record in VRAM (a resident slot or a scratch slot the record was staged into):
//   act[m] = swiglu(W1 h[token_m] + b1)           (fp32 [count, I])
//   acc[token_m] = fma(gate[entry_m], W2 act[m] + b2, acc[token_m])  (fp32 [tokens, H])
// entries[m] = token * k + choice (the router's flat index). A token appears at most once per
// expert, and launches on one stream run in order, so acc is accumulated in the order the host
// issues experts (expert index order): deterministic, and the same whether the record came from
// a slot or was staged. shape as expert_mxfp4.h; h fp32 [tokens, H]; act holds >= count rows.
//
// Grouped (--grouped-gemm): up to kMaxGroupedExperts experts (jobs, in expert order) in one
// gate_up and one down launch: the same tiles, so act and W2 act + b2 are the same bits; the down
// launch stores its rows in y instead of accumulating (the jobs' tiles run concurrently), and one
// small combine launch per job then does the ungrouped fma in the ungrouped order: acc is
// bit-identical to expert_gemm over the same jobs (test CudaPrefillKernels.GroupedExpertGemm*).
// Job j's rows use act / y rows [row0, row0 + count). Host entry points only.
//
// Operands (docs/CUDA.md "Numerics"): shape.half_operands selects fp16 products (one per
// element, 11 bits of each activation) instead of bf16 hi + lo (two, ~16 bits); both are
// deterministic in the same way. fp16 needs the activations' magnitude bounded:
// with_half_operands derives the scales from a bound of the gate_up input (the MoE input is an
// RMS norm times its weight w, so |h| <= sqrt(H) * max|w|) and from the SwiGLU clamp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

#include <cuda.h>

#include "cuda/expert_mxfp4.h"
#include "cuda/kernel_path.h"

namespace neural::cuda {

// The exponent e with bound * 2^e < 2^15 (fp16's largest finite value is 65504), or nullopt
// where bound is not finite. Clamped to [-100, 100] so that 2^e is a normal float.
inline std::optional<int> half_operand_exponent(float bound) {
    if (!std::isfinite(bound)) return std::nullopt;
    int e = 0;
    (void)std::frexp(std::fabs(bound), &e);  // |bound| < 2^e
    return std::clamp(15 - e, -100, 100);
}

// `shape` with fp16 operands for a gate_up input bounded by in_bound in magnitude; the SwiGLU
// output (the down input) is bounded by the clamp: glu = g * sigmoid(alpha g) with g <= limit
// lies in [-0.279 / alpha, limit] and |clamp(u) + 1| <= limit + 1. Unchanged (bf16 hi + lo)
// where a bound is not finite, e.g. without a clamp.
inline ExpertShape with_half_operands(ExpertShape shape, float in_bound) {
    if (!(shape.alpha > 0.0f) || !(shape.limit >= 0.0f)) return shape;
    const float act_bound = std::fmax(shape.limit, 0.279f / shape.alpha) * (shape.limit + 1.0f);
    const auto in = half_operand_exponent(in_bound), act = half_operand_exponent(act_bound);
    if (!in || !act) return shape;
    shape.half_operands = true;
    shape.in_exp = *in;
    shape.act_exp = *act;
    return shape;
}

void expert_gemm(const std::uint8_t* record, int expert, const ExpertShape& shape,
                 const int* entries, int count, const float* h, const float* gate,
                 const std::uint16_t* gate_up_bias, const std::uint16_t* down_bias, float* act,
                 float* acc, CUstream stream, KernelPath path = KernelPath::fast,
                 TileWidth width = TileWidth::automatic);

// expert_gemm's two launches, for callers that put them on different streams (the backend runs
// an expert's gate_up beside the previous expert's down; act must then differ between them):
// gate_up writes act, down reads it and accumulates into acc. expert_gemm = gate_up then down.
void expert_gemm_gate_up(const std::uint8_t* record, int expert, const ExpertShape& shape,
                         const int* entries, int count, const float* h,
                         const std::uint16_t* gate_up_bias, float* act, CUstream stream,
                         KernelPath path = KernelPath::fast,
                         TileWidth width = TileWidth::automatic);
void expert_gemm_down(const std::uint8_t* record, int expert, const ExpertShape& shape,
                      const int* entries, int count, const float* act, const float* gate,
                      const std::uint16_t* down_bias, float* acc, CUstream stream,
                      KernelPath path = KernelPath::fast, TileWidth width = TileWidth::automatic);

inline constexpr int kMaxGroupedExperts = 3;  // docs/CUDA.md "Grouped GEMM": groups of 3

struct ExpertJob {
    const std::uint8_t* record = nullptr;  // the expert's raw record in VRAM
    int expert = 0;                        // its index (bias rows)
    int entry0 = 0;                        // its entries: entries[entry0 .. entry0 + count)
    int count = 0;
    int row0 = 0;  // its rows of act and y
};

// A grouped launch's jobs (a kernel parameter, passed by value): their row tiles one after the
// other, job j owns blockIdx.y in [tiles[j], tiles[j + 1]).
struct ExpertGroup {
    ExpertJob job[kMaxGroupedExperts];
    int tiles[kMaxGroupedExperts + 1];
    int jobs;
};

void expert_gemm_grouped(const ExpertJob* jobs, int job_count, const ExpertShape& shape,
                         const int* entries, const float* h, const float* gate,
                         const std::uint16_t* gate_up_bias, const std::uint16_t* down_bias,
                         float* act, float* y, float* acc, CUstream stream,
                         TileWidth width = TileWidth::automatic);

}  // namespace neural::cuda
