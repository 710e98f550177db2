#include "cuda/rope_kv.cuh"

namespace neural::cuda {

namespace {

// One head of one token at position pos, thread i of its d/2 pairs: RoPE on a query or key head
// (key heads also into the K cache), value heads copied into the V cache. z: the head's values.
// ring > 0: the caches keep positions modulo ring (a sliding layer's K/V ring), row pos % ring.
__device__ __forceinline__ void rope_kv_head(float* z, int head, int i, int pos, int q_heads,
                                             int kv_heads, int d,
                                             const float* __restrict__ inv_freq,
                                             float concentration, float* k_cache, float* v_cache,
                                             int ring) {
    const int half = d / 2, kv_dim = kv_heads * d;
    if (i >= half) return;
    const int slot = ring > 0 ? pos % ring : pos;
    if (head < q_heads + kv_heads) {
        // fp32 angle and sincos, like cpu/rope.cpp (cosf/sinf, not the fast intrinsics).
        const float angle = static_cast<float>(pos) * inv_freq[i];
        const float c = cosf(angle) * concentration, s = sinf(angle) * concentration;
        const float a = z[i], b = z[i + half];
        const float ra = a * c - b * s, rb = b * c + a * s;
        z[i] = ra;
        z[i + half] = rb;
        if (head >= q_heads) {
            float* kc = k_cache + static_cast<std::size_t>(slot) * kv_dim + (head - q_heads) * d;
            kc[i] = ra;
            kc[i + half] = rb;
        }
    } else {
        const int vh = head - q_heads - kv_heads;
        float* vc = v_cache + static_cast<std::size_t>(slot) * kv_dim + vh * d;
        vc[i] = z[i];
        vc[i + half] = z[i + half];
    }
}

// Decode: one block per head (query heads, then key heads, then value heads), one thread per pair.
__global__ void rope_kv_kernel(float* qkv, int q_heads, int kv_heads, int d,
                               const float* __restrict__ inv_freq, float concentration,
                               const int* __restrict__ pos_ptr, float* k_cache, float* v_cache,
                               int ring) {
    const int head = blockIdx.x;
    rope_kv_head(qkv + static_cast<std::size_t>(head) * d, head, threadIdx.x, *pos_ptr, q_heads,
                 kv_heads, d, inv_freq, concentration, k_cache, v_cache, ring);
}

// Prefill: grid (rows, heads); row r is position pos0 + r of qkv [rows, (nq + 2 nkv) d].
__global__ void rope_kv_rows_kernel(float* qkv, int q_heads, int kv_heads, int d,
                                    const float* __restrict__ inv_freq, float concentration,
                                    int pos0, float* k_cache, float* v_cache, int ring) {
    const int row = blockIdx.x, head = blockIdx.y;
    float* z = qkv + static_cast<std::size_t>(row) * (q_heads + 2 * kv_heads) * d +
               static_cast<std::size_t>(head) * d;
    rope_kv_head(z, head, threadIdx.x, pos0 + row, q_heads, kv_heads, d, inv_freq, concentration,
                 k_cache, v_cache, ring);
}

}  // namespace

void rope_kv_rows(float* qkv, int rows, int q_heads, int kv_heads, int head_dim,
                  const float* inv_freq, float concentration, int pos0, float* k_cache,
                  float* v_cache, int ring, cudaStream_t stream) {
    if (rows <= 0) return;
    const int threads = ((head_dim / 2 + 31) / 32) * 32;
    rope_kv_rows_kernel<<<dim3(rows, q_heads + 2 * kv_heads), threads, 0, stream>>>(
        qkv, q_heads, kv_heads, head_dim, inv_freq, concentration, pos0, k_cache, v_cache, ring);
}

void rope_kv(float* qkv, int q_heads, int kv_heads, int head_dim, const float* inv_freq,
             float concentration, const int* pos, float* k_cache, float* v_cache, int ring,
             cudaStream_t stream) {
    const int threads = ((head_dim / 2 + 31) / 32) * 32;
    rope_kv_kernel<<<q_heads + 2 * kv_heads, threads, 0, stream>>>(
        qkv, q_heads, kv_heads, head_dim, inv_freq, concentration, pos, k_cache, v_cache, ring);
}

}  // namespace neural::cuda
