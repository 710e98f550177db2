// The screened lm_head (docs/KERNELS.md "Screened lm_head"): the exact bf16 logits of only the
// vocabulary rows that can still matter to the token's consumer, found by screening every row
// with an int8 copy of the lm_head and a rigorous bound on the screen's error. The logits it
// gives are the bf16 dense kernel's bits for every row it computes (the same kernel, the same
// per-row arithmetic); rows it proves cannot matter are -infinity.
//
// The copy is the int8 dense kernels' layout (dense_int8.h: blocks of 32 weights, one bf16
// scale each), made once at load from the checkpoint's bf16 matrix, with two numbers per row:
// A_r = max |w| over the row and E_r = max |w - w'| (w' the dequantized int8 weight). For a
// token's normed activation x, the bf16 kernel's operand h = hi + lo (dense_kernel.h) and the
// int8 kernel's operand x' (per-block int8), the screen value s_r (the int8 kernel's output)
// and the exact value y_r (the bf16 kernel's output) satisfy
//
//   |s_r - y_r| <= A_r * alpha + E_r * beta + slack                       (the bound)
//   alpha = ||h - x'||_1 + g_bf * ||h||_1' + g_i8 * ||x'||_1,   beta = (1 + g_i8) * ||x'||_1
//
// with ||h||_1' = sum |hi| + |lo|, g_bf = gamma(4 * ceil(cols / 32) + 5) and g_i8 =
// gamma(ceil(cols / 64) + 7) (gamma(n) = n u / (1 - n u), u = 2^-24) the kernels' float
// rounding, and `slack` covering flushed subnormals; docs/KERNELS.md has the proof.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "cpu/kernels/dense_int8.h"
#include "cpu/kernels/dense_kernel.h"
#include "model/weights.h"

namespace neural::cpu {

class WorkerTeam;

// The per-token constants of the bound: bound(r) = A_r * alpha + E_r * beta + slack.
struct ScreenBound {
    double alpha = 0, beta = 0, slack = 0;
    bool finite = false;  // false: x has a NaN or an infinity, nothing can be proved
};

// What the token's consumer reads (runtime/forward.h LogitsScreen, in the kernels' terms).
struct ScreenRequest {
    std::int64_t valid = 0;  // rows [0, valid) may be read; the rest never are
    // Exact values of every row that can rank among the top_k largest (1: the argmax) ...
    int top_k = 1;
    // ... or, with window > 0, of every row that can lie within `window` of the largest.
    double window = 0;
    // Rows whose values the consumer maps through penalise(ctx, id, v) before ranking them (a
    // non-decreasing map per id: the sampler's penalties), sorted ascending.
    std::span<const std::int32_t> penalised;
    float (*penalise)(const void* ctx, std::int32_t id, float v) = nullptr;
    const void* ctx = nullptr;
};

struct ScreenStats {
    std::int64_t exact_rows = 0;  // rows computed by the bf16 kernel
    bool full = false;            // the screen proved nothing useful: the whole head ran
};

class LmHeadScreen {
public:
    // Top-k consumers with more than this many ranks run the whole head.
    static constexpr int kMaxTopK = 256;

    // Quantizes `w` (bf16 [rows, cols], the lm_head) on `team` and measures A_r and E_r. The
    // screen runs on the int8 kernel `isa`.
    LmHeadScreen(WorkerTeam& team, const Bf16View& w, Int8Isa isa);

    // The int8 copy plus the per-row constants; bytes_for: the same before making one (neural
    // fit's RAM plan).
    std::uint64_t bytes() const;
    static std::uint64_t bytes_for(std::int64_t rows, std::int64_t cols);
    const Int8Matrix& matrix() const { return q_; }
    float row_max(std::int64_t r) const { return amax_[static_cast<std::size_t>(r)]; }
    float row_error(std::int64_t r) const { return err_[static_cast<std::size_t>(r)]; }

    // The bound's per-token constants for activation x [cols].
    ScreenBound bound(const float* x) const;
    // bound(r) for this token (+infinity for a row with a non-finite weight).
    double row_bound(std::int64_t r, const ScreenBound& b) const;
    // The screen values s[rows] (the int8 kernel's output) for x.
    void screen(WorkerTeam& team, const float* x, float* s) const;

    // The logits of one token for `request`: logits[r] is the bf16 kernel's value of row r for
    // every row that can matter (dense.run_rows on `w`, the matrix this screen was made from),
    // -infinity for the others. Where nothing useful can be proved (a NaN or infinity in x or
    // in a candidate's exact value, more than a quarter of the rows left, top_k > kMaxTopK) it
    // runs the whole head on `dense` (stats->full). logits has w.rows floats.
    void run(WorkerTeam& team, const DenseKernel& dense, const Bf16View& w, const float* x,
             const ScreenRequest& request, float* logits, ScreenStats* stats = nullptr) const;

private:
    Int8DenseKernel int8_;
    Int8Matrix q_;
    std::vector<float> amax_, err_;  // A_r, E_r (+infinity: a NaN or infinity in the row)
    std::int64_t rows_ = 0, cols_ = 0;
};

}  // namespace neural::cpu
