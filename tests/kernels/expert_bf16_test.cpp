// The bf16 expert GEMM (cpu/kernels/expert_bf16.h): the activations' rounding, every variant
// (scalar reference, AVX2, AVX-512F, AMX-BF16 tiles, the AMX code on emulated tiles) bit for bit on
// random records, token counts across the register and tile sizes, raw and packed records, and
// the edge cases where the arithmetic's details show (subnormal weights and activations,
// results near 2^-126, cancellation, NaN and infinities); the prepared operand against the
// per-call entry; the reference against a double precision dot product of the decoded operands;
// bad calls.
#include "cpu/kernels/expert_bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "cpu/kernels/expert_bf16_impl.h"
#include "neural/error.h"
#include "platform/cpu_features.h"
#include "test_experts.h"

namespace neural {
namespace {

using cpu::Bf16ExpertIsa;
using test::AlignedBytes;
using test::ExpertSpec;
using test::TestExpert;

std::vector<Bf16ExpertIsa> available_isas() {
    std::vector<Bf16ExpertIsa> out;
    for (Bf16ExpertIsa isa : {Bf16ExpertIsa::avx2, Bf16ExpertIsa::avx512, Bf16ExpertIsa::amx_bf16,
                              Bf16ExpertIsa::amx_emulated}) {
        if (cpu::bf16_expert_isa_available(isa)) out.push_back(isa);
    }
    return out;
}

float from_bits(std::uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}
std::uint32_t bits_of(float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}
float bf16_value(std::uint16_t v) { return from_bits(static_cast<std::uint32_t>(v) << 16); }

std::vector<std::uint16_t> to_bf16(const std::vector<float>& x) {
    std::vector<std::uint16_t> out(x.size());
    cpu::bf16_round_activations(x.data(), static_cast<std::int64_t>(x.size()), out.data());
    return out;
}

// Every variant gives the scalar reference's bits for both projections, whole and for a range
// of rows (the scratch passed in and allocated by the call). Returns the outputs compared.
std::size_t expect_variants_equal(const TestExpert& e, const std::vector<std::uint16_t>& x, int n,
                                  const std::string& what) {
    std::size_t compared = 0;
    for (int p = 0; p < 2; ++p) {
        const Projection proj = p == 0 ? Projection::kGateUp : Projection::kDown;
        const cpu::ExpertRecordView raw = e.view(false);
        const int cols = raw.blocks_per_row(proj) * 32;
        const std::int64_t rows = raw.rows(proj);
        std::vector<float> ref(static_cast<size_t>(n * rows));
        cpu::bf16_expert_gemm(Bf16ExpertIsa::scalar, raw, p, 0, rows, x.data(), cols, n, ref.data(),
                              rows);
        for (Bf16ExpertIsa isa : available_isas()) {
            for (bool packed : {false, true}) {
                std::vector<float> got(ref.size(), -1.0f);
                cpu::bf16_expert_gemm(isa, e.view(packed), p, 0, rows, x.data(), cols, n,
                                      got.data(), rows);
                for (std::size_t i = 0; i < ref.size(); ++i) {
                    if (bits_of(got[i]) == bits_of(ref[i])) continue;
                    ADD_FAILURE() << what << ": " << cpu::bf16_expert_isa_name(isa) << " p " << p
                                  << " row " << i % static_cast<std::size_t>(rows) << " token "
                                  << i / static_cast<std::size_t>(rows) << " of " << n << " packed "
                                  << packed << " got " << got[i] << " want " << ref[i];
                    return compared;
                }
                compared += got.size();
            }
            // Ranges of 1, 2 and 3 groups of 16 rows (the AMX variant multiplies up to 4 at
            // once), into a wider output, with the caller's scratch.
            std::vector<std::uint8_t> buf(cpu::bf16_expert_scratch_bytes(cols, n) + 64);
            auto* scratch = reinterpret_cast<std::uint8_t*>(
                (reinterpret_cast<std::uintptr_t>(buf.data()) + 63) & ~std::uintptr_t{63});
            for (const auto& [first, count] : {std::pair<int, int>{16, 16}, {16, 32}, {0, 48}}) {
                if (first + count > rows) continue;
                std::vector<float> part(static_cast<size_t>(n) * 56, -1.0f);
                cpu::bf16_expert_gemm(isa, raw, p, first, count, x.data(), cols, n, part.data(), 56,
                                      scratch);
                for (int i = 0; i < n; ++i) {
                    for (int r = 0; r < count; ++r) {
                        if (bits_of(part[static_cast<size_t>(i * 56 + r)]) ==
                            bits_of(ref[static_cast<size_t>(i * rows + first + r)]))
                            continue;
                        ADD_FAILURE()
                            << what << ": " << cpu::bf16_expert_isa_name(isa) << " rows " << first
                            << ".." << first + count - 1 << ", token " << i << " row " << first + r;
                        return compared;
                    }
                }
            }
        }
    }
    return compared;
}

TEST(Bf16Expert, PrintsTheVariantsThisMachineRuns) {
    std::string ran = "scalar";
    for (Bf16ExpertIsa isa : available_isas())
        ran += std::string(", ") + cpu::bf16_expert_isa_name(isa);
    std::printf("bf16 expert GEMM variants compared here: %s\n", ran.c_str());
    EXPECT_TRUE(cpu::bf16_expert_isa_available(Bf16ExpertIsa::scalar));
    EXPECT_TRUE(cpu::bf16_expert_isa_available(Bf16ExpertIsa::amx_emulated));
    EXPECT_TRUE(cpu::bf16_expert_isa_available(cpu::best_bf16_expert_isa()));
}

TEST(Bf16Expert, RoundsActivationsToNearestEvenBf16) {
    const float tie_down = from_bits(0x3F808000u);  // 1 + 2^-8: halfway, even is 1
    const float tie_up = from_bits(0x3F818000u);    // halfway between 0x3F81 and 0x3F82
    const float above = from_bits(0x3F808001u);
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> x = {1.0f,
                                  -2.5f,
                                  tie_down,
                                  tie_up,
                                  above,
                                  from_bits(0x7F7FFFFFu),  // the largest float: past bf16's
                                  inf,
                                  -inf,
                                  std::numeric_limits<float>::quiet_NaN(),
                                  from_bits(0xFF800001u),  // a signalling NaN, negative
                                  from_bits(0x00010000u),  // subnormal: kept (read as zero)
                                  -0.0f};
    const std::vector<std::uint16_t> want = {0x3F80, 0xC020, 0x3F80, 0x3F82, 0x3F81, 0x7F80,
                                             0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x0001, 0x8000};
    EXPECT_EQ(to_bf16(x), want);
    // Random values: the nearest bf16 (ties to even) by exhaustive comparison of the neighbours.
    std::mt19937 rng(3);
    std::uniform_int_distribution<std::uint32_t> any(0, 0x7F7FFFFFu);
    for (int i = 0; i < 20000; ++i) {
        const float v = from_bits(any(rng) | (i & 1 ? 0x80000000u : 0u));
        const std::uint16_t b = to_bf16({v})[0];
        const std::uint16_t lo = static_cast<std::uint16_t>(bits_of(v) >> 16);
        const double dlo = std::abs(double(v) - double(bf16_value(lo)));
        const double dhi =
            std::abs(double(v) - double(bf16_value(static_cast<std::uint16_t>(lo + 1))));
        const std::uint16_t nearest =
            dlo < dhi ? lo
                      : (dhi < dlo ? static_cast<std::uint16_t>(lo + 1)
                                   : ((lo & 1) ? static_cast<std::uint16_t>(lo + 1) : lo));
        ASSERT_EQ(b, nearest) << v;
    }
}

// Random records and activations: every variant the scalar bits, 1..33 tokens (the AVX-512
// variant's fused one- and two-token path, its 8-token groups and every tail, one and more AMX
// tiles, a partial last tile).
TEST(Bf16Expert, VariantsGiveTheScalarBitsOnRandomData) {
    ExpertSpec spec;
    spec.hidden = 128;
    spec.intermediate = 96;
    const TestExpert e = make_test_expert(spec);
    for (int n : {1, 2, 3, 4, 5, 7, 14, 16, 17, 33}) {
        const std::vector<float> x =
            test::random_vector(static_cast<size_t>(n) * 128, 40 + static_cast<unsigned>(n));
        EXPECT_GT(expect_variants_equal(e, to_bf16(x), n, "random n " + std::to_string(n)), 0u);
    }
}

// The gpt-oss shape's column count (2880 = 90 blocks: long sums where every rounding counts).
TEST(Bf16Expert, VariantsGiveTheScalarBitsAtTheModelWidth) {
    ExpertSpec spec;
    spec.hidden = 2880;
    spec.intermediate = 64;
    spec.seed = 9;
    const TestExpert e = make_test_expert(spec);
    const int n = 19;
    const std::vector<float> x = test::random_vector(static_cast<size_t>(n) * 2880, 77);
    expect_variants_equal(e, to_bf16(x), n, "width 2880");
}

// Where the details of the arithmetic show: weights with tiny scales (some below 2^-126, read
// as zero), activations near 2^-126 and subnormal ones (products and lane sums in the flushed
// range), huge activations against each other (cancellation, absorption), infinities and NaN.
TEST(Bf16Expert, VariantsGiveTheScalarBitsAtTheEdges) {
    ExpertSpec spec;
    spec.hidden = 96;
    spec.intermediate = 64;
    spec.gate_up_scale_lo = 0;
    spec.gate_up_scale_hi = 6;  // weights down to 2^-128: subnormal or barely normal
    spec.down_scale_lo = 60;
    spec.down_scale_hi = 70;  // 2^-67..2^-57: products of activations ~2^-63 land near 2^-126
    spec.seed = 5;
    const TestExpert e = make_test_expert(spec);
    std::mt19937 rng(17);
    std::uniform_real_distribution<float> mant(1.0f, 2.0f);
    const int cols = 96;
    for (int kind = 0; kind < 8; ++kind) {
        const int n = kind < 4 ? 21 : 1 + kind % 2;  // the AVX-512 variant's fused decode path too
        std::vector<float> x(static_cast<size_t>(n) * cols);
        for (std::size_t i = 0; i < x.size(); ++i) {
            const float sign = (rng() & 1) ? -1.0f : 1.0f;
            int exponent = 0;
            switch (kind % 4) {
                case 0:  // near the smallest normals, some subnormal
                    exponent = -130 + static_cast<int>(rng() % 12);
                    break;
                case 1:  // ~2^-63: against the down weights, products near 2^-126
                    exponent = -66 + static_cast<int>(rng() % 6);
                    break;
                case 2:  // wide range: cancellation and absorption
                    exponent = -20 + static_cast<int>(rng() % 60);
                    break;
                default:  // ordinary values with a few infinities and NaNs
                    exponent = static_cast<int>(rng() % 4) - 2;
                    break;
            }
            x[i] = sign * std::ldexp(mant(rng), exponent);
            if (kind % 4 == 3 && rng() % 97 == 0)
                x[i] = rng() % 2 ? std::numeric_limits<float>::infinity()
                                 : std::numeric_limits<float>::quiet_NaN();
        }
        expect_variants_equal(e, to_bf16(x), n, "edge kind " + std::to_string(kind));
    }
}

// An operand prepared once serves calls over any row ranges of its projection with the
// per-call entry's bits, for every variant: token counts around the register and tile sizes
// (one token, a tile less one, a tile, a tile and one, two tiles and one), the activations at a
// stride wider than the columns, raw and packed records, scratch passed in and allocated, the
// operand untouched by the calls.
TEST(Bf16Expert, PreparedOperandGivesThePerCallBits) {
    ExpertSpec spec;
    spec.hidden = 128;
    spec.intermediate = 96;
    spec.seed = 21;
    const TestExpert e = make_test_expert(spec);
    std::vector<Bf16ExpertIsa> isas = {Bf16ExpertIsa::scalar};
    for (Bf16ExpertIsa isa : available_isas()) isas.push_back(isa);
    std::size_t compared = 0;
    for (int n : {1, 2, 3, 15, 16, 17, 33}) {
        for (int p = 0; p < 2; ++p) {
            const Projection proj = p == 0 ? Projection::kGateUp : Projection::kDown;
            const int cols = e.view(false).blocks_per_row(proj) * 32;
            const std::int64_t rows = e.view(false).rows(proj);
            const int ldx = cols + 32;
            std::vector<float> xf = test::random_vector(static_cast<size_t>(n) * ldx,
                                                        100 + static_cast<unsigned>(n * 2 + p));
            const std::vector<std::uint16_t> x = to_bf16(xf);
            // The per-call reference for all rows.
            std::vector<float> ref(static_cast<size_t>(n * rows));
            cpu::bf16_expert_gemm(Bf16ExpertIsa::scalar, e.view(false), p, 0, rows, x.data(), ldx,
                                  n, ref.data(), rows);
            for (Bf16ExpertIsa isa : isas) {
                const std::size_t bytes = cpu::bf16_expert_prepared_bytes(isa, cols, n);
                ASSERT_EQ(bytes % 64, 0u);
                AlignedBytes prepared(bytes);
                const cpu::Bf16PreparedOperand op =
                    cpu::bf16_expert_prepare(isa, cols, x.data(), ldx, n, prepared.data());
                EXPECT_EQ(op.isa, isa);
                EXPECT_EQ(op.cols, cols);
                EXPECT_EQ(op.n, n);
                const std::vector<std::uint8_t> before(prepared.data(), prepared.data() + bytes);
                AlignedBytes scratch(cpu::bf16_expert_prepared_scratch_bytes(cols));
                const std::vector<std::pair<std::int64_t, std::int64_t>> ranges = {
                    {0, rows}, {16, 16}, {32, 48}, {rows - 64, 64}, {rows - 16, 16}};
                for (const auto& [first, count] : ranges) {
                    for (bool packed : {false, true}) {
                        const std::int64_t ld = count + 8;
                        std::vector<float> got(static_cast<size_t>(n * ld), -1.0f);
                        std::vector<float> per_call(got.size(), -2.0f);
                        cpu::bf16_expert_gemm_prepared(e.view(packed), p, first, count, op,
                                                       got.data(), ld,
                                                       packed ? nullptr : scratch.data());
                        cpu::bf16_expert_gemm(isa, e.view(packed), p, first, count, x.data(), ldx,
                                              n, per_call.data(), ld);
                        for (int i = 0; i < n; ++i) {
                            for (std::int64_t r = 0; r < count; ++r) {
                                const auto at = static_cast<size_t>(i * ld + r);
                                const float want = ref[static_cast<size_t>(i * rows + first + r)];
                                if (bits_of(got[at]) == bits_of(want) &&
                                    bits_of(per_call[at]) == bits_of(want))
                                    continue;
                                ADD_FAILURE()
                                    << cpu::bf16_expert_isa_name(isa) << " n " << n << " p " << p
                                    << " rows " << first << ".." << first + count - 1 << " packed "
                                    << packed << " token " << i << " row " << first + r
                                    << ": prepared " << got[at] << " per call " << per_call[at]
                                    << " want " << want;
                                return;
                            }
                            // Past the range: untouched.
                            for (std::int64_t r = count; r < ld; ++r)
                                ASSERT_EQ(got[static_cast<size_t>(i * ld + r)], -1.0f);
                        }
                        compared += static_cast<std::size_t>(n * count);
                    }
                }
                EXPECT_EQ(std::memcmp(before.data(), prepared.data(), bytes), 0)
                    << cpu::bf16_expert_isa_name(isa) << ": the calls changed the operand";
            }
        }
    }
    EXPECT_GT(compared, 0u);
}

// The amx-bf16 variant packs its B tiles with AVX-512 (a register transpose; no tile
// instruction), so that packing runs on any CPU with the AVX-512 set the AMX file is compiled
// for (AVX512_BF16 included), AMX or not: the same bytes as the
// emulated variant's scalar packing, padding included, for token counts around the tile size
// and the activations at a stride wider than the columns.
TEST(Bf16Expert, AmxTilePackingGivesTheScalarPackingsBytes) {
    const cpu::bf16_detail::Variant amx = cpu::bf16_detail::variant_amx();
    if (amx.prepare == nullptr || !cpu_features().has_avx512_bf16())
        GTEST_SKIP() << "no AMX-BF16 variant in this build, or no AVX512_BF16 on this CPU";
    const cpu::bf16_detail::Variant emulated = cpu::bf16_detail::variant_amx_emulated();
    for (int G : {1, 3, 90}) {
        for (int n : {1, 2, 15, 16, 17, 33}) {
            const int cols = 32 * G, ldx = cols + 32;
            const std::vector<std::uint16_t> x = to_bf16(test::random_vector(
                static_cast<size_t>(n) * ldx, 300 + static_cast<unsigned>(G * 40 + n)));
            const std::size_t bytes =
                cpu::bf16_expert_prepared_bytes(Bf16ExpertIsa::amx_emulated, cols, n);
            AlignedBytes want(bytes), got(bytes);
            std::memset(want.data(), 0xAB, bytes);  // every byte must be written
            std::memset(got.data(), 0xCD, bytes);
            emulated.prepare({x.data(), ldx, n, G, want.data()});
            amx.prepare({x.data(), ldx, n, G, got.data()});
            EXPECT_EQ(std::memcmp(want.data(), got.data(), bytes), 0) << "G " << G << " n " << n;
        }
    }
}

TEST(Bf16Expert, PreparedOperandRejectsBadCalls) {
    ExpertSpec spec;
    spec.hidden = 64;
    spec.intermediate = 32;
    const TestExpert e = make_test_expert(spec);
    std::vector<std::uint16_t> x(64 * 2);
    const Bf16ExpertIsa isa = Bf16ExpertIsa::scalar;
    AlignedBytes buf(cpu::bf16_expert_prepared_bytes(isa, 64, 2));
    EXPECT_THROW(cpu::bf16_expert_prepare(isa, 64, x.data(), 32, 2, buf.data()), Error);
    EXPECT_THROW(cpu::bf16_expert_prepare(isa, 48, x.data(), 64, 2, buf.data()), Error);
    EXPECT_THROW(cpu::bf16_expert_prepare(isa, 64, x.data(), 64, 0, buf.data()), Error);
    const cpu::Bf16PreparedOperand op =
        cpu::bf16_expert_prepare(isa, 64, x.data(), 64, 2, buf.data());
    std::vector<float> out(2 * 32);
    EXPECT_NO_THROW(cpu::bf16_expert_gemm_prepared(e.view(false), 0, 0, 32, op, out.data(), 32));
    // gate_up takes H = 64 columns, down I = 32: the operand is not down's.
    EXPECT_THROW(cpu::bf16_expert_gemm_prepared(e.view(false), 1, 0, 32, op, out.data(), 32),
                 Error);
    EXPECT_THROW(cpu::bf16_expert_gemm_prepared(e.view(false), 0, 8, 16, op, out.data(), 32),
                 Error);
    EXPECT_THROW(cpu::bf16_expert_gemm_prepared(e.view(false), 0, 0, 32, op, out.data(), 16),
                 Error);
    cpu::Bf16PreparedOperand empty = op;
    empty.data = nullptr;
    EXPECT_THROW(cpu::bf16_expert_gemm_prepared(e.view(false), 0, 0, 32, empty, out.data(), 32),
                 Error);
}

// The reference is the dot product it claims: within fp32 rounding of the double precision dot
// of the decoded weights and the bf16 activations (which checks the operand order and layout).
TEST(Bf16Expert, ReferenceIsTheDotOfTheDecodedOperands) {
    ExpertSpec spec;
    spec.hidden = 128;
    spec.intermediate = 96;
    const TestExpert e = make_test_expert(spec);
    const int n = 5;
    const std::vector<float> xf = test::random_vector(static_cast<size_t>(n) * 128, 8);
    const std::vector<std::uint16_t> x = to_bf16(xf);
    for (std::int64_t row0 : {std::int64_t{0}, std::int64_t{176}}) {
        std::vector<float> out(static_cast<size_t>(n) * 16);
        cpu::bf16_expert_gemm(Bf16ExpertIsa::scalar, e.view(false), 0, row0, 16, x.data(), 128, n,
                              out.data(), 16);
        for (int r = 0; r < 16; ++r) {
            const std::vector<float> w = test::decode_raw_row(e, Projection::kGateUp, row0 + r);
            for (int i = 0; i < n; ++i) {
                double dot = 0, mag = 0;
                for (int k = 0; k < 128; ++k) {
                    const double p = double(w[static_cast<size_t>(k)]) *
                                     double(bf16_value(x[static_cast<size_t>(i * 128 + k)]));
                    dot += p;
                    mag += std::abs(p);
                }
                EXPECT_NEAR(out[static_cast<size_t>(i * 16 + r)], dot, 1e-6 * mag + 1e-30)
                    << "row " << row0 + r << " token " << i;
            }
        }
    }
}

TEST(Bf16Expert, RejectsBadCalls) {
    ExpertSpec spec;
    spec.hidden = 64;
    spec.intermediate = 32;
    const TestExpert e = make_test_expert(spec);
    std::vector<std::uint16_t> x(64 * 2);
    std::vector<float> out(32);
    const auto call = [&](int p, std::int64_t row0, std::int64_t rows, std::int64_t ldx, int n) {
        cpu::bf16_expert_gemm(Bf16ExpertIsa::scalar, e.view(false), p, row0, rows, x.data(), ldx, n,
                              out.data(), 16);
    };
    EXPECT_NO_THROW(call(0, 48, 16, 64, 2));
    EXPECT_THROW(call(0, 64, 16, 64, 2), Error);  // past the 64 gate_up rows
    EXPECT_THROW(call(0, 48, 32, 64, 2), Error);  // the same
    EXPECT_THROW(call(0, 8, 16, 64, 2), Error);   // not a multiple of 16
    EXPECT_THROW(call(0, 0, 8, 64, 2), Error);    // nor is the count
    EXPECT_THROW(call(0, 0, 32, 64, 1), Error);   // 32 rows into an output 16 wide
    EXPECT_THROW(call(2, 0, 16, 64, 2), Error);   // no third projection
    EXPECT_THROW(call(0, 0, 16, 32, 2), Error);   // activation rows shorter than the columns
    EXPECT_THROW(call(0, 0, 16, 64, 0), Error);   // no tokens
}

}  // namespace
}  // namespace neural
