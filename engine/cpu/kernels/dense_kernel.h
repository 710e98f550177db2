// Dense bf16 kernels of the fast CPU path: y = W x + b for the attention projections, the router
// and the lm_head, with W the checkpoint's bf16 matrix [rows, cols] read in place from the
// mapping (no fp32 copy) and x fp32 activations split into two bf16 parts once per call.
// Accumulation is fp32.
//
// One arithmetic for every variant: each x is split once per call into two bf16 numbers,
// hi = bf16(x) and lo = bf16(x - hi) (round to nearest even, subnormals to zero), so hi + lo
// carries 16 significant bits of x (bf16 alone, 8, moved the tiny fixture's logits by up to
// 0.2). Each output keeps 16 fp32 lane sums; per 32-column chunk lane j adds w[2j+1] hi[2j+1],
// w[2j] hi[2j], then w[2j+1] lo[2j+1], w[2j] lo[2j] (each bf16 x bf16 product is exact in fp32,
// so one rounding per add); the lanes are summed in a fixed tree (8 + 8, 4 + 4, 2 + 2, 1 + 1)
// and the bias added last. That is exactly what two AVX512_BF16 vdpbf16ps per chunk do, so the
// scalar reference, AVX2 (two 8-lane halves), AVX-512F (shift/mask widening + FMA) and
// AVX512_BF16 variants give the same bits for normal weights (vdpbf16ps also treats subnormal
// weights as zero and flushes subnormal sums: values below 1e-38 that change nothing in a
// gpt-oss layer).
//
// Work is split over row blocks on a WorkerTeam (the expert kernels' team, so the dense part
// and the experts share one set of threads); within a task, 4 rows at a time stay in L1 while
// every token of the call streams past them, so a prompt block reads each weight row from RAM
// once. Results do not depend on the team, its size or the schedule.
#pragma once

#include <cstdint>
#include <span>

#include "cpu/kernels/expert_bf16.h"
#include "cpu/kernels/expert_kernel.h"
#include "model/weights.h"

namespace neural::cpu {

class WorkerTeam;

// scalar, avx2, avx512 and avx512bf16 give the same bits (above). The prompt variants sum in
// the AMX-BF16 tiles' order instead ("tile order": per (token, row) and 32-column chunk two lane
// sums of the high parts, even columns and odd columns, each from +0 with one fma per column in
// column order, added to the output's sum, then the low parts' two likewise; FTZ/DAZ and round
// to nearest as the tiles; docs/KERNELS.md "bf16 expert GEMM" for the measured model), so not
// the lane tree's bits, but every token's result comes from that token alone whatever the
// batch, and all five give the same bits: amx_bf16 (the tiles, dense_amx.inl), amx_emulated
// (its code on tiles emulated in plain C++: tests only, never chosen), tile_avx512 (AVX-512F
// fmas across 16 rows), tile_avx2 (AVX2 fmas across 8 rows) and tile_scalar (the reference,
// written out one output at a time).
enum class DenseIsa : std::uint8_t {
    scalar = 0,
    avx2 = 1,
    avx512 = 2,
    avx512bf16 = 3,
    amx_bf16 = 4,
    amx_emulated = 5,
    tile_scalar = 6,
    tile_avx2 = 7,
    tile_avx512 = 8
};

// "scalar", "avx2", "avx512", "avx512bf16", "amx-bf16", "amx-emulated", "tile-scalar",
// "tile-avx2", "tile-avx512"
const char* dense_isa_name(DenseIsa isa);
// This build contains the variant and this CPU (and OS) can run it.
bool dense_isa_available(DenseIsa isa);
// Whether the variant sums in the tile order (the AMX and tile-* variants).
bool dense_isa_tile_order(DenseIsa isa);
// The fastest available variant of the lane-tree arithmetic (never a tile-order one).
DenseIsa best_dense_isa();
// The prompt variant that goes with `isa` where the int8 prompt kernel runs on AMX: amx_bf16
// where isa is avx512bf16 and the CPU has AMX-BF16, else isa.
DenseIsa dense_amx_prompt_isa(DenseIsa isa);
// The tile-order variant of the bf16 prompt path beside the bf16 expert GEMM's variant `gemm`
// (select_bf16_expert_isa: $NEURAL_BF16_GEMM forces both): amx_bf16 with the GEMM's amx_bf16
// where this build has the AMX dense variant (else tile_avx512), amx_emulated with
// amx_emulated, tile_avx512 with avx512, tile_avx2 with avx2, tile_scalar with scalar. The
// same bits whichever.
DenseIsa dense_tile_isa_for(Bf16ExpertIsa gemm);
// The dense variant that goes with an expert-kernel variant: the same instruction set, with
// vdpbf16ps when AVX-512 is chosen and the CPU has AVX512_BF16.
DenseIsa dense_isa_for(KernelIsa isa);

// One matrix of a dense call: y[t * y_stride + r] = sum_c W[r][c] x[t][c] + bias[r].
struct DenseOutput {
    const Bf16View* w = nullptr;
    const Bf16View* bias = nullptr;  // null or a view without data: no bias
    float* y = nullptr;
    std::int64_t y_stride = 0;  // floats between tokens' outputs (0: w->rows)
};

// Which calls of a forward pass run the prompt variant (DenseKernel::prompt_call).
enum class DensePrompts : std::uint8_t {
    // Every call of two or more tokens: a prompt block's projections, router and lm_head (the
    // int8 prompt path's AMX GEMMs; with `fp32` prompts the prompt variant is the decode one).
    blocks,
    // Every projection and router call of a prompt pass, whatever its token count (a one-token
    // block or pass too, so a prompt's bits do not depend on its split), never the lm_head:
    // its logits feed the sampler only, and the screened lm_head computes their rows on the
    // decode variant (the bf16 prompt path's tile order).
    passes
};

class DenseKernel {
public:
    // `isa` runs decode steps, `prompt` the calls `prompts` names (default: `isa` for all).
    // Throws neural::Error for a variant this CPU or build cannot run.
    explicit DenseKernel(DenseIsa isa = best_dense_isa());
    DenseKernel(DenseIsa isa, DenseIsa prompt, DensePrompts prompts = DensePrompts::blocks);
    DenseIsa isa() const { return isa_; }
    DenseIsa prompt_isa() const { return prompt_isa_; }
    DensePrompts prompts() const { return prompts_; }
    // Whether a call of `tokens` tokens runs the prompt variant: in a prompt pass (more than one
    // token, or flagged ForwardOptions::prompt) or not, the lm_head or not.
    bool prompt_call(std::int64_t tokens, bool prompt_pass, bool lm_head) const {
        return prompts_ == DensePrompts::passes ? prompt_pass && !lm_head : tokens >= 2;
    }

