// The int8 dense kernels (cpu/kernels/dense_int8.h): the weight and activation quantization
// (within half a step, bf16 scales rounded up, NaN / infinity / zero blocks), the scalar
// reference against a double-precision dot of the quantized operands, every SIMD variant this
// CPU runs giving the scalar's bits for any shape, token count, team and thread count, and bad
// calls as errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/kernels/dense_int8.h"
#include "cpu/kernels/dense_kernel.h"
#include "cpu/team/worker_team.h"
#include "model/bf16.h"
#include "neural/error.h"

namespace neural::cpu {
namespace {

struct Matrix {
    std::vector<std::uint16_t> bits;
    Bf16View view;
    Matrix(std::int64_t rows, std::int64_t cols, std::mt19937& rng, float scale = 0.05f) {
        std::normal_distribution<float> d(0.0f, scale);
        bits.resize(static_cast<size_t>(rows * cols));
        for (auto& b : bits) b = float_to_bf16(d(rng));
        view = Bf16View{reinterpret_cast<const std::uint8_t*>(bits.data()), rows, cols};
    }
    void set(std::int64_t r, std::int64_t c, float v) {
        bits[static_cast<size_t>(r * view.cols + c)] = float_to_bf16(v);
    }
};

std::vector<float> random_x(std::int64_t n, std::mt19937& rng) {
    std::normal_distribution<float> d(0.0f, 2.0f);
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = d(rng);
    return x;
}

std::vector<float> run(Int8Isa isa, WorkerTeam& team, const Int8Matrix& w, const Matrix* bias,
                       const std::vector<float>& x, std::int64_t tokens) {
    std::vector<float> y(static_cast<size_t>(tokens * w.rows()), -1.0f);
    Int8DenseKernel(isa).run(team, Int8Output{&w, bias ? &bias->view : nullptr, y.data(), 0},
                             x.data(), tokens, w.cols());
    return y;
}

std::vector<Int8Isa> simd_variants() {
    std::vector<Int8Isa> v;
    for (Int8Isa isa : {Int8Isa::avx2, Int8Isa::avx512vnni}) {
        if (int8_isa_available(isa)) v.push_back(isa);
    }
    return v;
}

// The fastest int8 variant here (what the AVX-512 expert kernel would take).
Int8Isa best_int8() { return int8_isa_for(KernelIsa::avx512); }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(Int8Dense, WeightsAreWithinHalfAStepOfABf16ScaleRoundedUp) {
    std::mt19937 rng(11);
    for (std::int64_t cols : {1, 31, 32, 33, 64, 100, 2880}) {
        Matrix w(9, cols, rng);
        w.set(2, 0, 0.0f);
        const Int8Matrix q = Int8Matrix::quantize(w.view);
        ASSERT_EQ(q.rows(), 9);
        ASSERT_EQ(q.cols(), cols);
        EXPECT_EQ(q.padded_cols() % 64, 0);
        EXPECT_EQ(q.group_bytes() % 64, 0);
        for (std::int64_t r = 0; r < 9; ++r) {
            for (std::int64_t b = 0; b * 32 < cols; ++b) {
                float amax = 0;
                for (std::int64_t c = 32 * b; c < std::min(cols, 32 * b + 32); ++c)
                    amax = std::max(amax, std::abs(w.view.at(r, c)));
                const float d = q.scale(r, b);
                EXPECT_EQ(bf16_to_float(float_to_bf16(d)), d);  // a bf16 number
                EXPECT_GE(double(d) * 127, double(amax) * (1 - 1e-6)) << r << " " << b;
                EXPECT_LE(double(d), double(amax) / 127 * (1 + 1.0 / 128) + 1e-45);
                for (std::int64_t c = 32 * b; c < std::min(cols, 32 * b + 32); ++c) {
                    EXPECT_LE(std::abs(double(q.weight(r, c)) - w.view.at(r, c)),
                              double(d) * 0.5 * (1 + 1e-6))
                        << r << " " << c;
                }
            }
        }
    }
}

TEST(Int8Dense, ActivationBlocksRoundToTheNearestStep) {
    std::mt19937 rng(12);
    const auto x = random_x(32, rng);
    const Int8Operand o = int8_quantize_block(x.data(), 32);
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::abs(v));
    EXPECT_EQ(o.d, amax / 127.0f);
    for (int i = 0; i < 32; ++i) {
        EXPECT_LE(std::abs(double(o.q[i]) * o.d - x[static_cast<size_t>(i)]), o.d * 0.5001) << i;
        EXPECT_GE(o.q[i], -127);
        EXPECT_LE(o.q[i], 127);
    }
    const float zeros[32] = {};
    EXPECT_EQ(int8_quantize_block(zeros, 32).d, 0.0f);
    std::vector<float> bad = x;
    bad[5] = std::nanf("");
    EXPECT_TRUE(std::isnan(int8_quantize_block(bad.data(), 32).d));
    bad[5] = -INFINITY;
    EXPECT_TRUE(std::isnan(int8_quantize_block(bad.data(), 32).d));
    EXPECT_EQ(int8_quantize_block(bad.data(), 5).d, int8_quantize_block(x.data(), 5).d);
}

TEST(Int8Dense, ScalarMatchesADoubleDotOfTheQuantizedOperands) {
    std::mt19937 rng(13);
    ReferenceTeam team(1);
    for (std::int64_t cols : {1, 31, 32, 33, 100, 2880}) {
        Matrix w(7, cols, rng), b(1, 7, rng);
        const Int8Matrix q = Int8Matrix::quantize(w.view);
        const auto x = random_x(3 * cols, rng);
        const auto y = run(Int8Isa::scalar, team, q, &b, x, 3);
        for (std::int64_t t = 0; t < 3; ++t) {
            std::vector<double> xq(static_cast<size_t>(cols));
            for (std::int64_t c0 = 0; c0 < cols; c0 += 32) {
                const int n = static_cast<int>(std::min<std::int64_t>(32, cols - c0));
                const Int8Operand o = int8_quantize_block(x.data() + t * cols + c0, n);
                for (int i = 0; i < n; ++i) xq[static_cast<size_t>(c0 + i)] = double(o.q[i]) * o.d;
            }
            for (std::int64_t r = 0; r < 7; ++r) {
                double want = 0, mag = 0;
                for (std::int64_t c = 0; c < cols; ++c) {
                    want += double(q.weight(r, c)) * xq[static_cast<size_t>(c)];
                    mag += std::abs(double(q.weight(r, c)) * xq[static_cast<size_t>(c)]);
                }
                want += b.view.at(r);
                EXPECT_NEAR(y[static_cast<size_t>(t * 7 + r)], want, 1e-5 * (mag + 1))
                    << cols << " " << t << " " << r;
            }
        }
    }
}

// The int8 path is an approximation of the bf16 kernels' result: close for gpt-oss-like data.
TEST(Int8Dense, StaysCloseToTheBf16Kernel) {
    std::mt19937 rng(14);
    ReferenceTeam team(2);
    const std::int64_t rows = 64, cols = 2880;
    Matrix w(rows, cols, rng);
    const Int8Matrix q = Int8Matrix::quantize(w.view);
    const auto x = random_x(cols, rng);
    const auto y8 = run(best_int8(), team, q, nullptr, x, 1);
    std::vector<float> y16(static_cast<size_t>(rows));
    DenseKernel(best_dense_isa())
        .run(team, DenseOutput{&w.view, nullptr, y16.data(), 0}, x.data(), 1, cols);
    double err = 0, norm = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
        err += std::pow(double(y8[static_cast<size_t>(r)]) - y16[static_cast<size_t>(r)], 2);
        norm += std::pow(double(y16[static_cast<size_t>(r)]), 2);
    }
    // Half a step of 32 Gaussians' amax / 127 is ~0.55 % rms per operand: ~0.8 % for both.
    EXPECT_LT(std::sqrt(err / norm), 0.015);
    EXPECT_GT(err, 0.0);
}

