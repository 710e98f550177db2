// Decode attention with sinks for one token (docs/MODEL.md; cpu/ops.h attend_with_sink):
// every query head against the keys [first, pos] of its KV head (GQA), sliding layers first =
// max(0, pos - window + 1). The sink logit joins the softmax denominator only. Split-K: the key
// range is cut into `splits` chunks computed by separate blocks (online softmax within a chunk),
// then one combine pass merges them in chunk order: deterministic for a given split count.
// q fp32 [nq*d]; caches fp32 [context, nkv*d]; out fp32 [nq*d]; scratch fp32
// [nq * splits * (d + 2)]. head_dim <= 128 and even. ring > 0: the caches hold `ring` rows,
// position p in row p % ring (a sliding layer's ring: ring >= window). counters (device,
// [q_heads], zero; or null): one launch instead of two, the last of a head's split blocks to
// finish combines that head and sets its counter back to zero (the fused decode graphs,
// decode_fused.h); the same bits as the combine kernel that runs when it is null. Host entry
// point only.
#pragma once

#include <cstdint>

#include <cuda.h>

namespace neural::cuda {

constexpr int kAttentionMaxHeadDim = 128;

void attention_decode(const float* q, const float* k_cache, const float* v_cache,
                      const std::uint16_t* sinks, int q_heads, int kv_heads, int head_dim,
                      int window /* 0: full */, int ring /* 0: none */, const int* pos, int splits,
                      float* scratch, float* out, CUstream stream, unsigned* counters = nullptr);

}  // namespace neural::cuda
