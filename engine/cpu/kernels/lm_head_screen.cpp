// The screened lm_head (lm_head_screen.h; the proof of the bound and of exactness is in
// docs/KERNELS.md "Screened lm_head"). Baseline ISA: the screen itself runs on the int8 dense
// kernel, the exact rows on the bf16 dense kernel, both chosen at run time.
#include "cpu/kernels/lm_head_screen.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "cpu/team/worker_team.h"
#include "neural/error.h"
#include "platform/thread_scratch.h"

namespace neural::cpu {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kU = 0x1.0p-24;  // fp32 unit roundoff

// gamma(n) = n u / (1 - n u): the relative error bound of n fp32 roundings (Higham, "Accuracy
// and Stability of Numerical Algorithms", Lemma 3.1).
double gamma_n(double n) { return n * kU / (1.0 - n * kU); }

float bf16_bits_value(std::uint16_t v) {
    const std::uint32_t bits = static_cast<std::uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// Task = a run of groups of 4 rows: A_r and E_r from the bf16 row and its int8 copy.
struct MeasureJob {
    const Bf16View* w;
    const Int8Matrix* q;
    float* amax;
    float* err;
    std::int64_t groups_per_task;

    static void task(void* ctx, std::int64_t task, std::int32_t) {
        const auto& j = *static_cast<const MeasureJob*>(ctx);
        const Int8Matrix& q = *j.q;
        const std::int64_t g0 = task * j.groups_per_task;
        const std::int64_t g1 = std::min(q.groups(), g0 + j.groups_per_task);
        const std::int64_t cols = q.cols(), nb = q.blocks(), padded = q.padded_cols();
        for (std::int64_t g = g0; g < g1; ++g) {
            const std::uint8_t* base = q.group(g);
            for (std::int64_t i = 0; i < Int8Matrix::kGroupRows; ++i) {
                const std::int64_t r = g * Int8Matrix::kGroupRows + i;
                if (r >= q.rows()) break;
                double a = 0, e = 0;
                bool finite = true;
                for (std::int64_t b = 0; b < nb && 32 * b < cols; ++b) {
                    std::uint16_t dbits;
                    std::memcpy(&dbits, base + Int8Matrix::kGroupRows * padded + 2 * (i * nb + b),
                                2);
                    const double d = bf16_bits_value(dbits);
                    const std::uint8_t* qb = base + 256 * (b / 2) + 64 * i + 32 * (b % 2);
                    const std::int64_t n = std::min<std::int64_t>(32, cols - 32 * b);
                    for (std::int64_t c = 0; c < n; ++c) {
                        std::uint16_t wbits;
                        std::memcpy(&wbits, j.w->data + 2 * (r * cols + 32 * b + c), 2);
                        const double w = bf16_bits_value(wbits);
                        if (!std::isfinite(w)) finite = false;
                        // q * d and w - q * d are exact in double (a 7-bit integer times a
                        // bf16 number; two numbers of at most 24 significant bits whose
                        // exponents differ by at most 9 where the difference is not zero).
                        const double wq = (static_cast<int>(qb[c]) - 128) * d;
                        a = std::max(a, std::abs(w));
                        e = std::max(e, std::abs(w - wq));
                    }
                }
                // Stored as floats rounded up (A_r and E_r only ever bound from above).
                auto up = [](double v) {
                    float f = static_cast<float>(v);
                    if (static_cast<double>(f) < v) f = std::nextafter(f, INFINITY);
                    return f;
                };
                j.amax[r] = finite ? up(a) : INFINITY;
                j.err[r] = finite ? up(e) : INFINITY;
            }
        }
    }
};

}  // namespace

LmHeadScreen::LmHeadScreen(WorkerTeam& team, const Bf16View& w, Int8Isa isa)
    : int8_(isa), rows_(w.rows), cols_(w.cols) {
    if (w.data == nullptr || w.rows < 1 || w.cols < 1) fail("lm_head screen: no weights");
    const Bf16View* in[1] = {&w};
    Int8Matrix* out[1] = {&q_};
    quantize_on_team(team, in, out);
    amax_.resize(static_cast<std::size_t>(rows_));
    err_.resize(static_cast<std::size_t>(rows_));
    MeasureJob job{&w, &q_, amax_.data(), err_.data(), 64};
    team.run(TeamPhase{(q_.groups() + job.groups_per_task - 1) / job.groups_per_task,
                       &MeasureJob::task, &job});
}

std::uint64_t LmHeadScreen::bytes_for(std::int64_t rows, std::int64_t cols) {
    const std::int64_t padded = (cols + 63) / 64 * 64;
    const std::int64_t group = (4 * padded + 4 * (padded / 32) * 2 + 63) / 64 * 64;
    return static_cast<std::uint64_t>((rows + 3) / 4 * group + 2 * rows * 4);
}

std::uint64_t LmHeadScreen::bytes() const {
    return q_.bytes() + static_cast<std::uint64_t>(2 * rows_ * sizeof(float));
}

// The derivation (docs/KERNELS.md "Screened lm_head"): y_r = fl(sum w h) (bf16 kernel), s_r =
// fl(sum w' x') (int8 kernel).
//   |y_r - sum w h|    <= g_bf * sum |w| |h|'  <= g_bf * A_r * ||h||_1'
//   |s_r - sum w' x'|  <= g_i8 * sum |w'| |x'| <= g_i8 * (A_r + E_r) * ||x'||_1
//   |sum w h - sum w' x'| = |sum w (h - x') + sum (w - w') x'| <= A_r ||h - x'||_1 + E_r ||x'||_1
// g_bf: each output of the bf16 kernel is a sum of exact products through 4 adds per lane and
// 32-column chunk, 4 tree levels and the bias add: at most 4 * chunks32 + 5 roundings per term.
// g_i8: per term s = dw * dx, p = L * s (L an exact integer), then chunks64 lane adds, 4 tree
// levels and the bias: at most chunks64 + 7 roundings. The norms are summed in double (relative
// error < 2880 * 2^-53 for any gpt-oss width), covered by the factor kSum. `slack` covers what
// the fp32 arithmetic may flush: subnormal weights, scales and partial sums (FTZ / DAZ, and
// vdpbf16ps, which flushes them whatever MXCSR says), each < 2^-126 per operation.
ScreenBound LmHeadScreen::bound(const float* x) const {
    ScreenBound b;
    double h1 = 0, x1 = 0, dist = 0;
    for (std::int64_t c0 = 0; c0 < cols_; c0 += 32) {
        const int n = static_cast<int>(std::min<std::int64_t>(32, cols_ - c0));
        const Int8Operand o = int8_quantize_block(x + c0, n);  // the int8 kernel's operand
        if (!std::isfinite(o.d)) return b;
        for (int i = 0; i < n; ++i) {
            const DenseOperand s = dense_split_operand(x[c0 + i]);  // the bf16 kernel's operand
            const double hi = bf16_bits_value(s.hi), lo = bf16_bits_value(s.lo);
            const double xq = static_cast<double>(o.q[i]) * o.d;  // exact in double
            h1 += std::abs(hi) + std::abs(lo);
            x1 += std::abs(xq);
            dist += std::abs((hi + lo) - xq);
        }
    }
    constexpr double kSum = 1.0 + 0x1.0p-30;
    h1 *= kSum;
    x1 *= kSum;
    dist *= kSum;
    const double g_bf = gamma_n(4.0 * static_cast<double>((cols_ + 31) / 32) + 5.0);
    const double g_i8 = gamma_n(static_cast<double>((cols_ + 63) / 64) + 7.0);
    b.alpha = dist + g_bf * h1 + g_i8 * x1;
    b.beta = (1.0 + g_i8) * x1;
    // Each flushed value or product is < 2^-126 (times an activation for a dropped weight
    // product): far above the count of such operations times 2^-126.
    b.slack = 0x1.0p-90 * (1.0 + h1 + x1 + static_cast<double>(cols_));
    b.finite = std::isfinite(b.alpha) && std::isfinite(b.beta);
    return b;
}

double LmHeadScreen::row_bound(std::int64_t r, const ScreenBound& b) const {
    const double a = amax_[static_cast<std::size_t>(r)], e = err_[static_cast<std::size_t>(r)];
    if (!std::isfinite(a) || !std::isfinite(e) || !b.finite) return kInf;
    // The bound factor (1 + 2^-40) covers this double arithmetic's own rounding.
    return (a * b.alpha + e * b.beta + b.slack) * (1.0 + 0x1.0p-40);
}

void LmHeadScreen::screen(WorkerTeam& team, const float* x, float* s) const {
    int8_.run(team, Int8Output{&q_, nullptr, s, 0}, x, 1, cols_);
}

namespace {

// [lo, hi] around a screen value s with bound b, widened by (|s| + b) 2^-40 so the double
// subtraction / addition's rounding stays inside (lo <= s - b and hi >= s + b in the reals). A
// NaN screen value or an infinite bound: the whole line.
struct Interval {
    double lo, hi;
};
Interval interval(float s, double b) {
    const double sd = s;
    if (!std::isfinite(sd) || !std::isfinite(b)) return {-kInf, kInf};
    const double m = (std::abs(sd) + b) * 0x1.0p-40;
    return {sd - b - m, sd + b + m};
}

// The largest float <= v (v finite, or +-inf), and the smallest float >= v.
float float_down(double v) {
    float f = static_cast<float>(v);
    if (static_cast<double>(f) > v) f = std::nextafter(f, -INFINITY);
    return f;
}
float float_up(double v) {
    float f = static_cast<float>(v);
    if (static_cast<double>(f) < v) f = std::nextafter(f, INFINITY);
    return f;
}

}  // namespace

void LmHeadScreen::run(WorkerTeam& team, const DenseKernel& dense, const Bf16View& w,
                       const float* x, const ScreenRequest& req, float* logits,
                       ScreenStats* stats) const {
    if (w.rows != rows_ || w.cols != cols_) fail("lm_head screen: not the screened matrix");
    ScreenStats local;
    ScreenStats& st = stats != nullptr ? *stats : local;
    st = ScreenStats{};
    auto full = [&] {
        dense.run(team, DenseOutput{&w, nullptr, logits, 0}, x, 1, cols_);
        st.full = true;
        st.exact_rows = rows_;
    };
    const std::int64_t valid = std::clamp<std::int64_t>(req.valid, 0, rows_);
    const ScreenBound b = bound(x);
    const bool top_mode = req.window <= 0;
    if (!b.finite || valid < 1 || (top_mode && (req.top_k < 1 || req.top_k > kMaxTopK)) ||
        (top_mode && req.top_k >= valid) || !(req.window >= 0)) {
        full();
        return;
    }
    screen(team, x, logits);

    // The bounds of the values the consumer ranks: [lo, hi] of the exact logit, mapped through
    // the consumer's penalty where it has one. The penalty is non-decreasing in float, so
    // penalise(float_down(lo)) <= penalise(y) <= penalise(float_up(hi)).
    std::size_t next_pen = 0;
    auto bounds = [&](std::int64_t r) -> Interval {
        Interval iv = interval(logits[r], row_bound(r, b));
        while (next_pen < req.penalised.size() && req.penalised[next_pen] < r) ++next_pen;
        if (next_pen < req.penalised.size() && req.penalised[next_pen] == r && req.penalise) {
            const auto id = static_cast<std::int32_t>(r);
            iv.lo = req.penalise(req.ctx, id, float_down(iv.lo));
            iv.hi = req.penalise(req.ctx, id, float_up(iv.hi));
            if (std::isnan(iv.lo) || std::isnan(iv.hi)) iv = {-kInf, kInf};
        }
        return iv;
    };

    // Pass 1: the threshold. Top-k: the k-th largest lower bound (k rows are at least that, so
    // a row whose upper bound is below it ranks after k rows). Window: the largest lower bound
    // minus the window (the largest value is at least that bound).
    auto& heap = thread_scratch<std::vector<double>, struct ScreenHeap>();
    heap.clear();
    const auto k = static_cast<std::size_t>(top_mode ? req.top_k : 1);
    for (std::int64_t r = 0; r < valid; ++r) {
        const double lo = bounds(r).lo;
        if (heap.size() < k) {
            heap.push_back(lo);
            std::push_heap(heap.begin(), heap.end(), std::greater<>());
        } else if (lo > heap.front()) {
            std::pop_heap(heap.begin(), heap.end(), std::greater<>());
            heap.back() = lo;
            std::push_heap(heap.begin(), heap.end(), std::greater<>());
        }
    }
    double threshold = heap.front();  // the k-th largest lower bound (heap: smallest on top)
    if (!top_mode) threshold -= req.window;

    // Pass 2: the candidates, every row whose upper bound reaches the threshold (a NaN bound
    // compares false with < and so stays a candidate); the others become -infinity.
    auto& cand = thread_scratch<std::vector<std::int32_t>, struct ScreenCandidates>();
    cand.clear();
    next_pen = 0;
    for (std::int64_t r = 0; r < valid; ++r) {
        if (!(bounds(r).hi < threshold)) cand.push_back(static_cast<std::int32_t>(r));
    }
    if (static_cast<std::int64_t>(cand.size()) * 4 > valid) {  // too many: the whole head
        full();
        return;
    }
    std::fill(logits, logits + rows_, -std::numeric_limits<float>::infinity());
    dense.run_rows(team, w, cand, x, logits);
    for (const std::int32_t r : cand) {
        if (!std::isfinite(logits[r])) {  // an overflow or NaN: rank it the way the full head does
            full();
            return;
        }
    }
    st.exact_rows = static_cast<std::int64_t>(cand.size());
}

}  // namespace neural::cpu
