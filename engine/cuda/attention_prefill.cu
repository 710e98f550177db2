#include <cfloat>

#include <cuda_bf16.h>
#include <mma.h>

#include "cuda/attention_prefill.h"
#include "cuda/common.cuh"

namespace neural::cuda {

namespace attention_prefill_kernels {

constexpr int kD = kPrefillHeadDim;
constexpr int kTile = shape::kPrefillTile;        // queries per block and keys per step
constexpr int kThreads = shape::kPrefillThreads;  // 4 warps, warp w owns query rows 16w .. 16w + 15
constexpr int kLdh = shape::kPrefillLdh;          // bf16 row stride
constexpr int kLdf = shape::kPrefillLdf;          // fp32 row stride

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
static_assert(sizeof(Smem) == shape::kPrefillReferenceSmemBytes, "launch_shapes.h");

// count rows from `first` (row j valid while first + j <= last), 64 fp32 each; ring > 0: row p
// is stored at p % ring (a sliding layer's K/V ring).
template <typename Store>
__device__ __forceinline__ void load_rows(const float* base, int stride, int first, int last,
                                          int count, Store store, int ring = 0) {
    for (int idx = threadIdx.x; idx < count * (kD / 4); idx += kThreads) {
        const int r = idx / (kD / 4), c4 = idx % (kD / 4);
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        const int p = first + r;
        if (p <= last)
            v = *reinterpret_cast<const float4*>(
                base + static_cast<std::size_t>(ring > 0 ? p % ring : p) * stride + 4 * c4);
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

extern "C" __global__ void __launch_bounds__(kThreads) attention_prefill_reference_kernel(
    const float* __restrict__ q, int q_stride, int rows, int pos0, const float* __restrict__ kc,
    const float* __restrict__ vc, const std::uint16_t* __restrict__ sinks, int q_heads,
    int kv_heads, int window, int ring, float* __restrict__ out) {
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

    load_rows(q + hq * kD, q_stride, r0, last_row, kTile,
              [&](int at, float4 v) { split_bf16(s.q, s.q_lo, at, v); });
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
        load_rows(
            kc + hk * kD, kv_dim, kb, kmax, kTile,
            [&](int at, float4 v) { split_bf16(s.kt.k, s.kt.k_lo, at, v); }, ring);
        load_rows(
            vc + hk * kD, kv_dim, kb, kmax, kTile,
            [&](int at, float4 v) { split_bf16(s.v, s.v_lo, at, v); }, ring);
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
                    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb,
                        fbl;
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
                wmma::store_matrix_sync(&s.s[(16 * warp) * kLdf + 16 * j], acc[j], kLdf,
                                        wmma::mem_row_major);
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
            const float alpha =
                (any && m_old > -FLT_MAX) ? expf(m_old - m_new) : (any ? 0.0f : 1.0f);
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
            wmma::load_matrix_sync(acc, &s.o[(16 * warp) * kLdf + 16 * j], kLdf,
                                   wmma::mem_row_major);
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
            wmma::store_matrix_sync(&s.o[(16 * warp) * kLdf + 16 * j], acc, kLdf,
                                    wmma::mem_row_major);
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

// ---- the fast kernel: S, P and O in registers ---------------------------------------------
// The same math with raw mma.sync.m16n8k16 (bf16 in, fp32 accumulate), whose fragment layouts
// PTX documents, so the softmax works on the accumulators in registers (the reference kernel
// round-trips S, P and O through shared memory on every key tile, which bounded it: 74% L1/shared
// throughput, 27% issue). Warp w owns query rows 16w .. 16w + 15; lane = 4g + q holds rows g and
// g + 8 and, per 8-key (or 8-dimension) n-tile, columns 2q and 2q + 1. Shared memory holds only
// the key tile's K (row-major, [key][dim]) and V transposed ([dim][key]), as bf16 hi/lo halves.
constexpr int kLdk = kD + 8;  // bf16 row stride: lane (g, q) reads word 36 g + q, 32 distinct banks

struct FastSmem {
    __nv_bfloat16 k[kTile * kLdk], k_lo[kTile * kLdk];
    __nv_bfloat16 vt[kD * kLdk], vt_lo[kD * kLdk];
};

__device__ __forceinline__ std::uint32_t lds32(const __nv_bfloat16* p) {
    return *reinterpret_cast<const std::uint32_t*>(p);
}

extern "C" __global__ void __launch_bounds__(kThreads, 3)
    attention_prefill_fast_kernel(const float* __restrict__ q, int q_stride, int rows, int pos0,
                                  const float* __restrict__ kc, const float* __restrict__ vc,
                                  const std::uint16_t* __restrict__ sinks, int q_heads,
                                  int kv_heads, int window, int ring, float* __restrict__ out) {
    __shared__ __align__(16) FastSmem s;
    const int hq = blockIdx.x, r0 = blockIdx.y * kTile;
    const int hk = hq / (q_heads / kv_heads), kv_dim = kv_heads * kD;
    const int t = threadIdx.x, warp = t / 32, lane = t % 32, g = lane / 4, qd = lane % 4;
    const int last_row = min(r0 + kTile, rows) - 1;
    const int kmax = pos0 + last_row;
    // Key tiles at multiples of 64, as the reference kernel: a row's result does not depend on
    // the block or tile it is computed in.
    const int kmin = (window > 0 ? max(0, pos0 + r0 - window + 1) : 0) / kTile * kTile;
    const float scale = rsqrtf(static_cast<float>(kD));

    // This lane's rows (g, g + 8 of the warp's 16) and their Q as A fragments, hi and lo.
    int rr[2], pq[2], lo_key[2];
    bool valid[2];
    std::uint32_t qa[4][4], ql[4][4];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        rr[h] = r0 + 16 * warp + g + 8 * h;
        valid[h] = rr[h] < rows;
        pq[h] = pos0 + rr[h];
        lo_key[h] = window > 0 ? pq[h] - window + 1 : 0;
    }
#pragma unroll
    for (int c = 0; c < 4; ++c) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                float2 v = make_float2(0.f, 0.f);
                if (valid[h])
                    v = *reinterpret_cast<const float2*>(
                        q + static_cast<std::size_t>(rr[h]) * q_stride + hq * kD + 16 * c + 2 * qd +
                        8 * half);
                // a0a1: (g, 2q), a2a3: (g+8, 2q), a4a5: (g, 2q+8), a6a7: (g+8, 2q+8)
                split_bf16x2(v.x, v.y, qa[c][h + 2 * half], ql[c][h + 2 * half]);
            }
        }
    }
    float o[8][4];
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int i = 0; i < 4; ++i) o[n][i] = 0.0f;
    float m[2] = {-FLT_MAX, -FLT_MAX}, l[2] = {0.0f, 0.0f};

