// Prefill attention with sinks for a block of `rows` query tokens at positions pos0 .. pos0 +
// rows - 1 (docs/MODEL.md; cpu/ops.h attend_with_sink), causal, sliding layers limited to the
// last `window` keys, GQA. Flash-style on tensor cores: per (query head, 64 queries) one block
// walks 64-key tiles of the fp32 K/V cache (positions already written by rope_kv_rows, earlier
// blocks included), S = Q K^T and O += P V from bf16 hi/lo halves of every operand (three WMMA
// products each, ~16 bits), fp32 accumulation, online softmax in fp32; the sink joins the
// denominator at the end. q: fp32 rows of qkv (row stride q_stride); out fp32 [rows, nq * 64]. head_dim must be 64 (gpt-oss); the backend checks. Deterministic.
// ring > 0: the caches hold `ring` rows, position p in row p % ring; the block's keys and the
// window before it must fit: ring >= rows + window - 1 (the backend checks). Host entry point only.
// Two kernels (KernelPath): the fast one keeps S, P and O in registers (raw mma.sync, whose
// fragment layouts are documented), the reference one (WMMA) stages them in shared memory. Same
// products, tiles and masks; they agree within rounding (the summation order inside the tensor
// cores' fragments differs), each is deterministic and independent of the block cut.
#pragma once

#include <cstdint>

#include <cuda.h>

#include "cuda/kernel_path.h"
#include "cuda/launch_shapes.h"

namespace neural::cuda {

constexpr int kPrefillHeadDim = shape::kPrefillHeadDim;

void attention_prefill(const float* q, int q_stride, int rows, int pos0, const float* k_cache,
                       const float* v_cache, const std::uint16_t* sinks, int q_heads, int kv_heads,
                       int window /* 0: full */, int ring /* 0: none */, float* out,
                       CUstream stream, KernelPath path = KernelPath::fast);

}  // namespace neural::cuda
