// The bf16 expert GEMM's dispatcher, the activations' rounding and the scalar reference
// (expert_bf16.h): the arithmetic written out one output at a time, read straight from the
// record, with the tiles' FTZ/DAZ in software, so that it holds on any CPU and compiler mode.
#include "cpu/kernels/expert_bf16.h"

#include <math.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "cpu/kernels/exact_fma.h"
#include "cpu/kernels/expert_bf16_impl.h"
#include "neural/error.h"
#include "platform/cpu_features.h"

namespace neural::cpu {

using bf16_detail::Gemm;
using bf16_detail::Prepare;
using bf16_detail::Variant;

namespace {

void gemm_scalar(const Gemm& g) {
    const kernel_detail::RecordRef& rec = g.rec;
    const int G = rec.blocks[g.p];
    const std::uint64_t stride = static_cast<std::uint64_t>(G) * 16;
    std::uint8_t sbuf[bf16_detail::kMaxBlocks + 32];
    for (std::int64_t r = 0; r < g.rows; ++r) {
        const std::int64_t row = g.row0 + r;
        const std::uint8_t* codes = rec.code_base[g.p] + static_cast<std::uint64_t>(row) * stride;
        const std::uint8_t* scales = kernel_detail::record_row_scales(rec, g.p, row, sbuf);
        for (int i = 0; i < g.n; ++i) {
            const std::uint16_t* x = reinterpret_cast<const std::uint16_t*>(g.x) + i * 32 * G;
            float acc = 0.0f;
            for (int b = 0; b < G; ++b) {
                float lane[2] = {0.0f, 0.0f};
                for (int k = 0; k < 32; ++k) {
                    const std::uint8_t byte = codes[16 * b + k / 2];
                    const int code = (k & 1) ? (byte >> 4) : (byte & 0x0F);
                    const float w = daz_bf16(bf16_detail::weight_bits(code, scales[b]));
                    lane[k & 1] = ftz(exact_fmaf(w, daz_bf16(x[32 * b + k]), lane[k & 1]));
                }
                acc = ftz(acc + ftz(lane[0] + lane[1]));
            }
            g.out[i * g.ld + r] = std::isnan(acc) ? bf16_detail::canonical_nan() : acc;
        }
    }
}

// The scalar layout: the rows, 32G values apart.
void prepare_scalar(const Prepare& p) {
    const auto bytes = static_cast<std::size_t>(p.G) * 32 * sizeof(std::uint16_t);
    for (int i = 0; i < p.n; ++i)
        std::memcpy(p.out + static_cast<std::size_t>(i) * bytes, p.x + i * p.ldx, bytes);
}

Variant variant_for(Bf16ExpertIsa isa) {
    switch (isa) {
        case Bf16ExpertIsa::scalar:
            return {&gemm_scalar, &prepare_scalar};
        case Bf16ExpertIsa::avx2:
            return bf16_detail::variant_avx2();
        case Bf16ExpertIsa::avx512:
            return bf16_detail::variant_avx512();
        case Bf16ExpertIsa::amx_bf16:
            return bf16_detail::variant_amx();
        case Bf16ExpertIsa::amx_emulated:
            return bf16_detail::variant_amx_emulated();
    }
    return {};
}

void require_available(Bf16ExpertIsa isa) {
    if (!bf16_expert_isa_available(isa))
        fail("bf16 expert GEMM: the {} variant is not available on this CPU/build ({})",
             bf16_expert_isa_name(isa), cpu_features().summary());
}

// The checks both entries share; returns the projection's blocks per row.
int check_call(const ExpertRecordView& record, int p, std::int64_t row0, std::int64_t rows,
               std::int64_t ld) {
    if (record.sliced()) fail("bf16 expert GEMM: a slice of a record is for decode only");
    if (p != 0 && p != 1) fail("bf16 expert GEMM: projection {}", p);
    const Projection proj = p == 0 ? Projection::kGateUp : Projection::kDown;
    if (row0 < 0 || rows < bf16_detail::kRows || row0 + rows > record.rows(proj) ||
        row0 % bf16_detail::kRows != 0 || rows % bf16_detail::kRows != 0)
        fail("bf16 expert GEMM: rows {}..{} of {}", row0, row0 + rows - 1, record.rows(proj));
    if (ld < rows) fail("bf16 expert GEMM: {} rows into an output {} wide", rows, ld);
    return record.blocks_per_row(proj);
}

std::size_t weight_bytes(std::int64_t cols) {
    return static_cast<std::size_t>(cols / 32) * bf16_detail::kTileBytes * 4;
}

// The GEMM on a checked call: scratch = the decoded weights, then the C tile.
void run_prepared(Variant v, const ExpertRecordView& record, int p, std::int64_t row0,
                  std::int64_t rows, const std::uint8_t* x, int n, float* out, std::int64_t ld,
                  std::uint8_t* scratch) {
    Gemm g{};
    g.rec = kernel_detail::make_record_ref(record);
    g.p = p;
    g.row0 = row0;
    g.rows = rows;
    g.x = x;
    g.n = n;
    g.out = out;
    g.ld = ld;
    g.weights = scratch;
    g.c = reinterpret_cast<float*>(scratch + weight_bytes(std::int64_t{g.rec.blocks[p]} * 32));
    v.gemm(g);  // no throw past the checks
}

}  // namespace

// Variants this build lacks.
#if !defined(NEURAL_KERNELS_X86)
Variant bf16_detail::variant_avx2() { return {}; }
Variant bf16_detail::variant_avx512() { return {}; }
#endif
#if !defined(NEURAL_KERNELS_AMX_BF16)
Variant bf16_detail::variant_amx() { return {}; }
#endif

const char* bf16_expert_isa_name(Bf16ExpertIsa isa) {
    switch (isa) {
        case Bf16ExpertIsa::scalar:
            return "scalar";
        case Bf16ExpertIsa::avx2:
            return "avx2";
        case Bf16ExpertIsa::avx512:
            return "avx512";
        case Bf16ExpertIsa::amx_bf16:
            return "amx-bf16";
        case Bf16ExpertIsa::amx_emulated:
            return "amx-emulated";
    }
    return "?";
}

bool bf16_expert_isa_available(Bf16ExpertIsa isa) {
    if (variant_for(isa).gemm == nullptr) return false;
    switch (isa) {
        case Bf16ExpertIsa::scalar:
        case Bf16ExpertIsa::amx_emulated:
            return true;
        case Bf16ExpertIsa::avx2:
            return cpu_features().has_avx2_fma();
        case Bf16ExpertIsa::avx512:
            return cpu_features().has_avx512();
        case Bf16ExpertIsa::amx_bf16:
            return cpu_features().has_amx_bf16();
    }
    return false;
}

Bf16ExpertIsa best_bf16_expert_isa() {
    if (bf16_expert_isa_available(Bf16ExpertIsa::amx_bf16)) return Bf16ExpertIsa::amx_bf16;
    if (bf16_expert_isa_available(Bf16ExpertIsa::avx512)) return Bf16ExpertIsa::avx512;
    return bf16_expert_isa_available(Bf16ExpertIsa::avx2) ? Bf16ExpertIsa::avx2
                                                          : Bf16ExpertIsa::scalar;
}

Bf16ExpertIsa select_bf16_expert_isa() {
    const char* env = std::getenv("NEURAL_BF16_GEMM");
    if (env == nullptr || *env == '\0') return best_bf16_expert_isa();
    const std::string name(env);
    for (Bf16ExpertIsa isa : {Bf16ExpertIsa::scalar, Bf16ExpertIsa::avx2, Bf16ExpertIsa::avx512,
                              Bf16ExpertIsa::amx_bf16, Bf16ExpertIsa::amx_emulated}) {
        if (name != bf16_expert_isa_name(isa)) continue;
        if (!bf16_expert_isa_available(isa))
            fail("NEURAL_BF16_GEMM={}: this CPU/build cannot run it ({})", name,
                 cpu_features().summary());
        return isa;
    }
    fail("NEURAL_BF16_GEMM={}: unknown variant (scalar, avx2, avx512, amx-bf16, amx-emulated)",
         name);
}

void bf16_round_activations(const float* x, std::int64_t n, std::uint16_t* out) {
    for (std::int64_t i = 0; i < n; ++i) {
        std::uint32_t bits;
        std::memcpy(&bits, x + i, 4);
        if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {  // NaN: quiet, sign kept
            out[i] = static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
            continue;
        }
        // Ties to even: add 0x7FFF plus the lowest kept bit; a carry into the exponent is the
        // correct rounding (up to infinity past the largest bf16).
        bits += 0x7FFFu + ((bits >> 16) & 1u);
        out[i] = static_cast<std::uint16_t>(bits >> 16);
    }
}

std::size_t bf16_expert_scratch_bytes(std::int64_t cols, int n) {
    // Decoded weights of up to 4 groups of 16 rows and one C tile (the prepared scratch), then
    // the prepared activations: at most 2 x ceil(n / 16) x (cols / 32) x kTileBytes bytes (the
    // fp32 planes; the AMX layout takes half of it, the scalar one a quarter).
    const auto block_bytes = static_cast<std::size_t>(cols / 32) * bf16_detail::kTileBytes;
    return block_bytes * (4 + 2 * static_cast<std::size_t>((n + 15) / 16)) + 256 * sizeof(float);
}

void bf16_expert_gemm(Bf16ExpertIsa isa, const ExpertRecordView& record, int p, std::int64_t row0,
                      std::int64_t rows, const std::uint16_t* x, std::int64_t ldx, int n,
                      float* out, std::int64_t ld, std::uint8_t* scratch) {
    require_available(isa);
    const int G = check_call(record, p, row0, rows, ld);
    if (n < 1 || ldx < std::int64_t{G} * 32)
        fail("bf16 expert GEMM: {} rows of activations, {} apart, for {} columns", n, ldx, G * 32);
    const std::int64_t cols = std::int64_t{G} * 32;
    const std::size_t bytes = bf16_expert_scratch_bytes(cols, n);
    void* owned = nullptr;
    if (scratch == nullptr) {
        owned = ::operator new (bytes, std::align_val_t{64});
        scratch = static_cast<std::uint8_t*>(owned);
    }
    const Variant v = variant_for(isa);
    std::uint8_t* prepared = scratch + bf16_expert_prepared_scratch_bytes(cols);
    v.prepare(Prepare{x, ldx, n, G, prepared});
    run_prepared(v, record, p, row0, rows, prepared, n, out, ld, scratch);
    if (owned != nullptr) ::operator delete (owned, std::align_val_t{64});
}

std::size_t bf16_expert_prepared_bytes(Bf16ExpertIsa isa, std::int64_t cols, int n) {
    const auto N = static_cast<std::size_t>(n < 0 ? 0 : n);
    const auto C = static_cast<std::size_t>(cols < 0 ? 0 : cols);
    switch (isa) {
        case Bf16ExpertIsa::amx_bf16:
        case Bf16ExpertIsa::amx_emulated:  // tiles of 16 tokens x 32 columns
            return (N + 15) / 16 * (C / 32) * bf16_detail::kTileBytes;
        case Bf16ExpertIsa::avx512:
        case Bf16ExpertIsa::avx2:  // fp32
            return (N * C * sizeof(float) + 63) / 64 * 64;
        case Bf16ExpertIsa::scalar:
            break;
    }
    return (N * C * sizeof(std::uint16_t) + 63) / 64 * 64;
}

Bf16PreparedOperand bf16_expert_prepare(Bf16ExpertIsa isa, std::int64_t cols,
                                        const std::uint16_t* x, std::int64_t ldx, int n,
                                        std::uint8_t* out) {
    require_available(isa);
    if (cols < 32 || cols % 32 != 0 || n < 1 || ldx < cols)
        fail("bf16 expert GEMM: {} rows of activations, {} apart, for {} columns", n, ldx, cols);
    variant_for(isa).prepare(Prepare{x, ldx, n, static_cast<int>(cols / 32), out});
    return Bf16PreparedOperand{isa, cols, n, out};
}

std::size_t bf16_expert_prepared_scratch_bytes(std::int64_t cols) {
    return weight_bytes(cols) + 256 * sizeof(float);
}

void bf16_expert_gemm_prepared(const ExpertRecordView& record, int p, std::int64_t row0,
                               std::int64_t rows, const Bf16PreparedOperand& x, float* out,
                               std::int64_t ld, std::uint8_t* scratch) {
    require_available(x.isa);
    const int G = check_call(record, p, row0, rows, ld);
    if (x.data == nullptr || x.n < 1 || x.cols != std::int64_t{G} * 32)
        fail("bf16 expert GEMM: a prepared operand of {} tokens x {} columns for {} columns", x.n,
             x.cols, G * 32);
    const std::size_t bytes = bf16_expert_prepared_scratch_bytes(x.cols);
    void* owned = nullptr;
    if (scratch == nullptr) {
        owned = ::operator new (bytes, std::align_val_t{64});
        scratch = static_cast<std::uint8_t*>(owned);
    }
    run_prepared(variant_for(x.isa), record, p, row0, rows, x.data, x.n, out, ld, scratch);
    if (owned != nullptr) ::operator delete (owned, std::align_val_t{64});
}

}  // namespace neural::cpu
