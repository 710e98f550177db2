#include <cfloat>
#include <mutex>
#include <vector>

#include <cuda_bf16.h>
#include <mma.h>

#include "cuda/attention_prefill.cuh"
#include "cuda/common.cuh"
#include "cuda/cuda_check.h"

namespace neural::cuda {

namespace {

constexpr int kD = kPrefillHeadDim;
constexpr int kTile = 64;      // queries per block and keys per step
constexpr int kThreads = 128;  // 4 warps, warp w owns query rows 16w .. 16w + 15
constexpr int kLdh = kD + 8;   // bf16 row stride
constexpr int kLdf = kD + 4;   // fp32 row stride

// Every operand is split into bf16 halves (x = hi + lo) and each product takes three WMMA
// products, hi hi + hi lo + lo hi: ~16 bits of each operand with bf16's range (fp16 operands lost
// precision on small values). S is stored over the K tiles once every warp has read them.
struct Smem {
    __nv_bfloat16 q[kTile * kLdh], q_lo[kTile * kLdh];
    union {
        struct {
            __nv_bfloat16 k[kTile * kLdh], k_lo[kTile * kLdh];
        } kt;
        float s[kTile * kLdf];
    };
    __nv_bfloat16 v[kTile * kLdh], v_lo[kTile * kLdh];
    __nv_bfloat16 p[kTile * kLdh], p_lo[kTile * kLdh];
    float o[kTile * kLdf];
    float m[kTile], l[kTile];
};

// count rows from `first` (row j valid while first + j <= last), 64 fp32 each; ring > 0: row p
// is stored at p % ring (a sliding layer's K/V ring).
template <typename Store>
__device__ __forceinline__ void load_rows(const float* base, int stride, int first, int last, int count,
                                          Store store, int ring = 0) {
    for (int idx = threadIdx.x; idx < count * (kD / 4); idx += kThreads) {
        const int r = idx / (kD / 4), c4 = idx % (kD / 4);
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        const int p = first + r;
        if (p <= last) v = *reinterpret_cast<const float4*>(base + static_cast<std::size_t>(ring > 0 ? p % ring : p) * stride + 4 * c4);
        store(r * kLdh + 4 * c4, v);
    }
}

__device__ __forceinline__ void split_bf16(__nv_bfloat16* hi, __nv_bfloat16* lo, int at, float4 v) {
    const float f[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const __nv_bfloat16 h = __float2bfloat16(f[i]);
        hi[at + i] = h;
        lo[at + i] = __float2bfloat16(f[i] - __bfloat162float(h));
    }
}

__global__ void __launch_bounds__(kThreads)
    attention_prefill_kernel(const float* __restrict__ q, int q_stride, int rows, int pos0,
                             const float* __restrict__ kc, const float* __restrict__ vc,
                             const std::uint16_t* __restrict__ sinks, int q_heads, int kv_heads,
                             int window, int ring, float* __restrict__ out) {
    using namespace nvcuda;
    extern __shared__ __align__(16) unsigned char raw[];
    Smem& s = *reinterpret_cast<Smem*>(raw);
    const int hq = blockIdx.x, r0 = blockIdx.y * kTile;
    const int hk = hq / (q_heads / kv_heads), kv_dim = kv_heads * kD;
    const int t = threadIdx.x, warp = t / 32;
    const int last_row = min(r0 + kTile, rows) - 1;
    const int kmax = pos0 + last_row;
    // Key tiles start at multiples of 64: a row sees the same tiles in the same order whatever
    // block or query tile it is computed in (tiles without a valid key change nothing), so a
    // row's result does not depend on how the prompt was cut into blocks.
    const int kmin = (window > 0 ? max(0, pos0 + r0 - window + 1) : 0) / kTile * kTile;
    const float scale = rsqrtf(static_cast<float>(kD));

    load_rows(q + hq * kD, q_stride, r0, last_row, kTile, [&](int at, float4 v) { split_bf16(s.q, s.q_lo, at, v); });
    for (int i = t; i < kTile * kLdf; i += kThreads) s.o[i] = 0.0f;
    if (t < kTile) {
        s.m[t] = -FLT_MAX;
        s.l[t] = 0.0f;
    }
    // Softmax ownership: thread t handles row t / 2, columns 32 * (t % 2) .. + 31 (its own warp's
    // rows, so S, P and O rows never cross warps).
    const int row = t / 2, c0 = 32 * (t % 2);
    const int pq = pos0 + r0 + row;
    const int lo = window > 0 ? pq - window + 1 : 0;
    const bool row_valid = r0 + row < rows;
    __syncthreads();

    for (int kb = kmin; kb <= kmax; kb += kTile) {
        // With a ring, keys of the tile before the window (masked below) read whatever newer
        // position shares their row: finite values, weighted 0.
        load_rows(kc + hk * kD, kv_dim, kb, kmax, kTile, [&](int at, float4 v) { split_bf16(s.kt.k, s.kt.k_lo, at, v); }, ring);
        load_rows(vc + hk * kD, kv_dim, kb, kmax, kTile, [&](int at, float4 v) { split_bf16(s.v, s.v_lo, at, v); }, ring);
        __syncthreads();
        // S = Q K^T for this warp's 16 rows.
        {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) wmma::fill_fragment(acc[j], 0.0f);
#pragma unroll
            for (int kk = 0; kk < kD; kk += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa, fal;
                wmma::load_matrix_sync(fa, &s.q[(16 * warp) * kLdh + kk], kLdh);
                wmma::load_matrix_sync(fal, &s.q_lo[(16 * warp) * kLdh + kk], kLdh);
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb, fbl;
                    wmma::load_matrix_sync(fb, &s.kt.k[(16 * j) * kLdh + kk], kLdh);
                    wmma::load_matrix_sync(fbl, &s.kt.k_lo[(16 * j) * kLdh + kk], kLdh);
                    wmma::mma_sync(acc[j], fa, fb, acc[j]);
                    wmma::mma_sync(acc[j], fa, fbl, acc[j]);
                    wmma::mma_sync(acc[j], fal, fb, acc[j]);
                }
            }
            __syncthreads();  // every warp has read the K tiles that S overwrites
#pragma unroll
            for (int j = 0; j < 4; ++j)
                wmma::store_matrix_sync(&s.s[(16 * warp) * kLdf + 16 * j], acc[j], kLdf, wmma::mem_row_major);
        }
        __syncwarp();
        // Online softmax of row `row`, columns c0 .. c0 + 31.
        {
            float* sr = &s.s[row * kLdf + c0];
            float mx = -FLT_MAX;
            for (int c = 0; c < 32; ++c) {
                const int j = kb + c0 + c;
                const bool ok = row_valid && j <= pq && j >= lo && j <= kmax;
                const float v = ok ? sr[c] * scale : -FLT_MAX;
                sr[c] = v;
                mx = fmaxf(mx, v);
            }
            mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 1));
            const float m_old = s.m[row];
            const float m_new = fmaxf(m_old, mx);
            const bool any = m_new > -FLT_MAX;
            float sum = 0.0f;
            __nv_bfloat16* pr = &s.p[row * kLdh + c0];
            __nv_bfloat16* pl = &s.p_lo[row * kLdh + c0];
            for (int c = 0; c < 32; ++c) {
                const float p = (any && sr[c] > -FLT_MAX) ? expf(sr[c] - m_new) : 0.0f;
                const __nv_bfloat16 h = __float2bfloat16(p);
                pr[c] = h;
                pl[c] = __float2bfloat16(p - __bfloat162float(h));
                sum += p;
            }
            sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 1);
            const float alpha = (any && m_old > -FLT_MAX) ? expf(m_old - m_new) : (any ? 0.0f : 1.0f);
            float* orow = &s.o[row * kLdf + c0];
            for (int c = 0; c < 32; ++c) orow[c] *= alpha;
            __syncwarp();
            if (t % 2 == 0) {
                s.m[row] = m_new;
                s.l[row] = s.l[row] * alpha + sum;
            }
        }
        __syncwarp();
        // O += P V for this warp's rows.
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            wmma::load_matrix_sync(acc, &s.o[(16 * warp) * kLdf + 16 * j], kLdf, wmma::mem_row_major);
#pragma unroll
            for (int kk = 0; kk < kTile; kk += 16) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa, fal;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb, fbl;
                wmma::load_matrix_sync(fa, &s.p[(16 * warp) * kLdh + kk], kLdh);
                wmma::load_matrix_sync(fal, &s.p_lo[(16 * warp) * kLdh + kk], kLdh);
                wmma::load_matrix_sync(fb, &s.v[kk * kLdh + 16 * j], kLdh);
                wmma::load_matrix_sync(fbl, &s.v_lo[kk * kLdh + 16 * j], kLdh);
                wmma::mma_sync(acc, fa, fb, acc);
                wmma::mma_sync(acc, fa, fbl, acc);
                wmma::mma_sync(acc, fal, fb, acc);
            }
            wmma::store_matrix_sync(&s.o[(16 * warp) * kLdf + 16 * j], acc, kLdf, wmma::mem_row_major);
        }
        __syncthreads();  // K/V tiles are reloaded next step
    }
    if (!row_valid) return;
    const float sink = bf16_bits_to_float(sinks[hq]);
    const float m = s.m[row];
    const float mf = fmaxf(m, sink);
    const float denom = s.l[row] * expf(m - mf) + expf(sink - mf);
    const float f = expf(m - mf) / denom;
    float* orow = out + static_cast<std::size_t>(r0 + row) * q_heads * kD + hq * kD + c0;
    for (int c = 0; c < 32; ++c) orow[c] = s.o[row * kLdf + c0 + c] * f;
}

