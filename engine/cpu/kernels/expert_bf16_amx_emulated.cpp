// The bf16 expert GEMM's AMX code (expert_bf16_amx.inl) on tiles emulated in plain C++
// (amx_tiles.inl), so that CPUs without AMX test its layout, strides and arithmetic against the
// scalar reference. Baseline code; never chosen by the runtime (expert_bf16.h "amx-emulated").
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cpu/kernels/expert_bf16_impl.h"

#define NEURAL_AMX_EMULATED 1

namespace neural::cpu::bf16_detail {
namespace {

#include "cpu/kernels/amx_tiles.inl"
#define DECODE_ROWS(rec, p, row0, out) decode_rows_scalar(rec, p, row0, out)
#define PACK_TOKENS(x, ldx, n, i0, G, out) pack_activations(x, ldx, n, i0, G, out)
#include "cpu/kernels/expert_bf16_amx.inl"

}  // namespace

Variant variant_amx_emulated() { return {&gemm_amx_tiles, &prepare_amx}; }

}  // namespace neural::cpu::bf16_detail