    for (int kb = kmin; kb <= kmax; kb += kTile) {
        // K tile: 64 keys x 16 float4, row-major halves. With a ring, keys before the window read
        // whatever newer position shares their row: finite values, weighted 0 below.
#pragma unroll
        for (int p = 0; p < 8; ++p) {
            const int idx = t + p * kThreads, key = idx / 16, c4 = idx % 16, pos = kb + key;
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (pos <= kmax)
                v = *reinterpret_cast<const float4*>(
                    kc + static_cast<std::size_t>(ring > 0 ? pos % ring : pos) * kv_dim + hk * kD +
                    4 * c4);
            std::uint32_t h0, l0, h1, l1;
            split_bf16x2(v.x, v.y, h0, l0);
            split_bf16x2(v.z, v.w, h1, l1);
            *reinterpret_cast<uint2*>(&s.k[key * kLdk + 4 * c4]) = make_uint2(h0, h1);
            *reinterpret_cast<uint2*>(&s.k_lo[key * kLdk + 4 * c4]) = make_uint2(l0, l1);
        }
        // V tile transposed: a unit is 2 keys x 4 dimensions, stored as 4 words (dim, key pair).
#pragma unroll
        for (int p = 0; p < 4; ++p) {
            const int kp = lane / 4 + 8 * warp, dq = lane % 4 + 4 * p;
            const int pa = kb + 2 * kp, pb = pa + 1;
            float4 va = make_float4(0.f, 0.f, 0.f, 0.f), vb = va;
            if (pa <= kmax)
                va = *reinterpret_cast<const float4*>(
                    vc + static_cast<std::size_t>(ring > 0 ? pa % ring : pa) * kv_dim + hk * kD +
                    4 * dq);
            if (pb <= kmax)
                vb = *reinterpret_cast<const float4*>(
                    vc + static_cast<std::size_t>(ring > 0 ? pb % ring : pb) * kv_dim + hk * kD +
                    4 * dq);
            const float a4[4] = {va.x, va.y, va.z, va.w}, b4[4] = {vb.x, vb.y, vb.z, vb.w};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                std::uint32_t h, lw;
                split_bf16x2(a4[i], b4[i], h, lw);
                *reinterpret_cast<std::uint32_t*>(&s.vt[(4 * dq + i) * kLdk + 2 * kp]) = h;
                *reinterpret_cast<std::uint32_t*>(&s.vt_lo[(4 * dq + i) * kLdk + 2 * kp]) = lw;
            }
        }
        __syncthreads();

