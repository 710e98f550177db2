// The bf16 expert GEMM on AMX-BF16 tiles (expert_bf16_amx.inl; weights decoded and activations
// packed with AVX-512: expert_bf16_decode.inl). Compiled with -mamx-tile -mamx-bf16 on top of
// the AVX-512 flags; only called after cpu_features() reported AMX-BF16, the OS's tile state
// and, on Linux, this process's permission for it. The tiles ignore MXCSR; the decoding runs at
// kDecodeCsr and the caller's MXCSR is restored.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu/kernels/expert_bf16_impl.h"

namespace neural::cpu::bf16_detail {
namespace {

#include "cpu/kernels/amx_tiles.inl"
#include "cpu/kernels/expert_bf16_decode.inl"
#define DECODE_ROWS(rec, p, row0, out) decode_rows_avx512(rec, p, row0, out)
#define PACK_TOKENS(x, ldx, n, i0, G, out) pack_activations_avx512(x, ldx, n, i0, G, out)
#include "cpu/kernels/expert_bf16_amx.inl"

void gemm(const Gemm& g) {
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(kDecodeCsr);
    gemm_amx_tiles(g);
    _mm_setcsr(csr);
}

}  // namespace

Variant variant_amx() { return {&gemm, &prepare_amx}; }

}  // namespace neural::cpu::bf16_detail
