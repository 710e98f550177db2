// The fused expert kernels against the plain decode-then-dot reference, against each other, and
// for the properties the runtime relies on: bit-identical results for any team and thread
// count, raw == packed, capture == record bytes, multi-token == single-token calls.
#include "cpu/kernels/expert_kernel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cpu/persistent/fp_control.h"
#include "cpu/team/worker_team.h"
#include "neural/error.h"
#include "store/format.h"
#include "test_experts.h"
#include "support/environment.h"

namespace neural {
namespace {

using cpu::ExpertInput;
using cpu::ExpertKernel;
using cpu::KernelIsa;
using test::ExpertSpec;
using test::TestExpert;

std::vector<KernelIsa> available_isas() {
    std::vector<KernelIsa> out;
    for (KernelIsa isa : {KernelIsa::scalar, KernelIsa::avx2, KernelIsa::avx512}) {
        if (cpu::kernel_isa_available(isa)) out.push_back(isa);
    }
    return out;
}

std::unique_ptr<cpu::WorkerTeam> persistent_team(int threads) {
    cpu::TeamOptions o;
    o.persistent = true;
    o.threads = threads;
    o.library = NEURAL_KDLL_TEST_PATH;
    return cpu::PersistentTeam::load(o);
}

// Passes jobs through to another team and records which workers ran tasks, so tests can
// check that helper threads (not just the caller) computed part of a result.
class RecordingTeam final : public cpu::WorkerTeam {
public:
    explicit RecordingTeam(cpu::WorkerTeam& inner) : inner_(inner) {}
    const char* name() const override { return inner_.name(); }
    int size() const override { return inner_.size(); }
    using WorkerTeam::run;
    void run(std::span<const cpu::TeamPhase> phases) override {
        std::vector<Wrapped> wrapped(phases.size());
        std::vector<cpu::TeamPhase> mine(phases.size());
        for (size_t i = 0; i < phases.size(); ++i) {
            wrapped[i] = {phases[i], this};
            mine[i] = {phases[i].n_tasks, &trampoline, &wrapped[i]};
        }
        inner_.run(mine);
    }
    cpu::TeamCounters counters() const override { return inner_.counters(); }
    int helper_tasks() const { return helper_tasks_.load(); }

private:
    struct Wrapped {
        cpu::TeamPhase phase;
        RecordingTeam* self;
    };
    static void trampoline(void* ctx, std::int64_t task, std::int32_t worker) {
        auto* w = static_cast<Wrapped*>(ctx);
        if (worker != 0) w->self->helper_tasks_.fetch_add(1);
        w->phase.fn(w->phase.ctx, task, worker);
    }
    cpu::WorkerTeam& inner_;
    std::atomic<int> helper_tasks_{0};
};

std::vector<TestExpert> make_experts(int n, ExpertSpec spec) {
    std::vector<TestExpert> out;
    for (int k = 0; k < n; ++k) {
        spec.seed = spec.seed * 1000 + static_cast<std::uint64_t>(k) + 1;
        out.push_back(test::make_test_expert(spec));
    }
    return out;
}

const std::vector<float> kWeights = {0.4f, 0.3f, 0.2f, 0.1f};

using test::set_env;

// out = base + sum_k w_k y_k through the kernel.
std::vector<float> run_decode(KernelIsa isa, cpu::WorkerTeam& team,
                              const std::vector<TestExpert>& experts, int n, bool packed,
                              const std::vector<float>& x, const std::vector<float>& base) {
    ExpertKernel kernel(isa);
    std::vector<ExpertInput> in;
    for (int k = 0; k < n; ++k)
        in.push_back(
            experts[static_cast<size_t>(k)].input(packed, kWeights[static_cast<size_t>(k)]));
    std::vector<float> out = base;
    kernel.decode(team, in, x.data(), out.data());
    return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// |a - b| <= rel * (|b| + rms(b)) elementwise: fp32 rounding of differently ordered sums.
void expect_close(const std::vector<float>& a, const std::vector<float>& b, double rel,
                  const std::string& what) {
    ASSERT_EQ(a.size(), b.size());
    double ss = 0;
    for (float v : b) ss += static_cast<double>(v) * v;
    const double rms = std::sqrt(ss / static_cast<double>(b.size()));
    int bad = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double tol = rel * (std::fabs(static_cast<double>(b[i])) + rms);
        if (!(std::fabs(static_cast<double>(a[i]) - b[i]) <= tol) && ++bad <= 5) {
            ADD_FAILURE() << what << ": element " << i << " " << a[i] << " vs " << b[i] << " (tol "
                          << tol << ")";
        }
    }
    EXPECT_EQ(bad, 0) << what;
}

struct Shape {
    int hidden, intermediate;
};
const Shape kSmallShapes[] = {{64, 96}, {96, 64}, {32, 96}, {128, 128}};

TEST(ExpertRecord, LayoutMatchesTheStore) {
    for (Shape s : kSmallShapes) {
        for (bool packed : {false, true}) {
            const auto kind = packed ? store::StoreKind::kPacked : store::StoreKind::kRaw;
            const store::RecordLayout l = store::RecordLayout::make(kind, s.hidden, s.intermediate);
            std::vector<std::uint8_t> buf(l.fixed_bytes);
            const cpu::ExpertRecordView v = cpu::ExpertRecordView::make(
                buf.data(), s.hidden, s.intermediate,
                packed ? cpu::RecordKind::packed : cpu::RecordKind::raw);
            EXPECT_EQ(v.bytes(), l.fixed_bytes);
            for (Projection p : {Projection::kGateUp, Projection::kDown}) {
                EXPECT_EQ(v.codes_offset(p), l[p].blocks_offset);
                EXPECT_EQ(v.scales_offset(p), l[p].scales_offset);
                EXPECT_EQ(static_cast<std::uint64_t>(v.scale_row_bytes(p)), l[p].scale_stride);
                EXPECT_EQ(v.rows(p), l[p].rows);
                EXPECT_EQ(v.blocks_per_row(p), l[p].groups);
            }
        }
    }
    // gpt-oss-20b/120b: 13,219,200 B raw, 12,839,040 B packed (docs/STORE_FORMAT.md).
    EXPECT_EQ(cpu::ExpertRecordView::raw_bytes(2880, 2880), 13219200u);
    EXPECT_EQ(cpu::ExpertRecordView::packed_bytes(2880, 2880), 12839040u);
}

TEST(ExpertRecord, RejectsBadShapesAndSizes) {
    std::vector<std::uint8_t> buf(cpu::ExpertRecordView::raw_bytes(64, 96));
    EXPECT_THROW(cpu::ExpertRecordView::make(buf.data(), 48, 96, cpu::RecordKind::raw), Error);
    EXPECT_THROW(cpu::ExpertRecordView::make(buf.data(), 64, 0, cpu::RecordKind::raw), Error);
    EXPECT_THROW(cpu::ExpertRecordView::make(nullptr, 64, 96, cpu::RecordKind::raw), Error);
    EXPECT_THROW(cpu::ExpertRecordView::make(buf.data(), 64, 96, cpu::RecordKind::raw, 100), Error);
    EXPECT_THROW(cpu::ExpertRecordView::make(buf.data(), 64, 96, cpu::RecordKind::packed, 100),
                 Error);
}

TEST(ExpertRecord, PackedRowsDecodeToTheRawScales) {
    ExpertSpec spec;
    spec.wide_rows = 5;
    const TestExpert e = test::make_test_expert(spec);
    ASSERT_GT(e.escaped_gate_up, 0u);
    ASSERT_GT(e.escaped_down, 0u);
    const cpu::ExpertRecordView raw = e.view(false), packed = e.view(true);
    std::uint8_t tmp_a[1024], tmp_b[1024];
    for (Projection p : {Projection::kGateUp, Projection::kDown}) {
        const int g = raw.blocks_per_row(p);
        for (std::int64_t r = 0; r < raw.rows(p); ++r) {
            ASSERT_EQ(std::memcmp(raw.row_scales(p, r, tmp_a), packed.row_scales(p, r, tmp_b), g),
                      0)
                << static_cast<int>(p) << " row " << r;
        }
    }
}

TEST(ExpertRecord, BadEscapeOffsetGivesNaNScalesNotAnOutOfBoundsRead) {
    ExpertSpec spec;
    spec.wide_rows = 2;
    TestExpert e = test::make_test_expert(spec);
    const cpu::ExpertRecordView v = e.view(true);
    const int g = v.blocks_per_row(Projection::kGateUp);
    for (std::int64_t r = 0; r < v.rows(Projection::kGateUp); ++r) {
        std::uint8_t* slot = e.packed.data() + v.scales_offset(Projection::kGateUp) +
                             r * v.scale_row_bytes(Projection::kGateUp);
        if (slot[0] != 0xFF) continue;
        store::put_u32(slot + 1, 0x7FFFFFF0u);
        std::uint8_t tmp[1024];
        const std::uint8_t* s = v.row_scales(Projection::kGateUp, r, tmp);
        for (int j = 0; j < g; ++j) EXPECT_EQ(s[j], 0xFF);
        return;
    }
    FAIL() << "no escaped row";
}

// The scalar kernel is the reference model's math: bit-identical to decode_row + cpu::dot.
TEST(ExpertKernel, ScalarMatchesTheReferenceModelMathExactly) {
    cpu::ReferenceTeam team(1);
    for (Shape s : kSmallShapes) {
        ExpertSpec spec;
        spec.hidden = s.hidden;
        spec.intermediate = s.intermediate;
        const auto experts = make_experts(4, spec);
        const auto x = test::random_vector(static_cast<size_t>(s.hidden), 11);
        const auto base = test::random_vector(static_cast<size_t>(s.hidden), 12);
        for (int n = 1; n <= 4; ++n) {
            std::vector<const TestExpert*> ptrs;
            for (int k = 0; k < n; ++k) ptrs.push_back(&experts[static_cast<size_t>(k)]);
            std::vector<float> want = base;
            test::reference_decode(ptrs, kWeights, x.data(), want.data());
            const auto got = run_decode(KernelIsa::scalar, team, experts, n, false, x, base);
            EXPECT_TRUE(same_bits(got, want)) << s.hidden << "x" << s.intermediate << " n=" << n;
            // And close to the double-precision result.
            std::vector<double> ref64(base.begin(), base.end());
            test::reference_decode_f64(ptrs, kWeights, x.data(), ref64.data());
            expect_close(got, std::vector<float>(ref64.begin(), ref64.end()), 1e-5,
                         "scalar vs f64");
        }
    }
}

TEST(ExpertKernel, SimdVariantsAgreeWithScalarToFp32Rounding) {
    const auto isas = available_isas();
    std::printf("kernel variants available here: ");
    for (KernelIsa isa : isas) std::printf("%s ", cpu::kernel_isa_name(isa));
    std::printf("\n");
    cpu::ReferenceTeam team(2);
    for (Shape s : kSmallShapes) {
        for (int scale_hi : {124, 132}) {  // 132: gates beyond the clamp limit
            ExpertSpec spec;
            spec.hidden = s.hidden;
            spec.intermediate = s.intermediate;
            spec.gate_up_scale_hi = scale_hi;
            const auto experts = make_experts(4, spec);
            const auto x = test::random_vector(static_cast<size_t>(s.hidden), 21);
            const auto base = test::random_vector(static_cast<size_t>(s.hidden), 22);
            const auto want = run_decode(KernelIsa::scalar, team, experts, 4, false, x, base);
            for (KernelIsa isa : isas) {
                const auto got = run_decode(isa, team, experts, 4, false, x, base);
                expect_close(got, want, 1e-5, cpu::kernel_isa_name(isa));
            }
        }
    }
}

std::vector<KernelIsa> simd_isas() {
    std::vector<KernelIsa> out;
    for (KernelIsa isa : available_isas()) {
        if (isa != KernelIsa::scalar) out.push_back(isa);
    }
    return out;
}

// Every SIMD variant gives the bits of the lane order written out (test_experts.h:
// lane_reference_decode), hence the same bits as each other: the reply to a seed does not depend
// on whether the CPU has AVX2 or AVX-512 (docs/KERNELS.md "Every variant the same bits"). Decode
// with 1-4 experts and multi() with 1-16 tokens, raw and packed records, with and without
// capture, gates beyond the clamp, many shapes including G = 1 and the real 2880.
TEST(ExpertKernel, SimdVariantsGiveTheLaneReferenceBits) {
    const auto isas = simd_isas();
    std::printf("expert kernel variants checked bit for bit against the lane reference: ");
    for (KernelIsa isa : isas) std::printf("%s ", cpu::kernel_isa_name(isa));
    std::printf("%s\n", isas.empty() ? "(none: no SIMD variant runs here)" : "");
    if (isas.empty()) GTEST_SKIP() << "no SIMD expert kernel on this CPU/build";
    auto team = persistent_team(3);
    const Shape shapes[] = {{64, 96}, {96, 64}, {32, 96}, {128, 128}, {32, 32}, {160, 224}};
    std::uint64_t seed = 500;
    for (Shape s : shapes) {
        for (int scale_hi : {124, 132}) {  // 132: gates beyond the clamp limit
            ExpertSpec spec;
            spec.hidden = s.hidden;
            spec.intermediate = s.intermediate;
            spec.gate_up_scale_hi = scale_hi;
            spec.seed = ++seed;
            const auto experts = make_experts(4, spec);
            const auto x = test::random_vector(static_cast<size_t>(s.hidden), ++seed);
            const auto base = test::random_vector(static_cast<size_t>(s.hidden), ++seed);
            for (int n = 1; n <= 4; ++n) {
                std::vector<const TestExpert*> ptrs;
                for (int k = 0; k < n; ++k) ptrs.push_back(&experts[static_cast<size_t>(k)]);
                std::vector<float> want = base;
                test::lane_reference_decode(ptrs, kWeights, x.data(), want.data());
                for (KernelIsa isa : isas) {
                    for (bool packed : {false, true}) {
                        EXPECT_TRUE(
                            same_bits(run_decode(isa, *team, experts, n, packed, x, base), want))
                            << cpu::kernel_isa_name(isa) << " " << s.hidden << "x" << s.intermediate
                            << " n=" << n << " packed=" << packed << " scale_hi=" << scale_hi;
                    }
                }
            }
            // multi(): T tokens of expert 0, token t weighted ws[t], capturing in one pass.
            for (int T : {1, 2, 3, 7, 8, 9, 16}) {
                std::vector<std::vector<float>> xs, want;
                std::vector<float> ws;
                for (int t = 0; t < T; ++t) {
                    xs.push_back(test::random_vector(static_cast<size_t>(s.hidden), ++seed));
                    want.push_back(test::random_vector(static_cast<size_t>(s.hidden), ++seed));
                    ws.push_back(0.1f * static_cast<float>(t + 1));
                }
                const auto outs0 = want;
                for (int t = 0; t < T; ++t) {
                    test::lane_reference_decode({&experts[0]}, {ws[static_cast<size_t>(t)]},
                                                xs[static_cast<size_t>(t)].data(),
                                                want[static_cast<size_t>(t)].data());
                }
                std::vector<const float*> xp;
                for (const auto& v : xs) xp.push_back(v.data());
                for (KernelIsa isa : isas) {
                    ExpertKernel kernel(isa);
                    for (bool packed : {false, true}) {
                        for (bool capture : {false, true}) {
                            auto outs = outs0;
                            std::vector<float*> op;
                            for (auto& v : outs) op.push_back(v.data());
                            ExpertInput in = experts[0].input(packed);
                            test::AlignedBytes cap(packed ? experts[0].packed.size()
                                                          : experts[0].raw.size());
                            if (capture) in.capture = cap.data();
                            kernel.multi(*team, in, xp, ws, op);
                            for (int t = 0; t < T; ++t) {
                                EXPECT_TRUE(same_bits(outs[static_cast<size_t>(t)],
                                                      want[static_cast<size_t>(t)]))
                                    << cpu::kernel_isa_name(isa) << " " << s.hidden << "x"
                                    << s.intermediate << " T=" << T << " t=" << t
                                    << " packed=" << packed << " capture=" << capture;
                            }
                        }
                    }
                }
            }
        }
    }
    // The real shape, one expert (the lane reference is slow), raw and packed, capturing.
    ExpertSpec spec;
    spec.hidden = 2880;
    spec.intermediate = 2880;
    spec.wide_rows = 8;
    spec.seed = 77;
    const auto experts = make_experts(1, spec);
    const auto x = test::random_vector(2880, 78);
    const auto base = test::random_vector(2880, 79);
    std::vector<float> want = base;
    test::lane_reference_decode({&experts[0]}, {kWeights[0]}, x.data(), want.data());
    for (KernelIsa isa : isas) {
        for (bool packed : {false, true}) {
            ExpertKernel kernel(isa);
            ExpertInput in = experts[0].input(packed, kWeights[0]);
            test::AlignedBytes cap(packed ? experts[0].packed.size() : experts[0].raw.size());
            in.capture = cap.data();
            std::vector<float> out = base;
            kernel.decode(*team, std::span<const ExpertInput>(&in, 1), x.data(), out.data());
            EXPECT_TRUE(same_bits(out, want))
                << cpu::kernel_isa_name(isa) << " 2880 packed=" << packed;
        }
    }
}

// The real gpt-oss shape (H = I = 2880), four experts, every variant, raw and packed.
TEST(ExpertKernel, RealShape2880) {
    ExpertSpec spec;
    spec.hidden = 2880;
    spec.intermediate = 2880;
    spec.wide_rows = 8;
    const auto experts = make_experts(4, spec);
    const auto x = test::random_vector(2880, 31);
    const auto base = test::random_vector(2880, 32);
    auto team = persistent_team(2);
    std::vector<const TestExpert*> ptrs;
    for (const auto& e : experts) ptrs.push_back(&e);
    std::vector<float> want = base;
    test::reference_decode(ptrs, kWeights, x.data(), want.data());
    for (KernelIsa isa : available_isas()) {
        const auto raw = run_decode(isa, *team, experts, 4, false, x, base);
        const auto packed = run_decode(isa, *team, experts, 4, true, x, base);
        EXPECT_TRUE(same_bits(raw, packed)) << cpu::kernel_isa_name(isa);
        if (isa == KernelIsa::scalar) {
            EXPECT_TRUE(same_bits(raw, want));
        } else {
            expect_close(raw, want, 1e-5, cpu::kernel_isa_name(isa));
        }
    }
}

TEST(ExpertKernel, RawAndPackedRecordsGiveIdenticalBits) {
    cpu::ReferenceTeam team(3);
    for (Shape s : kSmallShapes) {
        ExpertSpec spec;
        spec.hidden = s.hidden;
        spec.intermediate = s.intermediate;
        spec.wide_rows = 6;
        const auto experts = make_experts(4, spec);
        if (s.hidden >= 64) {
            ASSERT_GT(experts[0].escaped_gate_up, 0u);
        }
        const auto x = test::random_vector(static_cast<size_t>(s.hidden), 41);
        const std::vector<float> base(static_cast<size_t>(s.hidden), 0.0f);
        for (KernelIsa isa : available_isas()) {
            EXPECT_TRUE(same_bits(run_decode(isa, team, experts, 4, false, x, base),
                                  run_decode(isa, team, experts, 4, true, x, base)))
                << cpu::kernel_isa_name(isa) << " " << s.hidden << "x" << s.intermediate;
        }
    }
}

TEST(ExpertKernel, BitIdenticalForAnyTeamAndThreadCount) {
    ExpertSpec spec;
    spec.hidden = 256;
    spec.intermediate = 320;
    const auto experts = make_experts(4, spec);
    const auto x = test::random_vector(256, 51);
    const auto base = test::random_vector(256, 52);
    for (KernelIsa isa : available_isas()) {
        cpu::ReferenceTeam one(1);
        const auto want = run_decode(isa, one, experts, 4, true, x, base);
        for (int threads : {1, 2, 3, 8}) {
            cpu::ReferenceTeam ref(threads);
            auto pers = persistent_team(threads);
            RecordingTeam rec_ref(ref), rec_pers(*pers);
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
            for (int rep = 0;
                 rep < 3 || (threads > 1 && std::chrono::steady_clock::now() < deadline &&
                             (rec_ref.helper_tasks() == 0 || rec_pers.helper_tasks() == 0));
                 ++rep) {
                EXPECT_TRUE(same_bits(run_decode(isa, rec_ref, experts, 4, true, x, base), want))
                    << cpu::kernel_isa_name(isa) << " reference team, " << threads << " threads";
                EXPECT_TRUE(same_bits(run_decode(isa, rec_pers, experts, 4, true, x, base), want))
                    << cpu::kernel_isa_name(isa) << " persistent team, " << threads << " threads";
            }
            if (threads > 1) {
                EXPECT_GT(rec_ref.helper_tasks(), 0);
                EXPECT_GT(rec_pers.helper_tasks(), 0);
            }
            EXPECT_EQ(pers->counters().fallbacks, 0u);
        }
    }
}

TEST(ExpertKernel, CaptureCopiesTheRecordBytes) {
    ExpertSpec spec;
    spec.hidden = 128;
    spec.intermediate = 96;
    spec.wide_rows = 4;
    const auto experts = make_experts(4, spec);
    const auto x = test::random_vector(128, 61);
    auto team = persistent_team(3);
    for (KernelIsa isa : available_isas()) {
        for (bool packed : {false, true}) {
            for (size_t misalign : {size_t{0}, size_t{1}}) {  // streaming stores / plain stores
                ExpertKernel kernel(isa);
                std::vector<test::AlignedBytes> cap;
                std::vector<ExpertInput> in;
                for (int k = 0; k < 4; ++k) {
                    const TestExpert& e = experts[static_cast<size_t>(k)];
                    const std::size_t n = packed ? e.packed.size() : e.raw.size();
                    cap.emplace_back(n + misalign + 64);
                    std::memset(cap.back().data(), 0xA5, cap.back().size());
                    in.push_back(e.input(packed, kWeights[static_cast<size_t>(k)]));
                    in.back().capture = cap.back().data() + misalign;
                }
                std::vector<float> out(128, 0.0f), plain(128, 0.0f);
                kernel.decode(*team, in, x.data(), out.data());
                for (int k = 0; k < 4; ++k) {
                    const TestExpert& e = experts[static_cast<size_t>(k)];
                    const std::uint8_t* rec = packed ? e.packed.data() : e.raw.data();
                    const std::size_t n = packed ? e.packed.size() : e.raw.size();
                    const std::uint8_t* c = cap[static_cast<size_t>(k)].data();
                    EXPECT_EQ(std::memcmp(c + misalign, rec, n), 0)
                        << cpu::kernel_isa_name(isa) << " packed=" << packed << " expert " << k;
                    for (size_t i = 0; i < misalign; ++i) EXPECT_EQ(c[i], 0xA5);
                    for (size_t i = misalign + n; i < cap[static_cast<size_t>(k)].size(); ++i) {
                        ASSERT_EQ(c[i], 0xA5) << "capture wrote past the record";
                    }
                    in[static_cast<size_t>(k)].capture = nullptr;
                }
                // Capturing does not change the result.
                kernel.decode(*team, in, x.data(), plain.data());
                EXPECT_TRUE(same_bits(out, plain));

                // multi() captures too.
                test::AlignedBytes mcap(experts[0].raw.size() + experts[0].packed.size());
                ExpertInput one = experts[0].input(packed);
                one.capture = mcap.data() + misalign;
                std::vector<float> o0(128, 0.0f), o1(128, 0.0f);
                const float* xs[2] = {x.data(), x.data()};
                float* outs[2] = {o0.data(), o1.data()};
                const float ws[2] = {1.0f, 0.5f};
                kernel.multi(*team, one, xs, ws, outs);
                EXPECT_EQ(std::memcmp(mcap.data() + misalign,
                                      packed ? experts[0].packed.data() : experts[0].raw.data(),
                                      packed ? experts[0].packed.size() : experts[0].raw.size()),
                          0);
            }
        }
    }
}

// A token's result from multi() equals its own single-expert decode() call bit for bit.
TEST(ExpertKernel, MultiTokenEqualsSingleTokenCalls) {
    for (Shape s : {Shape{64, 96}, Shape{32, 96}, Shape{256, 128}}) {
        ExpertSpec spec;
        spec.hidden = s.hidden;
        spec.intermediate = s.intermediate;
        const TestExpert e = test::make_test_expert(spec);
        auto team = persistent_team(3);
        for (KernelIsa isa : available_isas()) {
            ExpertKernel kernel(isa);
            for (int T : {1, 3, 4, 5, 8, 13, 16}) {
                std::vector<std::vector<float>> xs, outs, singles;
                std::vector<const float*> xp;
                std::vector<float*> op;
                std::vector<float> ws;
                for (int t = 0; t < T; ++t) {
                    xs.push_back(test::random_vector(static_cast<size_t>(s.hidden),
                                                     100 + static_cast<std::uint64_t>(t)));
                    outs.push_back(test::random_vector(static_cast<size_t>(s.hidden),
                                                       200 + static_cast<std::uint64_t>(t)));
                    ws.push_back(0.05f * static_cast<float>(t + 1));
                }
                singles = outs;
                for (int t = 0; t < T; ++t) {
                    xp.push_back(xs[static_cast<size_t>(t)].data());
                    op.push_back(outs[static_cast<size_t>(t)].data());
                }
                for (bool packed : {false, true}) {
                    auto multi_out = outs;
                    std::vector<float*> mop;
                    for (auto& o : multi_out) mop.push_back(o.data());
                    kernel.multi(*team, e.input(packed), xp, ws, mop);
                    for (int t = 0; t < T; ++t) {
                        std::vector<float> single = singles[static_cast<size_t>(t)];
                        const ExpertInput in = e.input(packed, ws[static_cast<size_t>(t)]);
                        kernel.decode(*team, std::span<const ExpertInput>(&in, 1),
                                      xs[static_cast<size_t>(t)].data(), single.data());
                        EXPECT_TRUE(same_bits(multi_out[static_cast<size_t>(t)], single))
                            << cpu::kernel_isa_name(isa) << " T=" << T << " t=" << t
                            << " packed=" << packed;
                    }
                }
            }
        }
    }
}

// A slice of an expert's neurons (ExpertRecordView::slice), as the hybrid backend computes a
// missed expert partly on the CPU and partly on the GPU: the input of neurons [first, first +
// count), its gate_up bias moved to the slice's rows, the down bias only when `with_down_bias`.
ExpertInput slice_input(const TestExpert& e, std::int64_t first, std::int64_t count, float weight,
                        bool with_down_bias) {
    ExpertInput in = e.input(false, weight);
    in.record = in.record.slice(first, count);
    in.gate_up_bias += 4 * first;  // 2 bf16 values (gate, up) per neuron
    if (!with_down_bias) in.down_bias = nullptr;
    return in;
}

// The parts of a split expert add up to the whole expert (fp32 rounding of the sums' order),
// for every variant, at every cut; the scalar variant's slices match the SIMD ones to rounding;
// a slice in one call with whole experts of the same layer gives the same bits on any team.
TEST(ExpertKernel, SlicesOfAnExpertAddUpToTheWholeExpert) {
    for (Shape s : {Shape{64, 96}, Shape{128, 128}, Shape{2880, 2880}}) {
        ExpertSpec spec;
        spec.hidden = s.hidden;
        spec.intermediate = s.intermediate;
        const auto experts = make_experts(3, spec);
        const auto x = test::random_vector(static_cast<size_t>(s.hidden), 71);
        const auto base = test::random_vector(static_cast<size_t>(s.hidden), 72);
        auto team = persistent_team(3);
        for (KernelIsa isa : available_isas()) {
            ExpertKernel kernel(isa);
            const std::vector<ExpertInput> whole = {experts[0].input(false, 0.5f)};
            std::vector<float> want = base;
            kernel.decode(*team, whole, x.data(), want.data());
            for (std::int64_t cut = 32; cut < s.intermediate; cut += 32) {
                if (s.intermediate > 256 && cut % 480 != 0) continue;  // a few cuts at 2880
                // One call with both parts, and the parts in two calls (CPU side, GPU side).
                const std::vector<ExpertInput> parts = {
                    slice_input(experts[0], 0, cut, 0.5f, false),
                    slice_input(experts[0], cut, s.intermediate - cut, 0.5f, true)};
                std::vector<float> got = base;
                kernel.decode(*team, parts, x.data(), got.data());
                expect_close(
                    got, want, 1e-5,
                    std::string(cpu::kernel_isa_name(isa)) + " cut " + std::to_string(cut));
                std::vector<float> two = base;
                kernel.decode(*team, std::span<const ExpertInput>(&parts[0], 1), x.data(),
                              two.data());
                kernel.decode(*team, std::span<const ExpertInput>(&parts[1], 1), x.data(),
                              two.data());
                expect_close(two, want, 1e-5, "two calls");
            }
            // Whole experts and a slice of another in one call (a CPU side's misses): the same
            // bits as the experts one call each, in order, and on any team size.
            const std::int64_t cut = s.intermediate / 64 * 32;
            const std::vector<ExpertInput> mixed = {experts[1].input(false, 0.3f),
                                                    slice_input(experts[0], 0, cut, 0.5f, false),
                                                    experts[2].input(false, 0.2f)};
            std::vector<float> one = base;
            kernel.decode(*team, mixed, x.data(), one.data());
            std::vector<float> apart = base;
            for (const ExpertInput& in : mixed) {
                std::vector<float> y(static_cast<size_t>(s.hidden), 0.0f);
                kernel.decode(*team, std::span<const ExpertInput>(&in, 1), x.data(), y.data());
                for (size_t i = 0; i < y.size(); ++i) apart[i] += y[i];
            }
            expect_close(one, apart, 1e-5, "mixed call");
            for (int threads : {1, 2, 5}) {
                cpu::ReferenceTeam ref(threads);
                std::vector<float> again = base;
                kernel.decode(ref, mixed, x.data(), again.data());
                EXPECT_TRUE(same_bits(again, one)) << cpu::kernel_isa_name(isa) << " " << threads;
            }
            if (isa != KernelIsa::scalar) {
                ExpertKernel scalar(KernelIsa::scalar);
                std::vector<float> ref = base;
                scalar.decode(*team, mixed, x.data(), ref.data());
                expect_close(one, ref, 1e-5, "vs scalar");
            }
        }
    }
}

TEST(ExpertKernel, SlicesRejectBadRangesPackedRecordsAndCaptures) {
    ExpertSpec spec;
    spec.hidden = 64;
    spec.intermediate = 128;
    const TestExpert e = test::make_test_expert(spec);
    const cpu::ExpertRecordView raw = e.view(false);
    EXPECT_THROW((void)raw.slice(0, 0), Error);
    EXPECT_THROW((void)raw.slice(16, 32), Error);
    EXPECT_THROW((void)raw.slice(0, 48), Error);
    EXPECT_THROW((void)raw.slice(96, 64), Error);
    EXPECT_THROW((void)raw.slice(-32, 64), Error);
    EXPECT_THROW((void)e.view(true).slice(0, 64), Error);
    EXPECT_THROW((void)raw.slice(0, 64).slice(0, 32), Error);
    const cpu::ExpertRecordView part = raw.slice(32, 64);
    EXPECT_TRUE(part.sliced());
    EXPECT_FALSE(raw.sliced());
    EXPECT_EQ(part.intermediate(), 64);
    EXPECT_EQ(part.row_stride_blocks(Projection::kDown), 4);
    EXPECT_EQ(part.blocks_per_row(Projection::kDown), 2);
    EXPECT_EQ(part.codes(Projection::kGateUp), raw.codes(Projection::kGateUp) + 2 * 32 * 2 * 16);
    EXPECT_EQ(part.codes(Projection::kDown), raw.codes(Projection::kDown) + 16);
    EXPECT_EQ(part.scales(Projection::kDown), raw.scales(Projection::kDown) + 1);
    cpu::ReferenceTeam team(1);
    ExpertKernel kernel(KernelIsa::scalar);
    std::vector<float> x(64, 0.5f), out(64, 0.0f);
    test::AlignedBytes cap(e.raw.size());
    std::vector<ExpertInput> in = {slice_input(e, 0, 64, 1.0f, true)};
    in[0].capture = cap.data();
    EXPECT_THROW(kernel.decode(team, in, x.data(), out.data()), Error);
}

TEST(ExpertKernel, RejectsBadCalls) {
    const TestExpert e = test::make_test_expert(ExpertSpec{});
    ExpertSpec other;
    other.hidden = 96;
    const TestExpert f = test::make_test_expert(other);
    cpu::ReferenceTeam team(1);
    ExpertKernel kernel(KernelIsa::scalar);
    std::vector<float> x(96, 0.0f), out(96, 0.0f);
    const std::vector<ExpertInput> none;
    EXPECT_THROW(kernel.decode(team, none, x.data(), out.data()), Error);
    const std::vector<ExpertInput> five(5, e.input(false));
    EXPECT_THROW(kernel.decode(team, five, x.data(), out.data()), Error);
    const std::vector<ExpertInput> mixed = {e.input(false), f.input(false)};
    EXPECT_THROW(kernel.decode(team, mixed, x.data(), out.data()), Error);
    std::vector<const float*> xs(17, x.data());
    std::vector<float*> outs(17, out.data());
    std::vector<float> ws(17, 1.0f);
    EXPECT_THROW(kernel.multi(team, e.input(false), xs, ws, outs), Error);
}

// The caller's FTZ/DAZ state reaches every worker: results with flushing are bit-identical on
// any team and thread count, and differ from the results without it (so it mattered).
TEST(ExpertKernel, CallerFlushToZeroIsReproducedInWorkers) {
    ExpertSpec spec;
    spec.hidden = 256;
    spec.intermediate = 256;
    spec.gate_up_scale_lo = 1;  // 2^-126 .. 2^-121: gate/up results and activations denormal
    spec.gate_up_scale_hi = 6;
    spec.down_scale_lo = 150;  // large down weights bring them back to normal outputs
    spec.down_scale_hi = 156;
    spec.wide_rows = 0;
    spec.bias_range = 0.0f;
    spec.clamp_rows = 0;
    const auto experts = make_experts(2, spec);
    const auto x = test::random_vector(256, 71);
    const std::vector<float> base(256, 0.0f);
    for (KernelIsa isa : available_isas()) {
        cpu::ReferenceTeam one(1);
        const auto plain = run_decode(isa, one, experts, 2, false, x, base);
        const std::uint32_t saved = cpu::read_fp_control();
        const std::uint32_t ftz = saved | cpu::kFpFlushToZero | cpu::kFpDenormalsAreZero;
        cpu::write_fp_control(ftz);
        const auto flushed = run_decode(isa, one, experts, 2, false, x, base);
        cpu::write_fp_control(saved);
        EXPECT_FALSE(same_bits(plain, flushed)) << "the test data has no denormals to flush";
        for (int threads : {2, 3, 8}) {
            for (bool persistent : {false, true}) {
                // One team at a time (idle spinning teams would starve each other on a small
                // machine), started before the caller changes its state: new threads would
                // inherit it, which is not what is being tested.
                std::unique_ptr<cpu::WorkerTeam> team;
                if (persistent) {
                    team = persistent_team(threads);
                } else {
                    team = std::make_unique<cpu::ReferenceTeam>(threads);
                }
                RecordingTeam rec(*team);
                cpu::write_fp_control(ftz);
                bool same = true;
                // Until helper threads took part (a busy machine may not give them a core for
                // several milliseconds).
                const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
                for (int rep = 0; rep == 0 || (rec.helper_tasks() == 0 &&
                                               std::chrono::steady_clock::now() < deadline);
                     ++rep) {
                    same = same &&
                           same_bits(run_decode(isa, rec, experts, 2, false, x, base), flushed);
                }
                cpu::write_fp_control(saved);
                EXPECT_TRUE(same) << cpu::kernel_isa_name(isa) << " " << team->name() << " "
                                  << threads;
                EXPECT_GT(rec.helper_tasks(), 0) << team->name() << " " << threads;
            }
        }
    }
}

TEST(ExpertKernel, NeuralKernelEnvironmentVariableSelectsTheVariant) {
    const char* old = std::getenv("NEURAL_KERNEL");
    const std::string saved = old != nullptr ? old : "";
    set_env("NEURAL_KERNEL", "scalar");
    EXPECT_EQ(cpu::select_kernel_isa(), KernelIsa::scalar);
    set_env("NEURAL_KERNEL", "avx9000");
    EXPECT_THROW(cpu::select_kernel_isa(), Error);
    for (KernelIsa isa : {KernelIsa::avx2, KernelIsa::avx512}) {
        set_env("NEURAL_KERNEL", cpu::kernel_isa_name(isa));
        if (cpu::kernel_isa_available(isa)) {
            EXPECT_EQ(cpu::select_kernel_isa(), isa);
        } else {
            EXPECT_THROW(cpu::select_kernel_isa(), Error);
        }
    }
    set_env("NEURAL_KERNEL", nullptr);
    EXPECT_EQ(cpu::select_kernel_isa(), cpu::best_kernel_isa());
    if (old != nullptr) set_env("NEURAL_KERNEL", saved.c_str());
}

}  // namespace
}  // namespace neural