TEST(Int8Dense, EverySimdVariantGivesTheScalarBits) {
    if (simd_variants().empty()) GTEST_SKIP() << "no SIMD int8 variant on this CPU/build";
    std::mt19937 rng(15);
    ReferenceTeam one(1), three(3);
    for (std::int64_t cols : {1, 16, 32, 47, 96, 200, 2880}) {
        for (std::int64_t rows : {1, 3, 4, 17, 70}) {
            for (std::int64_t tokens : {1, 2, 5, 17}) {
                Matrix w(rows, cols, rng), b(1, rows, rng);
                const Int8Matrix q = Int8Matrix::quantize(w.view);
                const auto x = random_x(tokens * cols, rng);
                const auto want = run(Int8Isa::scalar, one, q, &b, x, tokens);
                for (Int8Isa isa : simd_variants()) {
                    EXPECT_TRUE(same_bits(want, run(isa, three, q, &b, x, tokens)))
                        << int8_isa_name(isa) << " cols " << cols << " rows " << rows << " tokens "
                        << tokens;
                }
            }
        }
    }
}

// A token's row is the same bits whatever else is in the call (prompt blocks == decode steps,
// including the team-quantized activations of 16 tokens and more), several matrices in one job
// equal separate calls, and quantizing on a team equals quantizing on one thread.
TEST(Int8Dense, ResultsDoNotDependOnTheBatchTheJobOrTheTeam) {
    std::mt19937 rng(16);
    ReferenceTeam team(2), four(4);
    const std::int64_t cols = 96;
    const std::int64_t T = 70;  // past two token tiles (dense_int8_tasks.inl), a partial last group
    Matrix wq(40, cols, rng), wk(8, cols, rng), kb(1, 8, rng);
    Int8Matrix q, k;
    const Bf16View* in[2] = {&wq.view, &wk.view};
    Int8Matrix* out[2] = {&q, &k};
    const std::uint64_t bytes = quantize_on_team(four, in, out);
    EXPECT_EQ(bytes, q.bytes() + k.bytes());
    const Int8Matrix q1 = Int8Matrix::quantize(wq.view);
    ASSERT_EQ(q1.bytes(), q.bytes());
    EXPECT_EQ(0, std::memcmp(q1.group(0), q.group(0), q.bytes()));
    const auto x = random_x(T * cols, rng);
    for (Int8Isa isa : {Int8Isa::scalar, best_int8()}) {
        SCOPED_TRACE(int8_isa_name(isa));
        const auto all = run(isa, team, q, nullptr, x, T);
        for (std::int64_t t = 0; t < T; ++t) {
            const std::vector<float> xt(x.begin() + t * cols, x.begin() + (t + 1) * cols);
            const auto one = run(isa, four, q, nullptr, xt, 1);
            EXPECT_EQ(0, std::memcmp(one.data(), all.data() + t * 40, 40 * sizeof(float))) << t;
        }
        std::vector<float> yq(T * 40), yk(T * 8);
        const Int8Output outs[2] = {{&q, nullptr, yq.data(), 0}, {&k, &kb.view, yk.data(), 0}};
        Int8DenseKernel(isa).run(team, outs, x.data(), T, cols);
        EXPECT_TRUE(same_bits(yq, all));
        EXPECT_TRUE(same_bits(yk, run(isa, team, k, &kb, x, T)));
    }
}

