// The bf16 prompt kernel (cpu/kernels/prompt_bf16.h): a layer's MoE for a block of tokens on the
// bf16 expert GEMM, both activation operands (bf16x2: hi + lo; bf16: one rounding), against the
// fp32 reference of the same arithmetic (reference_decode with the operands rounded as the kernel
// rounds them), and the invariances the runtime relies on, bit for bit: every GEMM variant (the
// scalar reference, avx2, avx512, amx-bf16, amx-emulated), any team and thread count, the
// persistent team, raw and packed records, any split of the tokens into calls; bad selections
// and cancels.
#include "cpu/kernels/prompt_bf16.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/team/worker_team.h"
#include "neural/error.h"
#include "test_experts.h"

namespace neural {
namespace {

using cpu::Bf16ExpertIsa;
using cpu::Bf16PromptKernel;
using cpu::Bf16PromptOperand;
using test::ExpertSpec;
using test::TestExpert;

std::vector<Bf16ExpertIsa> available_isas() {
    std::vector<Bf16ExpertIsa> out;
    for (Bf16ExpertIsa isa : {Bf16ExpertIsa::scalar, Bf16ExpertIsa::avx2, Bf16ExpertIsa::avx512,
                              Bf16ExpertIsa::amx_bf16, Bf16ExpertIsa::amx_emulated}) {
        if (cpu::bf16_expert_isa_available(isa)) out.push_back(isa);
    }
    return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

float bf16_round(float v) {
    std::uint16_t b;
    cpu::bf16_round_activations(&v, 1, &b);
    const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
// The value the split operand stands for: bf16(v) + bf16(v - bf16(v)).
float split_round(float v) {
    const float hi = bf16_round(v);
    return hi + bf16_round(v - hi);
}

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
std::vector<float> run(Bf16PromptKernel& k, cpu::WorkerTeam& team, const Layer& l, std::int64_t t0,
                       std::int64_t n, bool packed = false) {
    std::vector<float> x = test::random_vector(static_cast<size_t>(n * l.H), 99 + t0);
    const auto in = inputs(l, packed);
    k.run(team, in, l.h.data() + t0 * l.H, n, l.K, l.sel.data() + t0 * l.K,
          l.gate.data() + t0 * l.K, x.data());
    return x;
}

// Against reference_decode on the operands the kernel multiplies (h and the SwiGLU outputs
// rounded as the operand rounds them): the remaining differences are fp32 summation orders and
// exp_poly against expf, ~1e-7 of the output's norm. Against the unrounded fp32 reference the
// split operand stays within ~1e-6 and the single rounding is ~7000 times farther.
TEST(Bf16PromptKernel, MatchesTheReferenceOnItsRoundedOperands) {
    const Layer l = make_layer(8, 4, 21, 64, 96, 1);
    cpu::ReferenceTeam team(2);
    for (Bf16PromptOperand operand : {Bf16PromptOperand::split, Bf16PromptOperand::bf16}) {
        SCOPED_TRACE(cpu::bf16_prompt_operand_name(operand));
        const auto round = operand == Bf16PromptOperand::split ? &split_round : &bf16_round;
        Bf16PromptKernel k(cpu::best_bf16_expert_isa(), operand);
        const std::vector<float> got = run(k, team, l, 0, l.T);
        const std::vector<float> x0 = test::random_vector(static_cast<size_t>(l.T * l.H), 99);
        double err = 0, plain_err = 0, norm = 0;
        for (std::int64_t t = 0; t < l.T; ++t) {
            std::vector<const TestExpert*> ex;
            std::vector<float> w;
            for (int k2 = 0; k2 < l.K; ++k2) {
                ex.push_back(
                    &l.experts[static_cast<size_t>(l.sel[static_cast<size_t>(t * l.K + k2)])]);
                w.push_back(l.gate[static_cast<size_t>(t * l.K + k2)]);
            }
            std::vector<float> h(l.h.begin() + t * l.H, l.h.begin() + (t + 1) * l.H);
            std::vector<float> hr(h.size());
            std::transform(h.begin(), h.end(), hr.begin(), round);
            std::vector<float> ref(x0.begin() + t * l.H, x0.begin() + (t + 1) * l.H);
            std::vector<float> plain = ref;
            test::reference_decode(ex, w, hr.data(), ref.data(), 7.0f, 1.702f, round);
            test::reference_decode(ex, w, h.data(), plain.data());
            for (int i = 0; i < l.H; ++i) {
                const double g = got[static_cast<size_t>(t * l.H + i)];
                const double r = ref[static_cast<size_t>(i)], y = r - x0[t * l.H + i];
                err += (g - r) * (g - r);
                plain_err +=
                    (g - plain[static_cast<size_t>(i)]) * (g - plain[static_cast<size_t>(i)]);
                norm += y * y;
            }
        }
        std::printf("[ info ] %s: rms error %.3g against its operands, %.3g against fp32\n",
                    cpu::bf16_prompt_operand_name(operand), std::sqrt(err / norm),
                    std::sqrt(plain_err / norm));
        EXPECT_LT(std::sqrt(err / norm), 1e-6);  // measured 1e-7
        EXPECT_GT(std::sqrt(plain_err / norm), 0.0);
        if (operand == Bf16PromptOperand::split) {
            EXPECT_LT(std::sqrt(plain_err / norm), 1e-5);  // measured 1.1e-6
        } else {
            EXPECT_LT(std::sqrt(plain_err / norm), 2e-2);  // measured 7.7e-3
        }
    }
}

TEST(Bf16PromptKernel, SameBitsForEveryVariantTeamThreadCountAndRecordKind) {
    const Layer l = make_layer(8, 4, 37, 64, 96, 2);
    cpu::ReferenceTeam one(1);
    std::string ran;
    for (Bf16ExpertIsa isa : available_isas())
        ran += std::string(ran.empty() ? "" : ", ") + cpu::bf16_expert_isa_name(isa);
    std::printf("bf16 prompt kernel variants compared here: %s\n", ran.c_str());
    for (Bf16PromptOperand operand : {Bf16PromptOperand::split, Bf16PromptOperand::bf16}) {
        Bf16PromptKernel scalar(Bf16ExpertIsa::scalar, operand);
        const std::vector<float> ref = run(scalar, one, l, 0, l.T);
        for (Bf16ExpertIsa isa : available_isas()) {
            SCOPED_TRACE(std::string(cpu::bf16_prompt_operand_name(operand)) + " " +
                         cpu::bf16_expert_isa_name(isa));
            Bf16PromptKernel k(isa, operand);
            for (int threads : {1, 3}) {
                cpu::ReferenceTeam team(threads);
                for (bool packed : {false, true}) {
                    EXPECT_TRUE(same_bits(run(k, team, l, 0, l.T, packed), ref))
                        << "threads " << threads << " packed " << packed;
                }
            }
            cpu::TeamOptions o;
            o.persistent = true;
            o.threads = 3;
            o.library = NEURAL_KDLL_TEST_PATH;
            auto persistent = cpu::PersistentTeam::load(o);
            EXPECT_TRUE(same_bits(run(k, *persistent, l, 0, l.T), ref)) << "persistent";
        }
    }
}

// A token's result does not depend on the other tokens of the call (so neither on a prompt's
// split into passes and blocks): each split of the tokens into calls, one token alone included,
// gives the same bits as one call.
TEST(Bf16PromptKernel, ATokensResultDoesNotDependOnTheBatch) {
    const Layer l = make_layer(8, 4, 30, 64, 96, 3);
    cpu::ReferenceTeam team(2);
    for (Bf16PromptOperand operand : {Bf16PromptOperand::split, Bf16PromptOperand::bf16}) {
        Bf16PromptKernel k(cpu::best_bf16_expert_isa(), operand);
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
        EXPECT_TRUE(same_bits(parts, whole)) << cpu::bf16_prompt_operand_name(operand);
    }
}

TEST(Bf16PromptKernel, NonFiniteInputsGiveNaNNotACrash) {
    Layer l = make_layer(4, 2, 5, 64, 96, 4);
    l.h[static_cast<size_t>(2 * l.H + 3)] = std::numeric_limits<float>::quiet_NaN();
    cpu::ReferenceTeam team(2);
    Bf16PromptKernel k;
    const std::vector<float> x = run(k, team, l, 0, l.T);
    for (std::int64_t t = 0; t < l.T; ++t) {
        for (int i = 0; i < l.H; ++i) {
            EXPECT_EQ(std::isnan(x[static_cast<size_t>(t * l.H + i)]), t == 2) << t << " " << i;
        }
    }
}

TEST(Bf16PromptKernel, RejectsBadSelectionsAndHonoursCancel) {
    Layer l = make_layer(4, 2, 6, 64, 96, 5);
    cpu::ReferenceTeam team(2);
    Bf16PromptKernel k;
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
    EXPECT_EQ(x, x0);
    EXPECT_THROW(Bf16PromptKernel(static_cast<Bf16ExpertIsa>(200)), Error);
}

}  // namespace
}  // namespace neural
