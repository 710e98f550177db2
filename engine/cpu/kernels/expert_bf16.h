// The bf16 expert GEMM (docs/KERNELS.md "bf16 expert GEMM"): rows of an MXFP4 expert projection
// times activations rounded to bf16, with one arithmetic that the AMX-BF16 tiles (tdpbf16ps),
// AVX-512F and plain scalar code all compute bit for bit, so that a prompt (many tokens, AMX)
// and a token alone (AVX-512 or scalar) give the same bits.
//
// The arithmetic is the one measured on the hardware's tdpbf16ps (an Intel Xeon with AMX; not the
// SDM's pseudocode, which sums one product at a time): for every output and every 32-column
// block, two lanes start at zero, lane 0 adds the products of the even columns and lane 1 those
// of the odd ones, each in column order with one fp32 rounding per add (an fma: a bf16 x bf16
// product is exact in fp32); then the output adds lane 0 + lane 1. Round to nearest even
// throughout; bf16 inputs below 2^-126 read as zero and fp32 results below 2^-126 become zero
// (the tiles' DAZ and FTZ). Weights: E2M1 x 2^(e8m0 - 127) is exact in bf16 (those below 2^-126,
// only possible for e8m0 < 2, read as zero); activations: fp32 rounded to nearest-even bf16 by
// bf16_round_activations, the one conversion every variant uses. A NaN result is stored as the
// quiet NaN 0x7FC00000 (which NaN the operations return differs between tiles and SIMD).
//
// Lossy against the fp32 kernels (expert_kernel.h) only through the activations' rounding to
// bf16 (8 significant bits), as on the GPU's bf16 matmuls.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cpu/kernels/expert_record.h"

namespace neural::cpu {

// scalar (the reference: the arithmetic above written out with a software FTZ/DAZ), avx2 (AVX2
// fmas across 8 rows, with MXCSR's FTZ/DAZ: CPUs without AVX-512), avx512 (AVX-512F fmas across
// 16 rows, likewise), amx_bf16 (tdpbf16ps tiles) and amx_emulated (the AMX variant's code on
// tiles emulated in plain C++, amx_tiles.inl: tests on CPUs without AMX; never chosen). All give
// the same bits.
enum class Bf16ExpertIsa : std::uint8_t {
    scalar = 0,
    avx512 = 1,
    amx_bf16 = 2,
    amx_emulated = 3,
    avx2 = 4
};

// "scalar", "avx2", "avx512", "amx-bf16", "amx-emulated"
const char* bf16_expert_isa_name(Bf16ExpertIsa isa);
// This build contains the variant and this CPU (and OS) can run it.
bool bf16_expert_isa_available(Bf16ExpertIsa isa);
// amx_bf16, else avx512, else avx2, where available, else scalar.
Bf16ExpertIsa best_bf16_expert_isa();
// $NEURAL_BF16_GEMM (scalar | avx2 | avx512 | amx-bf16 | amx-emulated) when set, else
// best_bf16_expert_isa(): how tests and CI force a variant through the engine. Throws
// neural::Error for an unknown name or a variant this CPU/build cannot run.
Bf16ExpertIsa select_bf16_expert_isa();

// out[i] = x[i] rounded to the nearest bf16, ties to even (bits); NaN stays a quiet NaN of its
// sign, values past the largest bf16 become infinities, subnormal results keep their bits (the
// GEMM reads them as zero).
void bf16_round_activations(const float* x, std::int64_t n, std::uint16_t* out);

// out[i * ld + r] = row row0 + r of projection p (0 = gate_up, 1 = down) . x row i, for
// r < rows and i < n, x row i at x + i * ldx (bf16 bits, the projection's column count of
// them). row0 and rows multiples of 16 inside the projection; n >= 1. scratch: at least
// bf16_expert_scratch_bytes(cols, n) bytes, 64-byte aligned, or nullptr (then the call
// allocates). Each weight row is decoded once per call and serves all n tokens. The same as
// bf16_expert_prepare into the scratch, then bf16_expert_gemm_prepared. Throws neural::Error for
// a variant this CPU cannot run, rows outside the projection, a short x stride or a slice of a
// record.
std::size_t bf16_expert_scratch_bytes(std::int64_t cols, int n);
void bf16_expert_gemm(Bf16ExpertIsa isa, const ExpertRecordView& record, int p, std::int64_t row0,
                      std::int64_t rows, const std::uint16_t* x, std::int64_t ldx, int n,
                      float* out, std::int64_t ld, std::uint8_t* scratch = nullptr);

// The activation operand prepared once for many calls: n tokens of `cols` bf16 values laid out
// as variant `isa` reads them (AMX: the B tiles, 16 tokens x 16 column pairs per 32-column
// block; AVX-512 and AVX2: fp32 planes of the even and odd columns; scalar: the rows), so that
// the calls over an expert's row ranges share one preparation instead of each repacking all of
// its tokens. Only the layout differs from the per-call entry: the same bits.
struct Bf16PreparedOperand {
    Bf16ExpertIsa isa = Bf16ExpertIsa::scalar;
    std::int64_t cols = 0;
    int n = 0;
    const std::uint8_t* data = nullptr;  // bf16_expert_prepared_bytes(isa, cols, n) bytes
};

// Bytes of a prepared operand (a multiple of 64).
std::size_t bf16_expert_prepared_bytes(Bf16ExpertIsa isa, std::int64_t cols, int n);
// x row i at x + i * ldx (cols bf16 values, cols a positive multiple of 32) for i < n into `out`
// (bf16_expert_prepared_bytes(isa, cols, n) bytes, 64-byte aligned); returns the operand, which
// refers to `out`. Throws neural::Error for a variant this CPU cannot run, n < 1, a bad cols or
// a short stride.
Bf16PreparedOperand bf16_expert_prepare(Bf16ExpertIsa isa, std::int64_t cols,
                                        const std::uint16_t* x, std::int64_t ldx, int n,
                                        std::uint8_t* out);
// bf16_expert_gemm's result for the prepared operand's tokens, with its variant. scratch: at
// least bf16_expert_prepared_scratch_bytes(cols) bytes (the decoded weights and one C tile, not
// depending on n), 64-byte aligned, or nullptr (then the call allocates). Throws neural::Error
// as bf16_expert_gemm, and for an operand whose column count is not the projection's.
std::size_t bf16_expert_prepared_scratch_bytes(std::int64_t cols);
void bf16_expert_gemm_prepared(const ExpertRecordView& record, int p, std::int64_t row0,
                               std::int64_t rows, const Bf16PreparedOperand& x, float* out,
                               std::int64_t ld, std::uint8_t* scratch = nullptr);

}  // namespace neural::cpu
