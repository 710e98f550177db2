#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cpu/ops.h"
#include "cpu/parallel.h"
#include "model/bf16.h"

namespace neural {
namespace {

// docs/MODEL.md "Attention with sinks": all-zero scores and V = 1 give n / (n + e^sink), not 1.
TEST(AttendWithSink, SinkOnlyEntersTheDenominator) {
    const int d = 8;
    for (int n : {1, 5, 128}) {
        for (float sink : {-3.0f, 0.0f, 2.5f}) {
            std::vector<float> q(d, 0.0f), k(static_cast<size_t>(n * d), 0.0f),
                v(static_cast<size_t>(n * d), 1.0f), out(d);
            cpu::attend_with_sink(q.data(), k.data(), v.data(), d, n, d, sink, 0.125f, out.data());
            const double want = n / (n + std::exp(static_cast<double>(sink)));
            for (float o : out) EXPECT_NEAR(o, want, 1e-6) << n << " " << sink;
        }
    }
}

TEST(AttendWithSink, MatchesANaiveSoftmax) {
    std::mt19937 rng(7);
    std::normal_distribution<float> g;
    const int d = 16, n = 9, stride = 40;
    std::vector<float> q(d), k(static_cast<size_t>(n * stride)), v(k.size()), out(d);
    for (auto& x : q) x = g(rng);
    for (auto& x : k) x = g(rng);
    for (auto& x : v) x = g(rng);
    const float sink = 0.7f, scale = 0.25f;
    cpu::attend_with_sink(q.data(), k.data(), v.data(), stride, n, d, sink, scale, out.data());
    std::vector<double> s(n);
    double denom = std::exp(static_cast<double>(sink));
    for (int j = 0; j < n; ++j) {
        double acc = 0;
        for (int i = 0; i < d; ++i)
            acc += static_cast<double>(q[i]) * k[static_cast<size_t>(j * stride + i)];
        s[j] = std::exp(acc * scale);
        denom += s[j];
    }
    for (int i = 0; i < d; ++i) {
        double want = 0;
        for (int j = 0; j < n; ++j) want += s[j] / denom * v[static_cast<size_t>(j * stride + i)];
        EXPECT_NEAR(out[static_cast<size_t>(i)], want, 1e-5);
    }
}

TEST(MatmulBf16, MatchesDoubleReferenceAndIsThreadInvariant) {
    const int rows = 37, cols = 45, tokens = 3;
    std::mt19937 rng(1);
    std::normal_distribution<float> g;
    std::vector<std::uint16_t> w(static_cast<size_t>(rows * cols)), b(static_cast<size_t>(rows));
    for (auto& x : w) x = float_to_bf16(g(rng));
    for (auto& x : b) x = float_to_bf16(g(rng));
    std::vector<float> x(static_cast<size_t>(tokens * cols));
    for (auto& v : x) v = g(rng);
    Bf16View wv{reinterpret_cast<const std::uint8_t*>(w.data()), rows, cols};
    Bf16View bv{reinterpret_cast<const std::uint8_t*>(b.data()), 1, rows};
    std::vector<float> y1(static_cast<size_t>(tokens * rows)), y3(y1.size());
    cpu::set_threads(1);
    cpu::matmul_bf16(wv, &bv, x.data(), tokens, y1.data());
    cpu::set_threads(3);
    cpu::matmul_bf16(wv, &bv, x.data(), tokens, y3.data());
    cpu::set_threads(0);
    EXPECT_EQ(y1, y3);
    for (int t = 0; t < tokens; ++t) {
        for (int r = 0; r < rows; ++r) {
            double want = bf16_to_float(b[static_cast<size_t>(r)]);
            for (int c = 0; c < cols; ++c) {
                want += static_cast<double>(bf16_to_float(w[static_cast<size_t>(r * cols + c)])) *
                        x[static_cast<size_t>(t * cols + c)];
            }
            EXPECT_NEAR(y1[static_cast<size_t>(t * rows + r)], want, 1e-4);
        }
    }
}

TEST(RmsNorm, MatchesTheFormula) {
    std::vector<std::uint16_t> w = {float_to_bf16(1.0f), float_to_bf16(2.0f), float_to_bf16(-0.5f)};
    Bf16View wv{reinterpret_cast<const std::uint8_t*>(w.data()), 1, 3};
    std::vector<float> x = {1.0f, 2.0f, 3.0f}, y(3);
    cpu::rms_norm(x.data(), wv, 1e-5f, 1, y.data());
    const double inv = 1.0 / std::sqrt((1 + 4 + 9) / 3.0 + 1e-5);
    EXPECT_NEAR(y[0], 1.0 * inv, 1e-6);
    EXPECT_NEAR(y[1], 2.0 * 2.0 * inv, 1e-6);
    EXPECT_NEAR(y[2], -0.5 * 3.0 * inv, 1e-6);
}

TEST(Bf16, RoundTripAndRounding) {
    EXPECT_EQ(bf16_to_float(float_to_bf16(1.5f)), 1.5f);
    EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
    // 1 + 2^-8 is exactly halfway between two bf16 values: ties to even -> 1.0
    EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 1.0f / 256)), 1.0f);
    EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
}

}  // namespace
}  // namespace neural