        // S = Q K^T (16 rows x 64 keys per warp): hi hi + hi lo + lo hi.
        float sc[8][4];
#pragma unroll
        for (int n = 0; n < 8; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) sc[n][i] = 0.0f;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
#pragma unroll
            for (int n = 0; n < 8; ++n) {
                const int at = (8 * n + g) * kLdk + 16 * c + 2 * qd;
                const std::uint32_t b0 = lds32(&s.k[at]), b1 = lds32(&s.k[at + 8]);
                const std::uint32_t c0 = lds32(&s.k_lo[at]), c1 = lds32(&s.k_lo[at + 8]);
                mma16816_bf16(sc[n], qa[c], b0, b1);
                mma16816_bf16(sc[n], qa[c], c0, c1);
                mma16816_bf16(sc[n], ql[c], b0, b1);
            }
        }
        // Online softmax of rows g (h = 0) and g + 8 (h = 1); a row's 64 values sit on the four
        // lanes of its quad (xor 1, 2).
        float mx[2] = {-FLT_MAX, -FLT_MAX};
#pragma unroll
        for (int n = 0; n < 8; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int h = i / 2, key = kb + 8 * n + 2 * qd + (i % 2);
                const bool ok = valid[h] && key <= pq[h] && key >= lo_key[h] && key <= kmax;
                const float v = ok ? sc[n][i] * scale : -FLT_MAX;
                sc[n][i] = v;
                mx[h] = fmaxf(mx[h], v);
            }
        float alpha[2];
        bool any[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xFFFFFFFFu, mx[h], 1));
            mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xFFFFFFFFu, mx[h], 2));
            const float m_new = fmaxf(m[h], mx[h]);
            any[h] = m_new > -FLT_MAX;
            alpha[h] = (any[h] && m[h] > -FLT_MAX) ? expf(m[h] - m_new) : (any[h] ? 0.0f : 1.0f);
            m[h] = m_new;
        }
        float sum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int n = 0; n < 8; ++n)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int h = i / 2;
                const float p = (any[h] && sc[n][i] > -FLT_MAX) ? expf(sc[n][i] - m[h]) : 0.0f;
                sc[n][i] = p;
                sum[h] += p;
            }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            sum[h] += __shfl_xor_sync(0xFFFFFFFFu, sum[h], 1);
            sum[h] += __shfl_xor_sync(0xFFFFFFFFu, sum[h], 2);
            l[h] = l[h] * alpha[h] + sum[h];
        }
#pragma unroll
        for (int n = 0; n < 8; ++n) {
            o[n][0] *= alpha[0];
            o[n][1] *= alpha[0];
            o[n][2] *= alpha[1];
            o[n][3] *= alpha[1];
        }
        // O += P V: P's accumulator layout is the A layout of keys 16j .. 16j + 15 (n-tiles 2j, 2j + 1).
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            std::uint32_t pa[4], pl[4];
            split_bf16x2(sc[2 * j][0], sc[2 * j][1], pa[0], pl[0]);
            split_bf16x2(sc[2 * j][2], sc[2 * j][3], pa[1], pl[1]);
            split_bf16x2(sc[2 * j + 1][0], sc[2 * j + 1][1], pa[2], pl[2]);
            split_bf16x2(sc[2 * j + 1][2], sc[2 * j + 1][3], pa[3], pl[3]);
#pragma unroll
            for (int n = 0; n < 8; ++n) {
                const int at = (8 * n + g) * kLdk + 16 * j + 2 * qd;
                const std::uint32_t b0 = lds32(&s.vt[at]), b1 = lds32(&s.vt[at + 8]);
                const std::uint32_t c0 = lds32(&s.vt_lo[at]), c1 = lds32(&s.vt_lo[at + 8]);
                mma16816_bf16(o[n], pa, b0, b1);
                mma16816_bf16(o[n], pa, c0, c1);
                mma16816_bf16(o[n], pl, b0, b1);
            }
        }
        __syncthreads();  // the K/V tiles are reloaded next step
    }
    const float sink = bf16_bits_to_float(sinks[hq]);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        if (!valid[h]) continue;
        const float mf = fmaxf(m[h], sink);
        const float denom = l[h] * expf(m[h] - mf) + expf(sink - mf);
        const float f = expf(m[h] - mf) / denom;
        float* orow = out + static_cast<std::size_t>(rr[h]) * q_heads * kD + hq * kD + 2 * qd;
#pragma unroll
        for (int n = 0; n < 8; ++n) {
            *reinterpret_cast<float2*>(orow + 8 * n) =
                make_float2(o[n][2 * h] * f, o[n][2 * h + 1] * f);
        }
    }
}

}  // namespace attention_prefill_kernels

}  // namespace neural::cuda
