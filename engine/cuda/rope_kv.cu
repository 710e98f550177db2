#include "cuda/decode_steps.cuh"
#include "cuda/rope_kv.h"

namespace neural::cuda {

namespace rope_kv_kernels {

// Decode: one block per head (query heads, then key heads, then value heads), one thread per pair.
extern "C" __global__ void rope_kv_kernel(float* qkv, int q_heads, int kv_heads, int d,
                                          const float* __restrict__ inv_freq, float concentration,
                                          const int* __restrict__ pos_ptr, float* k_cache,
                                          float* v_cache, int ring) {
    const int head = blockIdx.x;
    rope_kv_head(qkv + static_cast<std::size_t>(head) * d, head, threadIdx.x, *pos_ptr, q_heads,
                 kv_heads, d, inv_freq, concentration, k_cache, v_cache, ring);
}

// Prefill: grid (rows, heads); row r is position pos0 + r of qkv [rows, (nq + 2 nkv) d].
extern "C" __global__ void rope_kv_rows_kernel(float* qkv, int q_heads, int kv_heads, int d,
                                               const float* __restrict__ inv_freq,
                                               float concentration, int pos0, float* k_cache,
                                               float* v_cache, int ring) {
    const int row = blockIdx.x, head = blockIdx.y;
    float* z = qkv + static_cast<std::size_t>(row) * (q_heads + 2 * kv_heads) * d +
               static_cast<std::size_t>(head) * d;
    rope_kv_head(z, head, threadIdx.x, pos0 + row, q_heads, kv_heads, d, inv_freq, concentration,
                 k_cache, v_cache, ring);
}

}  // namespace rope_kv_kernels

}  // namespace neural::cuda
