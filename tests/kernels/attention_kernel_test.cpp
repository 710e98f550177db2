// The fast path's attention kernel (engine/cpu/kernels/attention_kernel.h): the AVX-512 and AVX2
// variants against the reference (cpu::attend_with_sink) and a double-precision softmax with
// sinks, and bit for bit against each other; per-head results do not depend on how many heads
// one call takes; non-finite inputs.
#include "cpu/kernels/attention_kernel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace neural::cpu {
namespace {

struct Case {
    int heads, d;
    std::int64_t n, stride;
    std::vector<float> q, k, v, sinks;
};

Case make_case(int heads, int d, std::int64_t n, std::mt19937& rng, float spread = 1.0f) {
    Case c{heads, d, n, 3 * d + 5, {}, {}, {}, {}};  // K/V rows hold other heads too
    std::normal_distribution<float> g(0.0f, spread);
    c.q.resize(static_cast<size_t>(heads * d));
    c.k.resize(static_cast<size_t>(n * c.stride));
    c.v.resize(c.k.size());
    c.sinks.resize(static_cast<size_t>(heads));
    for (auto* x : {&c.q, &c.k, &c.v, &c.sinks})
        for (float& f : *x) f = g(rng);
    return c;
}

std::vector<float> run(AttentionIsa isa, const Case& c, float scale) {
    std::vector<float> out(static_cast<size_t>(c.heads * c.d), -7.0f);
    attend_group(isa, c.q.data(), c.heads, c.k.data(), c.v.data(), c.stride, c.n, c.d,
                 c.sinks.data(), scale, out.data());
    return out;
}

// Softmax over [scores..., sink] in double, the sink column dropped.
std::vector<double> exact(const Case& c, float scale) {
    std::vector<double> out(static_cast<size_t>(c.heads * c.d), 0.0);
    for (int h = 0; h < c.heads; ++h) {
        std::vector<double> s(static_cast<size_t>(c.n));
        double m = c.sinks[static_cast<size_t>(h)];
        for (std::int64_t j = 0; j < c.n; ++j) {
            double dot = 0;
            for (int i = 0; i < c.d; ++i)
                dot += static_cast<double>(c.q[static_cast<size_t>(h * c.d + i)]) *
                       c.k[static_cast<size_t>(j * c.stride + i)];
            s[static_cast<size_t>(j)] = dot * scale;
            m = std::max(m, s[static_cast<size_t>(j)]);
        }
        double denom = std::exp(c.sinks[static_cast<size_t>(h)] - m);
        for (double& x : s) denom += (x = std::exp(x - m));
        for (std::int64_t j = 0; j < c.n; ++j)
            for (int i = 0; i < c.d; ++i)
                out[static_cast<size_t>(h * c.d + i)] +=
                    s[static_cast<size_t>(j)] / denom * c.v[static_cast<size_t>(j * c.stride + i)];
    }
    return out;
}

double worst_error(const std::vector<float>& got, const std::vector<double>& want) {
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
    return worst;
}

bool have_avx512() { return attention_isa_available(AttentionIsa::avx512); }

std::vector<AttentionIsa> simd_isas() {
    std::vector<AttentionIsa> out;
    for (AttentionIsa isa : {AttentionIsa::avx512, AttentionIsa::avx2}) {
        if (attention_isa_available(isa)) out.push_back(isa);
    }
    return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(AttentionKernel, ReferenceMatchesADoubleSoftmaxWithSinks) {
    std::mt19937 rng(1);
    for (std::int64_t n : {1, 7, 300}) {
        const Case c = make_case(3, 64, n, rng);
        EXPECT_LT(worst_error(run(AttentionIsa::reference, c, 0.125f), exact(c, 0.125f)), 1e-5)
            << n;
    }
}

TEST(AttentionKernel, SimdVariantsStayWithinRoundingOfTheReference) {
    const auto isas = simd_isas();
    if (isas.empty()) GTEST_SKIP() << "no AVX2 or AVX-512 on this CPU/build";
    std::mt19937 rng(2);
    for (int d : {16, 32, 64, 128}) {
        for (int heads : {1, 3, 4, 8}) {
            for (std::int64_t n : {1, 2, 15, 16, 17, 130, 1000}) {
                // spread 3: scores of tens, so the softmax is peaked and exp's range is used
                const Case c = make_case(heads, d, n, rng, n > 100 ? 3.0f : 1.0f);
                const float scale = 1.0f / std::sqrt(static_cast<float>(d));
                const auto want = exact(c, scale);
                const auto ref = run(AttentionIsa::reference, c, scale);
                const double ref_err = worst_error(ref, want);
                for (AttentionIsa isa : isas) {
                    const double fast_err = worst_error(run(isa, c, scale), want);
                    EXPECT_LT(fast_err, 2e-5) << attention_isa_name(isa) << " d " << d << " heads "
                                              << heads << " n " << n;
                    EXPECT_LT(fast_err, 4 * ref_err + 1e-6)
                        << attention_isa_name(isa) << " d " << d << " heads " << heads << " n " << n
                        << " reference " << ref_err;
                }
            }
        }
    }
}

// The AVX2 variant gives the AVX-512 variant's bits (the same lanes, polynomial and trees), for
// every head size it has code for, many key counts (every tail of 8 and 16 lanes), GQA groups
// of 1-8 heads, flat and peaked softmaxes, and a sink that takes almost all of the weight.
TEST(AttentionKernel, Avx2GivesTheAvx512Bits) {
    std::printf("attention variants available here: reference ");
    for (AttentionIsa isa : simd_isas()) std::printf("%s ", attention_isa_name(isa));
    std::printf("\n");
    if (!have_avx512() || !attention_isa_available(AttentionIsa::avx2))
        GTEST_SKIP() << "needs both AVX-512 and AVX2 on this CPU/build";
    std::mt19937 rng(7);
    int cases = 0;
    for (int d : {16, 32, 64, 128}) {
        for (int heads : {1, 2, 3, 4, 5, 8}) {
            for (std::int64_t n : {1, 2, 7, 8, 9, 15, 16, 17, 24, 31, 33, 64, 100, 257, 1000}) {
                const float spread = (n + heads) % 3 == 0 ? 3.0f : 1.0f;
                Case c = make_case(heads, d, n, rng, spread);
                if (n % 7 == 0) c.sinks[0] = 40.0f;
                const float scale = 1.0f / std::sqrt(static_cast<float>(d));
                const auto a = run(AttentionIsa::avx512, c, scale);
                const auto b = run(AttentionIsa::avx2, c, scale);
                EXPECT_TRUE(same_bits(a, b)) << "d " << d << " heads " << heads << " n " << n;
                ++cases;
            }
        }
    }
    std::printf("avx2 == avx512 attention bit for bit in %d cases\n", cases);
}

// A head's result is the same bits whether a call takes it alone or with its group (the model
// calls per GQA group; a prompt and a decode step take the same path).
TEST(AttentionKernel, AHeadGivesTheSameBitsAloneOrInItsGroup) {
    const auto isas = simd_isas();
    if (isas.empty()) GTEST_SKIP() << "no AVX2 or AVX-512 on this CPU/build";
    std::mt19937 rng(3);
    const Case all = make_case(7, 64, 77, rng);
    for (AttentionIsa isa : isas) {
        const auto together = run(isa, all, 0.125f);
        for (int h = 0; h < all.heads; ++h) {
            Case one = all;
            one.heads = 1;
            one.q.assign(all.q.begin() + h * 64, all.q.begin() + (h + 1) * 64);
            one.sinks = {all.sinks[static_cast<size_t>(h)]};
            const auto alone = run(isa, one, 0.125f);
            EXPECT_EQ(0, std::memcmp(alone.data(), together.data() + h * 64, 64 * sizeof(float)))
                << attention_isa_name(isa) << " head " << h;
        }
    }
}

// Head sizes the variant has no code for run the reference: the same bits.
TEST(AttentionKernel, OtherHeadSizesRunTheReference) {
    std::mt19937 rng(4);
    for (int d : {8, 48, 80}) {
        const Case c = make_case(2, d, 33, rng);
        const auto ref = run(AttentionIsa::reference, c, 0.2f);
        for (AttentionIsa isa : {AttentionIsa::avx512, AttentionIsa::avx2}) {
            const auto fast = run(isa, c, 0.2f);
            EXPECT_EQ(0, std::memcmp(ref.data(), fast.data(), ref.size() * sizeof(float)))
                << attention_isa_name(isa) << " d " << d;
        }
    }
}

TEST(AttentionKernel, ALargeSinkTakesTheWeightAndNaNsPropagate) {
    std::mt19937 rng(5);
    for (AttentionIsa isa : {AttentionIsa::reference, AttentionIsa::avx512, AttentionIsa::avx2}) {
        if (!attention_isa_available(isa)) continue;
        SCOPED_TRACE(attention_isa_name(isa));
        Case c = make_case(2, 64, 40, rng);
        c.sinks = {60.0f, 0.0f};  // head 0: the sink takes (almost) all of the softmax
        const auto out = run(isa, c, 0.125f);
        for (int i = 0; i < 64; ++i) EXPECT_LT(std::abs(out[static_cast<size_t>(i)]), 1e-20f);
        c.q[3] = std::numeric_limits<float>::quiet_NaN();  // head 0's query
        const auto nan = run(isa, c, 0.125f);
        for (int i = 0; i < 64; ++i) EXPECT_TRUE(std::isnan(nan[static_cast<size_t>(i)])) << i;
        for (int i = 64; i < 128; ++i) EXPECT_FALSE(std::isnan(nan[static_cast<size_t>(i)])) << i;
    }
}

}  // namespace
}  // namespace neural::cpu
