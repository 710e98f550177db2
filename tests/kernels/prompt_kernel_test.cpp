// The int8 prompt kernels (cpu/kernels/prompt_kernel.h): Q8 quantization, the int8 GEMM of each
// variant against the scalar reference (bit for bit) and against a double-precision dot product of
// the dequantized operands, and the whole MoE job against the fp32 reference within fp32-level
// precision, with the invariances the runtime relies on: any team and thread count, any batch
// of tokens, raw == packed records; bad selections and cancels.
#include "cpu/kernels/prompt_kernel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "cpu/team/worker_team.h"
#include "neural/error.h"
#include "test_experts.h"

namespace neural {
namespace {

using cpu::PromptIsa;
using cpu::PromptKernel;
using test::ExpertSpec;
using test::TestExpert;

std::vector<PromptIsa> available_isas() {
    std::vector<PromptIsa> out = {PromptIsa::scalar};
    for (PromptIsa isa : {PromptIsa::avx512vnni, PromptIsa::amx_int8, PromptIsa::amx_emulated}) {
        if (cpu::prompt_isa_available(isa)) out.push_back(isa);
    }
    return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Element k of a block sits at operand position p with 8m + 2i + h = k, p = 8m + 4h + i.
int position_of(int k) { return 8 * (k / 8) + 4 * (k & 1) + (k % 8) / 2; }

// Multi-pass Q8 rows of n vectors of `cols` values (cols / 32 blocks of prompt_q8_bytes()).
struct Q8Rows {
    std::vector<std::uint8_t> q;
    std::vector<float> d;
};
Q8Rows quantize_rows(const std::vector<float>& v, int n, int cols) {
    const int bytes = cpu::prompt_q8_bytes();
    Q8Rows r;
    r.q.resize(static_cast<size_t>(n * cols / 32 * bytes));
    r.d.resize(static_cast<size_t>(n * cols / 32));
    for (int b = 0; b < n * cols / 32; ++b)
        cpu::prompt_quantize_block(v.data() + 32 * b, r.q.data() + bytes * b, r.d.data() + b);
    return r;
}

int pass_value(const std::uint8_t* q, int j, int k) {
    return int(q[32 * j + position_of(k)]) - 128;
}

// The value the Q8 bytes of element k of a block stand for: d (256 q_0 + q_1 + q_2 / 256).
double dequantized(const std::uint8_t* q, float d, int k) {
    double v = 0, step = 256.0 * d;
    for (int j = 0; j < cpu::prompt_q8_passes(); ++j, step /= 256.0)
        v += pass_value(q, j, k) * step;
    return v;
}

// q_0 is the one-pass 8-bit quantization (step max|x| / 127, give or take a carry); every later
// pass the residual's with a 256 times finer step, so a value is within half the last step of
// its bytes (a whole step where the last pass clamps).
TEST(PromptQuantize, RoundsEveryValueToTheNearestFineStepOfItsBlock) {
    const int passes = cpu::prompt_q8_passes();
    ASSERT_GE(passes, 2);
    const std::vector<float> v = test::random_vector(32 * 64, 3, 2.0f);
    std::vector<std::uint8_t> q(static_cast<size_t>(cpu::prompt_q8_bytes()));
    for (int b = 0; b < 64; ++b) {
        const float* x = v.data() + 32 * b;
        float d = 0;
        cpu::prompt_quantize_block(x, q.data(), &d);
        float amax = 0;
        for (int k = 0; k < 32; ++k) amax = std::max(amax, std::abs(x[k]));
        EXPECT_FLOAT_EQ(d, amax / 127.0f / 256.0f);
        const double last = std::ldexp(double(d), -8 * (passes - 2));
        bool extreme = false;
        for (int k = 0; k < 32; ++k) {
            const int q0 = pass_value(q.data(), 0, k);
            EXPECT_GE(q0, -127);
            EXPECT_LE(q0, 127);
            EXPECT_NEAR(q0 * 256.0 * d, x[k], 128.5 * d * 1.0001) << b << " " << k;
            const int ql = pass_value(q.data(), passes - 1, k);
            const bool at_clamp = ql == 127 || ql == -128;
            EXPECT_NEAR(dequantized(q.data(), d, k), x[k], (at_clamp ? 1.0 : 0.5) * last * 1.001)
                << b << " " << k;
            extreme = extreme || std::abs(q0) == 127;
        }
        EXPECT_TRUE(extreme);  // the largest value maps to +-127
    }
}

TEST(PromptQuantize, ZeroAndNonFiniteBlocks) {
    std::vector<float> zero(32, 0.0f);
    std::vector<std::uint8_t> q(static_cast<size_t>(cpu::prompt_q8_bytes()));
    float d = 1;
    cpu::prompt_quantize_block(zero.data(), q.data(), &d);
    EXPECT_EQ(d, 0.0f);
    for (std::uint8_t b : q) EXPECT_EQ(b, 128);
    for (float bad :
         {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
        std::vector<float> v = test::random_vector(32, 5);
        v[7] = bad;
        cpu::prompt_quantize_block(v.data(), q.data(), &d);
        EXPECT_TRUE(std::isnan(d));
        for (std::uint8_t b : q) EXPECT_EQ(b, 128);
    }
}

// gemm16 of every variant: the same bits as the scalar reference for raw and packed records,
// token counts across the register-tile sizes, both projections; and the value a double
// precision dot product of the dequantized operands gives (which checks the operand order).
TEST(PromptGemm, VariantsEqualTheScalarReferenceAndTheDequantizedDot) {
    ExpertSpec spec;
    spec.hidden = 128;
    spec.intermediate = 96;
    const TestExpert e = make_test_expert(spec);
    for (int p = 0; p < 2; ++p) {
        const Projection proj = p == 0 ? Projection::kGateUp : Projection::kDown;
        const int cols = p == 0 ? spec.hidden : spec.intermediate;
        const std::int64_t rows = p == 0 ? 2 * spec.intermediate : spec.hidden;
        for (int n : {1, 3, 8, 9, 17}) {
            const std::vector<float> x = test::random_vector(static_cast<size_t>(n * cols), 11 + n);
            const Q8Rows q = quantize_rows(x, n, cols);
            for (std::int64_t row0 = 0; row0 < rows; row0 += 16) {
                std::vector<float> ref(static_cast<size_t>(n * 16));
                cpu::prompt_gemm16(PromptIsa::scalar, e.view(false), p, row0, q.q.data(),
                                   q.d.data(), n, ref.data());
                for (PromptIsa isa : available_isas()) {
                    for (bool packed : {false, true}) {
                        std::vector<float> got(ref.size());
                        cpu::prompt_gemm16(isa, e.view(packed), p, row0, q.q.data(), q.d.data(), n,
                                           got.data());
                        EXPECT_TRUE(same_bits(got, ref))
                            << cpu::prompt_isa_name(isa) << " p " << p << " n " << n << " row0 "
                            << row0 << " packed " << packed;
                    }
                }
                for (int r = 0; r < 16; ++r) {
                    const std::vector<float> w = test::decode_raw_row(e, proj, row0 + r);
                    for (int i = 0; i < n; ++i) {
                        double dot = 0, mag = 0;
                        for (int k = 0; k < cols; ++k) {
                            const int b = k / 32;
                            const double xk = dequantized(
                                q.q.data() + static_cast<size_t>((i * cols / 32 + b) *
                                                                 cpu::prompt_q8_bytes()),
                                q.d[static_cast<size_t>(i * cols / 32 + b)], k % 32);
                            dot += double(w[static_cast<size_t>(k)]) * xk;
                            mag += std::abs(double(w[static_cast<size_t>(k)]) * xk);
                        }
                        EXPECT_NEAR(ref[static_cast<size_t>(i * 16 + r)], dot, 1e-5 * mag + 1e-30)
                            << "p " << p << " row " << row0 + r << " token " << i;
                    }
                }
            }
        }
    }
}

// A layer of E experts with K choices per token for T tokens (router weights normalized).
struct Layer {
    std::vector<TestExpert> experts;
    std::vector<int> sel;
    std::vector<float> gate;
    std::vector<float> h;
    int K = 4;
    std::int64_t T = 0;
    int H = 0;
};

Layer make_layer(int E, int K, std::int64_t T, int H, int I, std::uint64_t seed) {
    Layer l;
    l.K = K;
    l.T = T;
    l.H = H;
    for (int e = 0; e < E; ++e) {
        ExpertSpec spec;
        spec.hidden = H;
        spec.intermediate = I;
        spec.seed = seed * 100 + static_cast<std::uint64_t>(e);
        l.experts.push_back(make_test_expert(spec));
    }
    std::mt19937_64 rng(seed);
    for (std::int64_t t = 0; t < T; ++t) {
        std::vector<int> all(static_cast<size_t>(E));
        for (int e = 0; e < E; ++e) all[static_cast<size_t>(e)] = e;
        std::shuffle(all.begin(), all.end(), rng);
        float sum = 0;
        std::vector<float> g(static_cast<size_t>(K));
        for (int k = 0; k < K; ++k) {
            g[static_cast<size_t>(k)] = std::uniform_real_distribution<float>(0.1f, 1.0f)(rng);
            sum += g[static_cast<size_t>(k)];
        }
        for (int k = 0; k < K; ++k) {
            l.sel.push_back(all[static_cast<size_t>(k)]);
            l.gate.push_back(g[static_cast<size_t>(k)] / sum);
        }
    }
    l.h = test::random_vector(static_cast<size_t>(T * H), seed + 7);
    return l;
}

std::vector<cpu::ExpertInput> inputs(const Layer& l, bool packed) {
    std::vector<cpu::ExpertInput> in;
    for (const TestExpert& e : l.experts) in.push_back(e.input(packed));
    return in;
}

// x0 + the layer's MoE output for tokens [t0, t0 + n).
std::vector<float> run_int8(PromptKernel& k, cpu::WorkerTeam& team, const Layer& l, std::int64_t t0,
                            std::int64_t n, bool packed = false) {
    std::vector<float> x = test::random_vector(static_cast<size_t>(n * l.H), 99 + t0);
    const auto in = inputs(l, packed);
    k.run(team, in, l.h.data() + t0 * l.H, n, l.K, l.sel.data() + t0 * l.K,
          l.gate.data() + t0 * l.K, x.data());
    return x;
}

TEST(PromptKernel, MatchesTheFp32ReferenceWithinTheInt8Tolerance) {
    const Layer l = make_layer(8, 4, 21, 64, 96, 1);
    cpu::ReferenceTeam team(2);
    for (PromptIsa isa : available_isas()) {
        SCOPED_TRACE(cpu::prompt_isa_name(isa));
        PromptKernel k(isa);
        const std::vector<float> got = run_int8(k, team, l, 0, l.T);
        const std::vector<float> x0 = test::random_vector(static_cast<size_t>(l.T * l.H), 99);
        double err = 0, norm = 0;
        for (std::int64_t t = 0; t < l.T; ++t) {
            std::vector<float> ref(x0.begin() + t * l.H, x0.begin() + (t + 1) * l.H);
            std::vector<const TestExpert*> ex;
            std::vector<float> w;
            for (int k2 = 0; k2 < l.K; ++k2) {
                ex.push_back(
                    &l.experts[static_cast<size_t>(l.sel[static_cast<size_t>(t * l.K + k2)])]);
                w.push_back(l.gate[static_cast<size_t>(t * l.K + k2)]);
            }
            test::reference_decode(ex, w, l.h.data() + t * l.H, ref.data());
            for (int i = 0; i < l.H; ++i) {
                const double y_ref =
                    ref[static_cast<size_t>(i)] - x0[static_cast<size_t>(t * l.H + i)];
                const double y_got =
                    got[static_cast<size_t>(t * l.H + i)] - x0[static_cast<size_t>(t * l.H + i)];
                err += (y_got - y_ref) * (y_got - y_ref);
                norm += y_ref * y_ref;
            }
        }
        // Two-pass Q8 of h and of the SwiGLU activations (measured 4.6e-5 of the output's norm;
        // one pass gave ~1e-2, three 2.3e-7).
        EXPECT_LT(std::sqrt(err / norm), 2e-4);
        EXPECT_GT(err, 0.0);  // really the int8 path
    }
}

TEST(PromptKernel, SameBitsForEveryVariantTeamThreadCountAndRecordKind) {
    const Layer l = make_layer(8, 4, 37, 64, 96, 2);
    cpu::ReferenceTeam one(1);
    PromptKernel scalar(PromptIsa::scalar);
    const std::vector<float> ref = run_int8(scalar, one, l, 0, l.T);
    for (PromptIsa isa : available_isas()) {
        PromptKernel k(isa);
        for (int threads : {1, 2, 3}) {
            cpu::ReferenceTeam team(threads);
            for (bool packed : {false, true}) {
                EXPECT_TRUE(same_bits(run_int8(k, team, l, 0, l.T, packed), ref))
                    << cpu::prompt_isa_name(isa) << " threads " << threads << " packed " << packed;
            }
        }
        cpu::TeamOptions o;
        o.persistent = true;
        o.threads = 3;
        o.library = NEURAL_KDLL_TEST_PATH;
        auto persistent = cpu::PersistentTeam::load(o);
        EXPECT_TRUE(same_bits(run_int8(k, *persistent, l, 0, l.T), ref))
            << cpu::prompt_isa_name(isa) << " persistent";
    }
}

// A token's result does not depend on the other tokens of the call: each split of the tokens
// into calls gives the same bits as one call.
TEST(PromptKernel, ATokensResultDoesNotDependOnTheBatch) {
    const Layer l = make_layer(8, 4, 30, 64, 96, 3);
    cpu::ReferenceTeam team(2);
    PromptKernel k;
    std::vector<float> x = test::random_vector(static_cast<size_t>(l.T * l.H), 5);
    std::vector<float> whole = x;
    const auto in = inputs(l, false);
    k.run(team, in, l.h.data(), l.T, l.K, l.sel.data(), l.gate.data(), whole.data());
    std::vector<float> parts = x;
    for (std::int64_t t0 : {0, 1, 13}) {
        const std::int64_t n = t0 == 0 ? 1 : t0 == 1 ? 12 : l.T - 13;
        k.run(team, in, l.h.data() + t0 * l.H, n, l.K, l.sel.data() + t0 * l.K,
              l.gate.data() + t0 * l.K, parts.data() + t0 * l.H);
    }
    EXPECT_TRUE(same_bits(parts, whole));
}

TEST(PromptKernel, NonFiniteInputsGiveNaNNotACrash) {
    Layer l = make_layer(4, 2, 5, 64, 96, 4);
    l.h[static_cast<size_t>(2 * l.H + 3)] = std::numeric_limits<float>::quiet_NaN();
    cpu::ReferenceTeam team(2);
    PromptKernel k;
    const std::vector<float> x = run_int8(k, team, l, 0, l.T);
    for (std::int64_t t = 0; t < l.T; ++t) {
        for (int i = 0; i < l.H; ++i) {
            EXPECT_EQ(std::isnan(x[static_cast<size_t>(t * l.H + i)]), t == 2) << t << " " << i;
        }
    }
}

TEST(PromptKernel, RejectsBadSelectionsAndHonoursCancel) {
    Layer l = make_layer(4, 2, 6, 64, 96, 5);
    cpu::ReferenceTeam team(2);
    PromptKernel k;
    const auto in = inputs(l, false);
    std::vector<float> x(static_cast<size_t>(l.T * l.H), 1.0f);
    const std::vector<float> x0 = x;
    l.sel[3] = 4;  // outside the 4 experts
    EXPECT_THROW(k.run(team, in, l.h.data(), l.T, l.K, l.sel.data(), l.gate.data(), x.data()),
                 Error);
    l.sel[3] = -1;
    EXPECT_THROW(k.run(team, in, l.h.data(), l.T, l.K, l.sel.data(), l.gate.data(), x.data()),
                 Error);
    l.sel[3] = 1;
    std::vector<cpu::ExpertInput> missing = in;
    missing[static_cast<size_t>(l.sel[0])] = cpu::ExpertInput{};
    EXPECT_THROW(k.run(team, missing, l.h.data(), l.T, l.K, l.sel.data(), l.gate.data(), x.data()),
                 Error);
    std::atomic<bool> cancel{true};
    EXPECT_THROW(
        k.run(team, in, l.h.data(), l.T, l.K, l.sel.data(), l.gate.data(), x.data(), &cancel),
        Cancelled);
    EXPECT_TRUE(same_bits(x, x0));
}

}  // namespace
}  // namespace neural
