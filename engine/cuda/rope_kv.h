// RoPE (YaRN frequencies, half-split pairs (z[i], z[i + d/2]), cos/sin times the concentration;
// cpu/rope.h) on the query and key heads of one token, then K and V into the layer's cache at the
// token's position. qkv fp32 [nq*d | nkv*d | nkv*d]; k_cache/v_cache fp32 [context, nkv*d].
// The position is read from device memory (*pos), so a captured graph serves every token.
// ring > 0: the caches hold `ring` rows and position p goes to row p % ring (a sliding layer's
// K/V ring); 0: row p of a [context, nkv*d] cache.
// Host entry point only.
#pragma once

#include <cuda.h>

namespace neural::cuda {

void rope_kv(float* qkv, int q_heads, int kv_heads, int head_dim, const float* inv_freq,
             float concentration, const int* pos, float* k_cache, float* v_cache, int ring,
             CUstream stream);

// Prefill: `rows` tokens at positions pos0 .. pos0 + rows - 1, qkv fp32 [rows, (nq + 2 nkv) d].
void rope_kv_rows(float* qkv, int rows, int q_heads, int kv_heads, int head_dim,
                  const float* inv_freq, float concentration, int pos0, float* k_cache,
                  float* v_cache, int ring, CUstream stream);

}  // namespace neural::cuda