// A NaN or infinite weight makes its row's outputs NaN (and no other row's); a NaN or infinite
// activation makes every output of its token NaN; a zero row gives its bias.
TEST(Int8Dense, NonFiniteInputsGiveNaNNeverGarbage) {
    std::mt19937 rng(17);
    ReferenceTeam team(2);
    const std::int64_t cols = 70;
    Matrix w(6, cols, rng), b(1, 6, rng);
    w.set(1, 40, std::nanf(""));
    w.set(3, 2, INFINITY);
    for (std::int64_t c = 0; c < cols; ++c) w.set(5, c, 0.0f);
    const Int8Matrix q = Int8Matrix::quantize(w.view);
    EXPECT_TRUE(std::isnan(q.scale(1, 1)));
    auto x = random_x(2 * cols, rng);
    x[static_cast<size_t>(cols + 65)] = std::nanf("");
    for (Int8Isa isa : {Int8Isa::scalar, best_int8()}) {
        SCOPED_TRACE(int8_isa_name(isa));
        const auto y = run(isa, team, q, &b, x, 2);
        for (std::int64_t r = 0; r < 6; ++r) {
            const bool bad_row = r == 1 || r == 3;
            EXPECT_EQ(std::isnan(y[static_cast<size_t>(r)]), bad_row) << r;
            EXPECT_TRUE(std::isnan(y[static_cast<size_t>(6 + r)])) << r;
        }
        EXPECT_EQ(y[5], b.view.at(5));
    }
}

TEST(Int8Dense, RejectsMismatchedCalls) {
    std::mt19937 rng(18);
    ReferenceTeam team(1);
    Matrix w(4, 32, rng), wrong_bias(1, 5, rng);
    const Int8Matrix q = Int8Matrix::quantize(w.view);
    std::vector<float> x(64), y(8);
    const Int8DenseKernel kernel(Int8Isa::scalar);
    EXPECT_THROW(kernel.run(team, Int8Output{&q, nullptr, y.data(), 0}, x.data(), 1, 33), Error);
    EXPECT_THROW(kernel.run(team, Int8Output{&q, &wrong_bias.view, y.data(), 0}, x.data(), 1, 32),
                 Error);
    EXPECT_THROW(kernel.run(team, Int8Output{&q, nullptr, nullptr, 0}, x.data(), 1, 32), Error);
    const Int8Matrix empty;
    EXPECT_THROW(kernel.run(team, Int8Output{&empty, nullptr, y.data(), 0}, x.data(), 1, 32),
                 Error);
    EXPECT_THROW(kernel.run(team, std::span<const Int8Output>(), x.data(), 1, 32), Error);
    EXPECT_THROW(kernel.run(team, Int8Output{&q, nullptr, y.data(), 0}, x.data(), 0, 32), Error);
    EXPECT_THROW(Int8Matrix::quantize(Bf16View{}), Error);
}

}  // namespace
}  // namespace neural::cpu
