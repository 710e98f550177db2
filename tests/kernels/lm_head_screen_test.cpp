// The screened lm_head (cpu/kernels/lm_head_screen.h): DenseKernel::run_rows gives each row the
// bits of a whole-matrix run on every dense variant; the screen's bound holds for every row of
// many random draws (rows of mixed magnitudes, activations with outliers, near-tied rows); and
// the screened logits give the same argmax, top-k and min-p window as the full head, also where
// the int8 screen alone ranks the rows differently, and with a penalty applied on top.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "cpu/kernels/dense_int8.h"
#include "cpu/kernels/dense_kernel.h"
#include "cpu/kernels/lm_head_screen.h"
#include "cpu/team/worker_team.h"
#include "model/bf16.h"
#include "neural/error.h"

namespace neural::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Matrix {
    std::vector<std::uint16_t> bits;
    Bf16View view;
    Matrix(std::int64_t rows, std::int64_t cols) : bits(static_cast<size_t>(rows * cols)) {
        view = Bf16View{reinterpret_cast<const std::uint8_t*>(bits.data()), rows, cols};
    }
    void set(std::int64_t r, std::int64_t c, float v) {
        bits[static_cast<size_t>(r * view.cols + c)] = float_to_bf16(v);
    }
    float get(std::int64_t r, std::int64_t c) const { return view.at(r, c); }
};

// Rows of mixed magnitudes (most O(0.05), some 100x larger, some 1000x smaller), a few columns
// with large weights; `ties` rows are copies of row 0 with one weight nudged by a bf16 step, so
// their logits lie within the screen's error of each other.
Matrix adversarial_matrix(std::int64_t rows, std::int64_t cols, std::mt19937& rng, int ties) {
    Matrix m(rows, cols);
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::uniform_int_distribution<int> kind(0, 19);
    for (std::int64_t r = 0; r < rows; ++r) {
        const int k = kind(rng);
        const float scale = k == 0 ? 5.0f : k == 1 ? 5e-5f : 0.05f;
        for (std::int64_t c = 0; c < cols; ++c) m.set(r, c, d(rng) * scale);
        if (k == 2) m.set(r, static_cast<std::int64_t>(rng() % cols), 40.0f * d(rng));
    }
    std::uniform_int_distribution<std::int64_t> col(0, cols - 1);
    for (int t = 1; t <= ties && t < rows; ++t) {
        for (std::int64_t c = 0; c < cols; ++c) m.set(t, c, m.get(0, c));
        const std::int64_t c = col(rng);
        const float w = m.get(t, c);
        m.set(t, c, w + (t % 2 ? 1.0f : -1.0f) * std::max(std::abs(w), 1e-3f) / 128.0f);
    }
    return m;
}

