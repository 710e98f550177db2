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
using bf16_detail::GemmFn;

namespace {

// FTZ: a result below 2^-126 in magnitude becomes zero of its sign.
float ftz(float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v; }

// DAZ: bf16 bits to fp32, subnormals as zero of their sign.
float daz_bf16(std::uint16_t v) {
    if ((v & 0x7F80u) == 0) v &= 0x8000u;
    const std::uint32_t bits = static_cast<std::uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

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
            const std::uint16_t* x = g.x + i * g.ldx;
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

GemmFn gemm_for(Bf16ExpertIsa isa) {
    switch (isa) {
        case Bf16ExpertIsa::scalar:
            return &gemm_scalar;
        case Bf16ExpertIsa::avx2:
            return bf16_detail::gemm_avx2();
        case Bf16ExpertIsa::avx512:
            return bf16_detail::gemm_avx512();
        case Bf16ExpertIsa::amx_bf16:
            return bf16_detail::gemm_amx();
        case Bf16ExpertIsa::amx_emulated:
            return bf16_detail::gemm_amx_emulated();
    }
    return nullptr;
}

}  // namespace

// Variants this build lacks.
#if !defined(NEURAL_KERNELS_X86)
GemmFn bf16_detail::gemm_avx2() { return nullptr; }
GemmFn bf16_detail::gemm_avx512() { return nullptr; }
#endif
#if !defined(NEURAL_KERNELS_AMX_BF16)
GemmFn bf16_detail::gemm_amx() { return nullptr; }
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
    if (gemm_for(isa) == nullptr) return false;
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
    // Decoded weights of up to 4 groups of 16 rows; the packed activations (AMX) or their fp32
    // planes (AVX-512: twice the bytes); one C tile.
    const auto block_bytes = static_cast<std::size_t>(cols / 32) * bf16_detail::kTileBytes;
    return block_bytes * (4 + 2 * static_cast<std::size_t>((n + 15) / 16)) + 256 * sizeof(float);
}

void bf16_expert_gemm(Bf16ExpertIsa isa, const ExpertRecordView& record, int p, std::int64_t row0,
                      std::int64_t rows, const std::uint16_t* x, std::int64_t ldx, int n,
                      float* out, std::int64_t ld, std::uint8_t* scratch) {
    if (!bf16_expert_isa_available(isa))
        fail("bf16 expert GEMM: the {} variant is not available on this CPU/build ({})",
             bf16_expert_isa_name(isa), cpu_features().summary());
    if (record.sliced()) fail("bf16 expert GEMM: a slice of a record is for decode only");
    if (p != 0 && p != 1) fail("bf16 expert GEMM: projection {}", p);
    const Projection proj = p == 0 ? Projection::kGateUp : Projection::kDown;
    if (row0 < 0 || rows < bf16_detail::kRows || row0 + rows > record.rows(proj) ||
        row0 % bf16_detail::kRows != 0 || rows % bf16_detail::kRows != 0)
        fail("bf16 expert GEMM: rows {}..{} of {}", row0, row0 + rows - 1, record.rows(proj));
    const int G = record.blocks_per_row(proj);
    if (n < 1 || ldx < std::int64_t{G} * 32 || ld < rows)
        fail("bf16 expert GEMM: {} rows of activations, {} apart, for {} columns", n, ldx, G * 32);
    const std::size_t bytes = bf16_expert_scratch_bytes(std::int64_t{G} * 32, n);
    void* owned = nullptr;
    if (scratch == nullptr) {
        owned = ::operator new (bytes, std::align_val_t{64});
        scratch = static_cast<std::uint8_t*>(owned);
    }
    Gemm g{};
    g.rec = kernel_detail::make_record_ref(record);
    g.p = p;
    g.row0 = row0;
    g.rows = rows;
    g.x = x;
    g.ldx = ldx;
    g.n = n;
    g.out = out;
    g.ld = ld;
    const auto block_bytes = static_cast<std::size_t>(G) * bf16_detail::kTileBytes;
    g.weights = scratch;
    g.packed = scratch + 4 * block_bytes;
    g.c = reinterpret_cast<float*>(scratch + bytes - 256 * sizeof(float));
    gemm_for(isa)(g);  // no throw past the checks above
    if (owned != nullptr) ::operator delete (owned, std::align_val_t{64});
}

}  // namespace neural::cpu
