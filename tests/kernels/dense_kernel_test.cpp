// The dense bf16 kernels: every SIMD variant this CPU runs gives the scalar reference's bits
// (the one lane arithmetic of cpu/kernels/dense_kernel.h) for any shape, token count, team and
// thread count; the scalar reference and the AMX prompt variant (hardware and emulated) match a
// double-precision dot of the bf16-rounded operands; bad calls are errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/kernels/dense_kernel.h"
#include "cpu/team/worker_team.h"
#include "model/bf16.h"
#include "neural/error.h"

namespace neural::cpu {
namespace {

// A bf16 matrix with normal values (no subnormals, which vdpbf16ps treats as zero).
struct Matrix {
    std::vector<std::uint16_t> bits;
    Bf16View view;
    Matrix(std::int64_t rows, std::int64_t cols, std::mt19937& rng, float scale = 1.0f) {
        std::normal_distribution<float> d(0.0f, scale);
        bits.resize(static_cast<size_t>(rows * cols));
        for (auto& b : bits) {
            float v = d(rng);
            if (std::abs(v) < 1e-30f) v = 1e-30f;
            b = float_to_bf16(v);
        }
        view = Bf16View{reinterpret_cast<const std::uint8_t*>(bits.data()), rows, cols};
    }
};

std::vector<float> random_x(std::int64_t n, std::mt19937& rng) {
    std::normal_distribution<float> d(0.0f, 2.0f);
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = d(rng);
    return x;
}

std::vector<float> run(DenseIsa isa, WorkerTeam& team, const Matrix& w, const Matrix* bias,
                       const std::vector<float>& x, std::int64_t tokens) {
    std::vector<float> y(static_cast<size_t>(tokens * w.view.rows), -1.0f);
    DenseKernel(isa).run(team, DenseOutput{&w.view, bias ? &bias->view : nullptr, y.data(), 0},
                         x.data(), tokens, w.view.cols);
    return y;
}

std::vector<DenseIsa> simd_variants() {
    std::vector<DenseIsa> v;
    for (DenseIsa isa : {DenseIsa::avx2, DenseIsa::avx512, DenseIsa::avx512bf16}) {
        if (dense_isa_available(isa)) v.push_back(isa);
    }
    return v;
}

// Row r of w against x (one token) in double precision on the split, rounded operand, plus the
// bias; and the sum of the products' magnitudes (the scale of fp32's rounding error).
struct ExactDot {
    double value = 0, magnitude = 0;
};
ExactDot exact_dot(const Matrix& w, const Matrix& b, const float* x, std::int64_t r) {
    ExactDot e;
    for (std::int64_t c = 0; c < w.view.cols; ++c) {
        const DenseOperand o = dense_split_operand(x[c]);
        const double xv = double(bf16_to_float(o.hi)) + bf16_to_float(o.lo);
        e.value += static_cast<double>(w.view.at(r, c)) * xv;
        e.magnitude += std::abs(static_cast<double>(w.view.at(r, c)) * xv);
    }
    e.value += b.view.at(r);
    return e;
}

TEST(DenseKernel, ScalarMatchesADoubleDotOfTheRoundedOperands) {
    std::mt19937 rng(1);
    ReferenceTeam team(1);
    for (std::int64_t cols : {1, 31, 32, 33, 100, 2880}) {
        Matrix w(7, cols, rng), b(1, 7, rng);
        const auto x = random_x(3 * cols, rng);
        const auto y = run(DenseIsa::scalar, team, w, &b, x, 3);
        for (std::int64_t t = 0; t < 3; ++t) {
            for (std::int64_t r = 0; r < 7; ++r) {
                const ExactDot e = exact_dot(w, b, x.data() + t * cols, r);
                EXPECT_NEAR(y[t * 7 + r], e.value, 1e-5 * (e.magnitude + 1))
                    << cols << " " << t << " " << r;
            }
        }
    }
}

TEST(DenseKernel, EverySimdVariantGivesTheScalarBits) {
    if (simd_variants().empty()) GTEST_SKIP() << "no SIMD variant on this CPU/build";
    std::mt19937 rng(2);
    ReferenceTeam one(1), three(3);
    for (std::int64_t cols : {1, 16, 32, 47, 96, 2880}) {
        for (std::int64_t rows : {1, 3, 4, 17}) {
            for (std::int64_t tokens : {1, 2, 5}) {
                Matrix w(rows, cols, rng), b(1, rows, rng);
                const auto x = random_x(tokens * cols, rng);
                const auto want = run(DenseIsa::scalar, one, w, &b, x, tokens);
                for (DenseIsa isa : simd_variants()) {
                    const auto got = run(isa, three, w, &b, x, tokens);
                    EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
                        << dense_isa_name(isa) << " cols " << cols << " rows " << rows << " tokens "
                        << tokens;
                }
            }
        }
    }
}

// A token's row is the same bits whatever else is in the call (prompt blocks == decode steps),
// and several matrices in one job equal separate calls.
TEST(DenseKernel, ResultsDoNotDependOnTheBatchOrTheJob) {
    std::mt19937 rng(3);
    ReferenceTeam team(2);
    const std::int64_t cols = 96;
    const std::int64_t T = 70;  // past two token tiles (dense_tasks.inl), a partial last group
    Matrix q(40, cols, rng), k(8, cols, rng), kb(1, 8, rng);
    const auto x = random_x(T * cols, rng);
    const DenseIsa isa = best_dense_isa();
    const auto all = run(isa, team, q, nullptr, x, T);
    for (std::int64_t t = 0; t < T; ++t) {
        const std::vector<float> xt(x.begin() + t * cols, x.begin() + (t + 1) * cols);
        const auto one = run(isa, team, q, nullptr, xt, 1);
        EXPECT_EQ(0, std::memcmp(one.data(), all.data() + t * 40, 40 * sizeof(float))) << t;
    }
    std::vector<float> yq(T * 40), yk(T * 8);
    const DenseOutput outs[2] = {{&q.view, nullptr, yq.data(), 0},
                                 {&k.view, &kb.view, yk.data(), 0}};
    DenseKernel(isa).run(team, outs, x.data(), T, cols);
    EXPECT_EQ(yq, all);
    EXPECT_EQ(yk, run(isa, team, k, &kb, x, T));
}

std::vector<DenseIsa> amx_variants() {
    std::vector<DenseIsa> v = {DenseIsa::amx_emulated};
    if (dense_isa_available(DenseIsa::amx_bf16)) v.push_back(DenseIsa::amx_bf16);
    return v;
}

// The AMX prompt variant (hardware, and its code on emulated tiles) sums each (token, row) in
// column order instead of the lane tree: within fp32 rounding of the double-precision dot of the
// rounded operands, like the scalar reference; shapes past its 32-row groups, 32-token tiles
// and 32-column chunks (the zero padding), several matrices in one job, bias.
TEST(DenseKernel, AmxPromptVariantIsWithinFp32RoundingOfTheExactDot) {
    std::mt19937 rng(5);
    ReferenceTeam three(3);
    for (DenseIsa isa : amx_variants()) {
        for (std::int64_t cols : {1, 31, 33, 96, 2880}) {
            for (std::int64_t rows : {1, 17, 40}) {
                for (std::int64_t tokens : {1, 2, 33}) {
                    if (isa == DenseIsa::amx_emulated && cols * rows * tokens > 2'000'000) continue;
                    Matrix w(rows, cols, rng), b(1, rows, rng);
                    const auto x = random_x(tokens * cols, rng);
                    std::vector<float> y(static_cast<size_t>(tokens * rows), -1.0f);
                    DenseKernel(DenseIsa::scalar, isa)
                        .run(three, DenseOutput{&w.view, &b.view, y.data(), 0}, x.data(), tokens,
                             cols);
                    if (tokens == 1) {  // one token runs the first variant: the scalar bits
                        EXPECT_EQ(y, run(DenseIsa::scalar, three, w, &b, x, 1));
                        continue;
                    }
                    for (std::int64_t t = 0; t < tokens; ++t) {
                        for (std::int64_t r = 0; r < rows; ++r) {
                            const ExactDot e = exact_dot(w, b, x.data() + t * cols, r);
                            ASSERT_NEAR(y[t * rows + r], e.value, 1e-5 * (e.magnitude + 1))
                                << dense_isa_name(isa) << " cols " << cols << " rows " << rows
                                << " tokens " << tokens << " t " << t << " r " << r;
                        }
                    }
                }
            }
        }
    }
}

// On the AMX variant too a token's row does not depend on the other tokens of a prompt call
// (any batch of two or more), nor on the team.
TEST(DenseKernel, AmxPromptResultsDoNotDependOnTheBatch) {
    std::mt19937 rng(6);
    ReferenceTeam one(1), two(2);
    const std::int64_t cols = 96, T = 70;
    Matrix q(40, cols, rng), qb(1, 40, rng);
    const auto x = random_x(T * cols, rng);
    for (DenseIsa isa : amx_variants()) {
        const DenseKernel kernel(DenseIsa::scalar, isa);
        std::vector<float> all(T * 40);
        kernel.run(two, DenseOutput{&q.view, &qb.view, all.data(), 0}, x.data(), T, cols);
        for (std::int64_t t0 : {0, 5, 31, 68}) {
            std::vector<float> pair(2 * 40);
            kernel.run(one, DenseOutput{&q.view, &qb.view, pair.data(), 0}, x.data() + t0 * cols, 2,
                       cols);
            EXPECT_EQ(0, std::memcmp(pair.data(), all.data() + t0 * 40, pair.size() * 4))
                << dense_isa_name(isa) << " " << t0;
        }
    }
}

TEST(DenseKernel, RejectsMismatchedCalls) {
    std::mt19937 rng(4);
    ReferenceTeam team(1);
    Matrix w(4, 32, rng), wrong_bias(1, 5, rng);
    std::vector<float> x(64), y(8);
    const DenseKernel kernel(DenseIsa::scalar);
    EXPECT_THROW(kernel.run(team, DenseOutput{&w.view, nullptr, y.data(), 0}, x.data(), 1, 33),
                 Error);
    EXPECT_THROW(
        kernel.run(team, DenseOutput{&w.view, &wrong_bias.view, y.data(), 0}, x.data(), 1, 32),
        Error);
    EXPECT_THROW(kernel.run(team, DenseOutput{&w.view, nullptr, nullptr, 0}, x.data(), 1, 32),
                 Error);
    EXPECT_THROW(kernel.run(team, std::span<const DenseOutput>(), x.data(), 1, 32), Error);
    EXPECT_THROW(kernel.run(team, DenseOutput{&w.view, nullptr, y.data(), 0}, x.data(), 0, 32),
                 Error);
}

TEST(DenseKernel, OperandSplitsIntoTwoRoundedBf16Parts) {
    auto split = [](float x) { return dense_split_operand(x); };
    EXPECT_EQ(split(1.0f).hi, 0x3F80);
    EXPECT_EQ(split(1.0f).lo, 0x0000);
    EXPECT_EQ(split(-2.0f).hi, 0xC000);
    EXPECT_EQ(split(1.00390625f).hi, 0x3F80);                      // halfway: to even ...
    EXPECT_EQ(bf16_to_float(split(1.00390625f).lo), 0.00390625f);  // ... the rest in lo
    // hi + lo keeps 16 significant bits: within 2^-16 relative
    for (float x : {3.14159265f, -0.001234567f, 12345.678f, 7.0e-30f}) {
        const DenseOperand o = split(x);
        EXPECT_NEAR(double(bf16_to_float(o.hi)) + bf16_to_float(o.lo), x, std::abs(x) * 1.6e-5)
            << x;
    }
    EXPECT_EQ(split(1e-39f).hi, 0x0000);  // subnormal -> +0, as vdpbf16ps reads it
    EXPECT_EQ(split(-1e-39f).hi, 0x8000);
    EXPECT_TRUE(std::isnan(bf16_to_float(split(std::nanf("")).hi)));
    EXPECT_EQ(split(std::nanf("")).lo, 0);
    EXPECT_EQ(split(INFINITY).hi, 0x7F80);
    EXPECT_EQ(split(INFINITY).lo, 0);
}

}  // namespace
}  // namespace neural::cpu