// The opt-in to more than 48 KiB of dynamic shared memory is a property of the kernel on one
// device: it is set once for every device a launch runs on (set once per process, a second GPU
// -- or a process whose first launch ran on another device -- got "invalid argument").
void allow_large_shared_memory() {
    int device = 0;
    NEURAL_CUDA(cudaGetDevice(&device));
    static std::mutex mu;
    static std::vector<bool> configured;
    const std::lock_guard<std::mutex> lock(mu);
    const auto d = static_cast<std::size_t>(device);
    if (d < configured.size() && configured[d]) return;
    NEURAL_CUDA(cudaFuncSetAttribute(attention_prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(sizeof(Smem))));
    if (d >= configured.size()) configured.resize(d + 1, false);
    configured[d] = true;
}

}  // namespace

void attention_prefill(const float* q, int q_stride, int rows, int pos0, const float* k_cache,
                       const float* v_cache, const std::uint16_t* sinks, int q_heads, int kv_heads,
                       int window, int ring, float* out, cudaStream_t stream) {
    if (rows <= 0) return;
    allow_large_shared_memory();
    const dim3 grid(q_heads, (rows + kTile - 1) / kTile);
    attention_prefill_kernel<<<grid, kThreads, sizeof(Smem), stream>>>(
        q, q_stride, rows, pos0, k_cache, v_cache, sinks, q_heads, kv_heads, window, ring, out);
}

}  // namespace neural::cuda