// An activation with outliers: most O(1), a few 50-500x larger.
std::vector<float> outlier_x(std::int64_t n, std::mt19937& rng) {
    std::normal_distribution<float> d(0.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = d(rng);
    for (int i = 0; i < 4; ++i) x[rng() % n] = d(rng) * (i % 2 ? 50.0f : 500.0f);
    return x;
}

std::vector<DenseIsa> lane_tree_variants() {
    std::vector<DenseIsa> v;
    for (DenseIsa isa : {DenseIsa::scalar, DenseIsa::avx2, DenseIsa::avx512, DenseIsa::avx512bf16})
        if (dense_isa_available(isa)) v.push_back(isa);
    return v;
}

std::vector<Int8Isa> int8_variants() {
    std::vector<Int8Isa> v;
    for (Int8Isa isa : {Int8Isa::scalar, Int8Isa::avx2, Int8Isa::avx512vnni})
        if (int8_isa_available(isa)) v.push_back(isa);
    return v;
}

std::vector<float> full_head(const DenseKernel& k, WorkerTeam& team, const Matrix& m,
                             const std::vector<float>& x) {
    std::vector<float> y(static_cast<size_t>(m.view.rows));
    k.run(team, DenseOutput{&m.view, nullptr, y.data(), 0}, x.data(), 1, m.view.cols);
    return y;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

// The ids ranked by value, then id (the sampler's order).
std::vector<std::int32_t> ranked(const std::vector<float>& v, std::size_t n) {
    std::vector<std::int32_t> ids(v.size());
    std::iota(ids.begin(), ids.end(), 0);
    std::partial_sort(
        ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(),
        [&](std::int32_t a, std::int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
    ids.resize(n);
    return ids;
}

TEST(LmHeadScreen, RunRowsGivesEachRowTheWholeMatrixBits) {
    std::mt19937 rng(11);
    ReferenceTeam team(2);
    for (const std::int64_t cols : {2880, 200, 45}) {
        const Matrix m = adversarial_matrix(301, cols, rng, 4);
        const std::vector<float> x = outlier_x(cols, rng);
        for (DenseIsa isa : lane_tree_variants()) {
            SCOPED_TRACE(dense_isa_name(isa));
            const DenseKernel k(isa);
            const std::vector<float> full = full_head(k, team, m, x);
            std::vector<std::int32_t> rows;
            for (std::int32_t r = 0; r < 301; r += 1 + static_cast<std::int32_t>(rng() % 5))
                rows.push_back(r);
            rows.push_back(300);
            std::vector<float> y(301, kNegInf);
            k.run_rows(team, m.view, rows, x.data(), y.data());
            std::size_t listed = 0;
            for (std::int32_t r = 0; r < 301; ++r) {
                const bool in = std::find(rows.begin(), rows.end(), r) != rows.end();
                if (in) {
                    ++listed;
                    EXPECT_TRUE(same_bits(y[r], full[r])) << "row " << r;
                } else {
                    EXPECT_EQ(y[r], kNegInf) << "row " << r << " written";
                }
            }
            EXPECT_GT(listed, 50u);
        }
    }
    const DenseKernel k;
    const Matrix m = adversarial_matrix(8, 64, rng, 0);
    std::vector<float> x(64, 1.0f), y(8);
    const std::int32_t bad[1] = {8};
    EXPECT_THROW(k.run_rows(team, m.view, bad, x.data(), y.data()), Error);
}

TEST(LmHeadScreen, BoundHoldsForEveryRowOfManyDraws) {
    std::mt19937 rng(5);
    ReferenceTeam team(2);
    const DenseKernel k;
    for (Int8Isa isa : int8_variants()) {
        SCOPED_TRACE(int8_isa_name(isa));
        for (int draw = 0; draw < 6; ++draw) {
            const std::int64_t cols = draw % 3 == 0 ? 2880 : draw % 3 == 1 ? 200 : 77;
            const Matrix m = adversarial_matrix(513, cols, rng, 8);
            const LmHeadScreen screen(team, m.view, isa);
            for (int t = 0; t < 4; ++t) {
                std::vector<float> x = outlier_x(cols, rng);
                if (t == 3) {  // tiny activations: the slack term and flushed subnormals
                    for (auto& v : x) v *= 1e-30f;
                }
                const std::vector<float> exact = full_head(k, team, m, x);
                std::vector<float> s(513);
                screen.screen(team, x.data(), s.data());
                const ScreenBound b = screen.bound(x.data());
                ASSERT_TRUE(b.finite);
                double worst = 0;  // the largest error / bound seen
                for (std::int64_t r = 0; r < 513; ++r) {
                    const double err = std::abs(static_cast<double>(s[r]) - exact[r]);
                    const double bound = screen.row_bound(r, b);
                    ASSERT_LE(err, bound) << "row " << r << " draw " << draw << " token " << t;
                    if (bound > 0) worst = std::max(worst, err / bound);
                }
                EXPECT_GT(worst, 0.0);  // the screen's error is real: the test can fail
            }
        }
    }
}

TEST(LmHeadScreen, MeasuresRowsAndRefusesNonFiniteOnes) {
    std::mt19937 rng(3);
    ReferenceTeam team(1);
    Matrix m = adversarial_matrix(9, 70, rng, 0);
    m.set(4, 3, std::numeric_limits<float>::quiet_NaN());
    const LmHeadScreen screen(team, m.view, Int8Isa::scalar);
    for (std::int64_t r = 0; r < 9; ++r) {
        if (r == 4) {
            EXPECT_TRUE(std::isinf(screen.row_max(r)));
            continue;
        }
        double a = 0, e = 0;
        for (std::int64_t c = 0; c < 70; ++c) {
            a = std::max(a, std::abs(static_cast<double>(m.get(r, c))));
            e = std::max(e,
                         std::abs(static_cast<double>(m.get(r, c)) - screen.matrix().weight(r, c)));
        }
        EXPECT_GE(screen.row_max(r), a);
        EXPECT_LE(screen.row_max(r), a * (1 + 1e-6));
        EXPECT_GE(screen.row_error(r), e);
        EXPECT_LE(screen.row_error(r), e * (1 + 1e-6) + 1e-30);
    }
    EXPECT_EQ(screen.bytes(), LmHeadScreen::bytes_for(9, 70));
    std::vector<float> x(70, 1.0f);
    x[5] = std::numeric_limits<float>::infinity();
    EXPECT_FALSE(screen.bound(x.data()).finite);
}

// The screened run against the full head: the listed rows' bits, -infinity elsewhere, and the
// consumer's choice identical.
struct Case {
    int top_k = 1;
    double window = 0;
    bool penalty = false;
};

// A penalty like the sampler's (monotone): halves positive values of even ids, subtracts 1.5.
float test_penalty(const void*, std::int32_t id, float v) {
    if (id % 2 == 0) v = v > 0 ? v / 2.0f : v * 2.0f;
    return v - 1.5f;
}

TEST(LmHeadScreen, ScreenedChoicesEqualTheFullHead) {
    std::mt19937 rng(7);
    ReferenceTeam team(2);
    const std::int64_t rows = 2001;
    const std::vector<DenseIsa> dense_variants = lane_tree_variants();
    int int8_disagrees = 0, screened_runs = 0;
    for (Int8Isa isa : int8_variants()) {
        SCOPED_TRACE(int8_isa_name(isa));
        for (int draw = 0; draw < 4; ++draw) {
            const std::int64_t cols = draw % 2 ? 2880 : 96;
            const Matrix m = adversarial_matrix(rows, cols, rng, 40);
            const LmHeadScreen screen(team, m.view, isa);
            {  // each dense variant in turn: they all give the same bits
                const DenseKernel k(
                    dense_variants[static_cast<size_t>(draw) % dense_variants.size()]);
                for (int t = 0; t < 3; ++t) {
                    const std::vector<float> x = outlier_x(cols, rng);
                    std::vector<float> exact = full_head(k, team, m, x);
                    std::vector<float> s(static_cast<size_t>(rows));
                    screen.screen(team, x.data(), s.data());
                    if (ranked(s, 1) != ranked(exact, 1)) ++int8_disagrees;
                    for (const Case c : {Case{1, 0, false}, Case{5, 0, false}, Case{40, 0, false},
                                         Case{1, 2.5, false}, Case{1, 0, true}, Case{7, 0, true},
                                         Case{1, 1.0, true}}) {
                        SCOPED_TRACE(testing::Message() << "top_k " << c.top_k << " window "
                                                        << c.window << " penalty " << c.penalty);
                        std::vector<std::int32_t> pen;
                        ScreenRequest req;
                        req.valid = rows - 1;  // the last row is never read
                        req.top_k = c.top_k;
                        req.window = c.window;
                        if (c.penalty) {
                            for (std::int32_t id = 0; id < rows; id += 3) pen.push_back(id);
                            req.penalised = pen;
                            req.penalise = &test_penalty;
                        }
                        std::vector<float> y(static_cast<size_t>(rows));
                        ScreenStats st;
                        screen.run(team, k, m.view, x.data(), req, y.data(), &st);
                        if (!st.full) ++screened_runs;
                        if (!st.full) {
                            EXPECT_LT(st.exact_rows, rows / 4);
                        }
                        // The consumer's view: penalised, only the valid rows.
                        auto view = [&](std::vector<float> v) {
                            v.resize(static_cast<size_t>(req.valid));
                            if (c.penalty)
                                for (std::int32_t id : pen)
                                    if (id < req.valid) v[id] = test_penalty(nullptr, id, v[id]);
                            return v;
                        };
                        const std::vector<float> fv = view(exact), sv = view(y);
                        for (std::int64_t r = 0; r < req.valid; ++r) {
                            if (y[r] != kNegInf) {
                                ASSERT_TRUE(same_bits(y[r], exact[r])) << "row " << r;
                            }
                        }
                        const auto k_ids = ranked(fv, static_cast<size_t>(c.top_k));
                        EXPECT_EQ(ranked(sv, static_cast<size_t>(c.top_k)), k_ids);
                        if (c.window > 0) {
                            const float top = fv[k_ids[0]];
                            for (std::int64_t r = 0; r < req.valid; ++r) {
                                if (fv[r] >= top - c.window) {
                                    ASSERT_TRUE(same_bits(sv[r], fv[r])) << "row " << r;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    EXPECT_GT(screened_runs, 0);   // the screen did its work, not only the full fallback
    EXPECT_GT(int8_disagrees, 0);  // and the int8 values alone would have picked wrongly
}

TEST(LmHeadScreen, FallsBackToTheFullHeadWhereNothingIsProved) {
    std::mt19937 rng(9);
    ReferenceTeam team(1);
    const Matrix m = adversarial_matrix(300, 64, rng, 0);
    const LmHeadScreen screen(team, m.view, Int8Isa::scalar);
    const DenseKernel k;
    std::vector<float> x = outlier_x(64, rng);
    const std::vector<float> exact = full_head(k, team, m, x);
    ScreenRequest req;
    req.valid = 300;
    req.top_k = LmHeadScreen::kMaxTopK + 1;  // too many ranks
    std::vector<float> y(300);
    ScreenStats st;
    screen.run(team, k, m.view, x.data(), req, y.data(), &st);
    EXPECT_TRUE(st.full);
    for (int r = 0; r < 300; ++r) EXPECT_TRUE(same_bits(y[r], exact[r]));
    x[0] = std::numeric_limits<float>::quiet_NaN();  // nothing can be proved
    req.top_k = 1;
    screen.run(team, k, m.view, x.data(), req, y.data(), &st);
    EXPECT_TRUE(st.full);
}

}  // namespace
}  // namespace neural::cpu
