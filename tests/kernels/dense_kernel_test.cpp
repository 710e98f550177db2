// The dense bf16 kernels: every SIMD variant this CPU runs gives the scalar reference's bits
// (the one lane arithmetic of cpu/kernels/dense_kernel.h) for any shape, token count, team and
// thread count; every tile-order prompt variant (AMX hardware and emulated, AVX-512F, AVX2) gives
// the tile-order scalar reference's bits, also at the edges (subnormals, infinities, NaN); the
// scalar references and the prompt variants match a double-precision dot of the bf16-rounded
// operands; bad calls are errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
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

// The tile-order prompt variants this machine runs (tile_scalar, the reference, first).
std::vector<DenseIsa> tile_variants() {
    std::vector<DenseIsa> v;
    for (DenseIsa isa : {DenseIsa::tile_scalar, DenseIsa::amx_emulated, DenseIsa::tile_avx2,
                         DenseIsa::tile_avx512, DenseIsa::amx_bf16}) {
        if (dense_isa_available(isa)) v.push_back(isa);
    }
    return v;
}

// A prompt call of `tokens` tokens (one token too) on the prompt variant `isa`.
std::vector<float> run_prompt(DenseIsa isa, WorkerTeam& team, const Bf16View& w,
                              const Bf16View* bias, const float* x, std::int64_t tokens) {
    std::vector<float> y(static_cast<size_t>(tokens * w.rows), -1.0f);
    DenseKernel(DenseIsa::scalar, isa, DensePrompts::passes)
        .run(team, DenseOutput{&w, bias, y.data(), 0}, x, tokens, w.cols, true);
    return y;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The prompt variants (the AMX tiles, their code on emulated tiles, the tile-order AVX-512F,
// AVX2 and scalar variants) sum each (token, row) in the tiles' order instead of the lane tree:
// within fp32 rounding of the double-precision dot of the rounded operands, like the scalar
// reference; shapes past the 32-row groups, 32-token tiles and 32-column chunks (the zero
// padding), bias.
TEST(DenseKernel, PromptVariantsAreWithinFp32RoundingOfTheExactDot) {
    std::mt19937 rng(5);
    ReferenceTeam three(3);
    for (DenseIsa isa : tile_variants()) {
        for (std::int64_t cols : {1, 31, 33, 96, 2880}) {
            for (std::int64_t rows : {1, 17, 40}) {
                for (std::int64_t tokens : {1, 2, 33}) {
                    const bool slow = isa == DenseIsa::amx_emulated || isa == DenseIsa::tile_scalar;
                    if (slow && cols * rows * tokens > 2'000'000) continue;
                    Matrix w(rows, cols, rng), b(1, rows, rng);
                    const auto x = random_x(tokens * cols, rng);
                    std::vector<float> y(static_cast<size_t>(tokens * rows), -1.0f);
                    const DenseKernel kernel(DenseIsa::scalar, isa);
                    kernel.run(three, DenseOutput{&w.view, &b.view, y.data(), 0}, x.data(), tokens,
                               cols);
                    if (tokens == 1) {  // one token runs the decode variant: the scalar bits
                        EXPECT_EQ(y, run(DenseIsa::scalar, three, w, &b, x, 1));
                        y = run_prompt(isa, three, w.view, &b.view, x.data(), 1);
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

// Every tile-order variant gives the tile-order scalar reference's bits: token counts 1 (a
// one-token prompt pass) to 70 (past two token tiles, partial token groups), row counts off the
// 16-row halves and 32-row groups, columns off the 32-column chunks, several matrices in one
// job, any team. Prints the variants compared.
TEST(DenseKernel, EveryPromptVariantGivesTheTileReferenceBits) {
    std::string ran;
    for (DenseIsa isa : tile_variants()) ran += std::string(" ") + dense_isa_name(isa);
    std::printf("dense tile-order variants compared:%s\n", ran.c_str());
    std::mt19937 rng(7);
    ReferenceTeam one(1), three(3);
    for (std::int64_t cols : {1, 2, 31, 32, 47, 100, 2880}) {
        for (std::int64_t rows : {1, 15, 33, 45}) {
            for (std::int64_t tokens : {1, 2, 3, 5, 17, 34, 70}) {
                if (cols * rows * tokens > 1'500'000) continue;  // the references' time
                Matrix w(rows, cols, rng), b(1, rows, rng);
                const auto x = random_x(tokens * cols, rng);
                const auto want =
                    run_prompt(DenseIsa::tile_scalar, one, w.view, &b.view, x.data(), tokens);
                for (DenseIsa isa : tile_variants()) {
                    if (isa == DenseIsa::tile_scalar) continue;
                    const auto got = run_prompt(isa, three, w.view, &b.view, x.data(), tokens);
                    EXPECT_TRUE(same_bits(got, want)) << dense_isa_name(isa) << " cols " << cols
                                                      << " rows " << rows << " tokens " << tokens;
                }
            }
        }
    }
    // q, k and v in one job (k without a bias) equal separate calls.
    const std::int64_t cols = 200, T = 37;
    Matrix q(64, cols, rng), k(24, cols, rng), kb(1, 24, rng);
    const auto x = random_x(T * cols, rng);
    for (DenseIsa isa : tile_variants()) {
        std::vector<float> yq(T * 64), yk(T * 24);
        const DenseOutput outs[2] = {{&q.view, nullptr, yq.data(), 0},
                                     {&k.view, &kb.view, yk.data(), 0}};
        DenseKernel(DenseIsa::scalar, isa).run(three, outs, x.data(), T, cols);
        EXPECT_TRUE(same_bits(yq, run_prompt(isa, one, q.view, nullptr, x.data(), T)))
            << dense_isa_name(isa);
        EXPECT_TRUE(
            same_bits(yk, run_prompt(DenseIsa::tile_scalar, one, k.view, &kb.view, x.data(), T)))
            << dense_isa_name(isa);
    }
}

// The tiles' edges, by row and token regime: sums that cancel below 2^-126 from normal high and
// low parts (FTZ: the last add's result; every other subnormal is read as zero by the next
// operation's DAZ), products of tiny weights and activations, subnormal weights against large
// activations (DAZ: the tiles read them as zero, not as tiny products), a 60-binade spread with
// infinities and NaN (stored as the one quiet NaN), subnormal biases; activations at and below
// 2^-126 (the split flushes them). Every variant the reference's bits; the test fails without
// the variants' FTZ or DAZ (checked by removing each from their MXCSR).
TEST(DenseKernel, EveryPromptVariantGivesTheTileReferenceBitsAtTheEdges) {
    std::mt19937 rng(8);
    ReferenceTeam two(2);
    std::uniform_int_distribution<int> pick(0, 99);
    std::uniform_real_distribution<float> unit(1.0f, 2.0f);
    auto value = [&](int lo_exp, int hi_exp) {
        std::uniform_int_distribution<int> e(lo_exp, hi_exp);
        const float v = std::ldexp(unit(rng), e(rng));
        return pick(rng) < 50 ? -v : v;
    };
    const std::int64_t rows = 37, cols = 131, T = 21;
    for (int round = 0; round < 4; ++round) {
        std::vector<std::uint16_t> wbits(rows * cols), bbits(rows);
        // The first kind's pair in the last chunk, the same in every such row.
        const std::uint16_t last_pair[2] = {float_to_bf16(value(-58, -56)),
                                            float_to_bf16(value(-58, -56))};
        for (std::int64_t r = 0; r < rows; ++r) {
            for (std::int64_t c = 0; c < cols; ++c) {
                const int p = pick(rng);
                std::uint16_t& b = wbits[r * cols + c];
                switch (r % 4) {
                    case 0:  // two columns of their own and the last chunk's pair (below)
                        b = c / 2 == r / 4                  ? float_to_bf16(value(-58, -56))
                            : c >= cols - 3 && c < cols - 1 ? last_pair[c - (cols - 3)]
                                                            : std::uint16_t(0);
                        break;
                    case 1:  // subnormal or zero
                        b = p < 50 ? std::uint16_t((p < 25 ? 0x8000 : 0) | (1 + pick(rng)))
                                   : std::uint16_t(0);
                        break;
                    case 2:  // a 60-binade spread, infinities and NaN in the later rounds
                        b = round >= 2 && p < 2   ? std::uint16_t(0x7F80)
                            : round >= 3 && p < 4 ? std::uint16_t(0x7FC1)
                                                  : float_to_bf16(value(-30, 30));
                        break;
                    default:  // tiny and normal
                        b = float_to_bf16(p < 50 ? value(-70, -50) : value(-10, 10));
                }
            }
            bbits[r] = r % 4 == 0       ? std::uint16_t(0)  // the sum as it is
                       : pick(rng) < 30 ? std::uint16_t(0x8003)
                                        : float_to_bf16(value(-3, 3));
        }
        std::vector<float> x(T * cols);
        for (std::int64_t t = 0; t < T; ++t) {
            for (std::int64_t c = 0; c < cols; ++c) {
                const int p = pick(rng);
                float& v = x[t * cols + c];
                switch (t % 3) {
                    case 0:                                         // tiny
                        v = p < 5    ? std::ldexp(unit(rng), -130)  // subnormal: flushed
                            : p < 10 ? std::ldexp(unit(rng), -126)  // the smallest normals
                                     : value(-58, -56);
                        break;
                    case 1:  // large: subnormal weights' products would be normal
                        v = value(10, 30);
                        break;
                    default:
                        v = value(-30, 30);
                }
            }
        }
        // Rows 4i of the first kind against the tiny tokens: columns 2i and 2i + 1, and the last
        // chunk's pair, nearly cancel (x[c + 1] = -w[c] x[c] / w[c + 1]), so the high parts' sum
        // (~2^-122) and the low parts' (~2^-122) are normal and their sum is below 2^-126:
        // flushed to zero (in the last chunk by FTZ itself; before it the next add's DAZ).
        for (std::int64_t r = 0; r < rows; r += 4) {
            for (const std::int64_t c : {2 * (r / 4), cols - 3}) {
                const double w0 = bf16_to_float(wbits[r * cols + c]);
                const double w1 = bf16_to_float(wbits[r * cols + c + 1]);
                for (std::int64_t t = 0; t < T; t += 3)
                    x[t * cols + c + 1] = static_cast<float>(-w0 * x[t * cols + c] / w1);
            }
        }
        const Bf16View w{reinterpret_cast<const std::uint8_t*>(wbits.data()), rows, cols};
        const Bf16View b{reinterpret_cast<const std::uint8_t*>(bbits.data()), 1, rows};
        const auto want = run_prompt(DenseIsa::tile_scalar, two, w, &b, x.data(), T);
        int nan = 0, tiny = 0;
        for (float v : want) {
            nan += std::isnan(v);
            tiny += v != 0.0f && std::abs(v) < 1e-36f;
        }
        EXPECT_GT(tiny, 0) << round;  // the edges were really reached: sums near 2^-126
        if (round >= 3) {
            EXPECT_GT(nan, 0) << round;
        }
        for (DenseIsa isa : tile_variants()) {
            const auto got = run_prompt(isa, two, w, &b, x.data(), T);
            EXPECT_TRUE(same_bits(got, want)) << dense_isa_name(isa) << " round " << round;
        }
    }
}

// A token's row does not depend on the other tokens of a prompt call (any batch: a one-token
// prompt call too), nor on the team: every tile-order variant.
TEST(DenseKernel, PromptResultsDoNotDependOnTheBatch) {
    std::mt19937 rng(6);
    ReferenceTeam one(1), two(2);
    const std::int64_t cols = 96, T = 70;
    Matrix q(40, cols, rng), qb(1, 40, rng);
    const auto x = random_x(T * cols, rng);
    for (DenseIsa isa : tile_variants()) {
        const auto all = run_prompt(isa, two, q.view, &qb.view, x.data(), T);
        for (std::int64_t t0 : {0, 5, 31, 68}) {
            for (std::int64_t n : {1, 2}) {
                const auto part = run_prompt(isa, one, q.view, &qb.view, x.data() + t0 * cols, n);
                EXPECT_EQ(0, std::memcmp(part.data(), all.data() + t0 * 40, part.size() * 4))
                    << dense_isa_name(isa) << " " << t0 << " " << n;
            }
        }
    }
}

// Which calls take the prompt variant; the tile variant that goes with each bf16 GEMM variant;
// a tile-order variant is no decode variant.
TEST(DenseKernel, PromptCallsAndTileVariantSelection) {
    const DenseKernel blocks(DenseIsa::scalar, DenseIsa::tile_scalar);
    EXPECT_EQ(blocks.prompts(), DensePrompts::blocks);
    EXPECT_FALSE(blocks.prompt_call(1, true, false));
    EXPECT_TRUE(blocks.prompt_call(2, true, false));
    EXPECT_TRUE(blocks.prompt_call(2, true, true));
    const DenseKernel passes(DenseIsa::scalar, DenseIsa::tile_scalar, DensePrompts::passes);
    EXPECT_TRUE(passes.prompt_call(1, true, false));
    EXPECT_TRUE(passes.prompt_call(512, true, false));
    EXPECT_FALSE(passes.prompt_call(1, false, false));
    EXPECT_FALSE(passes.prompt_call(1, true, true));
    EXPECT_FALSE(passes.prompt_call(300, true, true));
    EXPECT_THROW(DenseKernel(DenseIsa::tile_scalar), Error);
    EXPECT_EQ(dense_tile_isa_for(Bf16ExpertIsa::scalar), DenseIsa::tile_scalar);
    EXPECT_EQ(dense_tile_isa_for(Bf16ExpertIsa::amx_emulated), DenseIsa::amx_emulated);
    for (Bf16ExpertIsa g : {Bf16ExpertIsa::scalar, Bf16ExpertIsa::avx2, Bf16ExpertIsa::avx512,
                            Bf16ExpertIsa::amx_bf16, Bf16ExpertIsa::amx_emulated}) {
        if (!bf16_expert_isa_available(g)) continue;
        const DenseIsa d = dense_tile_isa_for(g);
        EXPECT_TRUE(dense_isa_available(d)) << bf16_expert_isa_name(g);
        EXPECT_TRUE(dense_isa_tile_order(d)) << bf16_expert_isa_name(g);
        if (g == Bf16ExpertIsa::avx2) {
            EXPECT_EQ(d, DenseIsa::tile_avx2);
        }
        if (g == Bf16ExpertIsa::avx512) {
            EXPECT_EQ(d, DenseIsa::tile_avx512);
        }
    }
    for (DenseIsa isa : {DenseIsa::scalar, DenseIsa::avx2, DenseIsa::avx512, DenseIsa::avx512bf16})
        EXPECT_FALSE(dense_isa_tile_order(isa));
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
