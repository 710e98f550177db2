#include "cuda/common.cuh"
#include "cuda/expert_mxfp4.h"

namespace neural::cuda {

namespace expert_mxfp4_kernels {

constexpr int kWarps = shape::kExpertWarps;

// Choice q's slice (experts_resident's `part`): its first neuron and its neurons (I: whole).
struct Slice {
    int first, neurons;
};
__device__ __forceinline__ Slice slice_of(const int* part, int q, int I) {
    if (part == nullptr || part[2 * q + 1] <= 0) return {0, I};
    return {part[2 * q], part[2 * q + 1]};
}

extern "C" __global__ void gate_up_kernel(const std::uint8_t* __restrict__ pool,
                                          std::uint64_t stride, ExpertShape sh,
                                          const int* __restrict__ sel, const int* __restrict__ slot,
                                          const std::uint16_t* __restrict__ bias,
                                          const float* __restrict__ x, float* __restrict__ act,
                                          const int* __restrict__ part) {
    extern __shared__ float xs[];  // [H] padded (common.cuh)
    const int k = blockIdx.y;
    const int s = slot[k];
    if (s < 0) return;  // uniform per block: a miss, computed by the CPU
    const int H = sh.hidden, I = sh.intermediate, G = H / 32;
    const Slice sl = slice_of(part, k, I);
    if (blockIdx.x * kWarps >= sl.neurons) return;  // uniform per block
    // x [H] into the padded layout, four floats a load (H is a multiple of 32).
    for_strided<kWarps * 32, 4>(
        H / 4, [&](int i4) { return __ldg(reinterpret_cast<const float4*>(x) + i4); },
        [&](int i4, float4 v) { store_padded4(xs, 4 * i4, v); });
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int i = blockIdx.x * kWarps + warp;  // neuron i of the slice (of the expert: whole)
    if (i >= sl.neurons) return;
    const std::uint8_t* rec = pool + static_cast<std::uint64_t>(s) * stride;
    const std::uint8_t* scales = rec + static_cast<std::uint64_t>(2 * sl.neurons) * G * 16;
    const std::size_t row_g = static_cast<std::size_t>(2 * i), row_u = row_g + 1;
    float g = mxfp4_row_dot(rec + row_g * G * 16, scales + row_g * G, G, xs);
    float u = mxfp4_row_dot(rec + row_u * G * 16, scales + row_u * G, G, xs);
    if (lane == 0) {
        const std::uint16_t* b = bias + static_cast<std::size_t>(sel[k]) * 2 * I +
                                 2 * static_cast<std::size_t>(sl.first);
        g += bf16_bits_to_float(b[2 * i]);
        u += bf16_bits_to_float(b[2 * i + 1]);
        g = fminf(g, sh.limit);
        u = fminf(fmaxf(u, -sh.limit), sh.limit);
        const float glu = g / (1.0f + expf(-sh.alpha * g));
        act[k * I + i] = glu * (u + 1.0f);
    }
}

extern "C" __global__ void down_kernel(const std::uint8_t* __restrict__ pool, std::uint64_t stride,
                                       ExpertShape sh, const int* __restrict__ sel,
                                       const float* __restrict__ gate, const int* __restrict__ slot,
                                       const std::uint16_t* __restrict__ bias,
                                       const float* __restrict__ act, float* __restrict__ out,
                                       bool accumulate, const int* __restrict__ part) {
    extern __shared__ float as[];  // [k, I] padded (common.cuh)
    const int H = sh.hidden, I = sh.intermediate, Gh = H / 32, PI = padded_floats(I);
    // Every choice's act row [I] into the padded layout, four floats a load, all k rows in one
    // pass (a miss's or a slice's unused part is copied too and never read).
    const int I4 = I / 4;
    for_strided<kWarps * 32, 12>(
        sh.k * I4, [&](int t) { return __ldg(reinterpret_cast<const float4*>(act) + t); },
        [&](int t, float4 v) {
            const int q = t / I4;
            store_padded4(as + q * PI, 4 * (t - q * I4), v);
        });
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int r = blockIdx.x * kWarps + warp;
    if (r >= H) return;
    float total = 0.0f;
    for (int q = 0; q < sh.k; ++q) {
        const int s = slot[q];
        if (s < 0) continue;
        // A slice's record is laid out as an expert of its own neurons (Gi blocks per row).
        const int n = slice_of(part, q, I).neurons, Gi = n / 32;
        const std::uint64_t down_codes = static_cast<std::uint64_t>(2 * n) * Gh * 17;
        const std::uint64_t down_scales = down_codes + static_cast<std::uint64_t>(H) * Gi * 16;
        const std::uint8_t* rec = pool + static_cast<std::uint64_t>(s) * stride;
        float y =
            mxfp4_row_dot(rec + down_codes + static_cast<std::uint64_t>(r) * Gi * 16,
                          rec + down_scales + static_cast<std::uint64_t>(r) * Gi, Gi, as + q * PI);
        y += bf16_bits_to_float(bias[static_cast<std::size_t>(sel[q]) * H + r]);
        total += gate[q] * y;
    }
    if (lane == 0) out[r] = accumulate ? out[r] + total : total;
}

}  // namespace expert_mxfp4_kernels

}  // namespace neural::cuda