    // Every matrix in `outs` must have `cols` columns; x is [tokens, cols] fp32 (row stride
    // cols). All matrices run in one team job (q, k and v share the rounded x and one barrier).
    // `prompt`: the prompt variant (prompt_call()), else the decode one; without it, calls of
    // two or more tokens take the prompt variant.
    // Throws neural::Error for mismatched shapes or more than 4 matrices.
    void run(WorkerTeam& team, std::span<const DenseOutput> outs, const float* x,
             std::int64_t tokens, std::int64_t cols, bool prompt) const;
    void run(WorkerTeam& team, std::span<const DenseOutput> outs, const float* x,
             std::int64_t tokens, std::int64_t cols) const {
        run(team, outs, x, tokens, cols, tokens >= 2);
    }
    void run(WorkerTeam& team, const DenseOutput& out, const float* x, std::int64_t tokens,
             std::int64_t cols) const {
        run(team, std::span<const DenseOutput>(&out, 1), x, tokens, cols);
    }
    void run(WorkerTeam& team, const DenseOutput& out, const float* x, std::int64_t tokens,
             std::int64_t cols, bool prompt) const {
        run(team, std::span<const DenseOutput>(&out, 1), x, tokens, cols, prompt);
    }
    // One token, only the listed rows of w: y[r] = sum_c W[r][c] x[c] for each r in `rows`
    // (other entries of y untouched), on the single-token variant. Each row gets the bits run()
    // gives it: a row's lane tree does not depend on which rows it is computed with (the
    // screened lm_head: lm_head_screen.h). Throws neural::Error for a row outside w.
    void run_rows(WorkerTeam& team, const Bf16View& w, std::span<const std::int32_t> rows,
                  const float* x, float* y) const;

private:
    DenseIsa isa_, prompt_isa_;
    DensePrompts prompts_ = DensePrompts::blocks;
};

// x as the kernels take it: hi = bf16(x), lo = bf16(x - hi), both round to nearest even with
// subnormals flushed to signed zero (lo = 0 for inf / NaN, which hi carries).
struct DenseOperand {
    std::uint16_t hi = 0, lo = 0;
};
DenseOperand dense_split_operand(float x);

}  // namespace neural::cpu
