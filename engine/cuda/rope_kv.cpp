// Host entry points of rope_kv.cu.
#include "cuda/rope_kv.h"

#include "cuda/driver/kernels.h"

namespace neural::cuda {

namespace {
const Kernel<void(float*, int, int, int, const float*, float, const int*, float*, float*, int)>
    k_rope_kv("rope_kv_kernel");
const Kernel<void(float*, int, int, int, const float*, float, int, float*, float*, int)>
    k_rope_kv_rows("rope_kv_rows_kernel");

unsigned threads_for(int head_dim) {
    return static_cast<unsigned>(((head_dim / 2 + 31) / 32) * 32);
}
}  // namespace

void rope_kv_rows(float* qkv, int rows, int q_heads, int kv_heads, int head_dim,
                  const float* inv_freq, float concentration, int pos0, float* k_cache,
                  float* v_cache, int ring, CUstream stream) {
    if (rows <= 0) return;
    k_rope_kv_rows.launch(
        Dim3(static_cast<unsigned>(rows), static_cast<unsigned>(q_heads + 2 * kv_heads)),
        threads_for(head_dim), 0, stream, qkv, q_heads, kv_heads, head_dim, inv_freq, concentration,
        pos0, k_cache, v_cache, ring);
}

void rope_kv(float* qkv, int q_heads, int kv_heads, int head_dim, const float* inv_freq,
             float concentration, const int* pos, float* k_cache, float* v_cache, int ring,
             CUstream stream) {
    k_rope_kv.launch(static_cast<unsigned>(q_heads + 2 * kv_heads), threads_for(head_dim), 0,
                     stream, qkv, q_heads, kv_heads, head_dim, inv_freq, concentration, pos,
                     k_cache, v_cache, ring);
}

}  // namespace neural::cuda
