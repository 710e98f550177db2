#include <cfloat>

#include "cuda/router.cuh"

namespace neural::cuda {

namespace {

// Top-k of one token's logits by one warp (descending, ties to the lower index), then softmax
// over the k selected, op for op like the CPU reference; lane 0's chosen/w are the result.
__device__ __forceinline__ void topk_softmax_warp(const float* __restrict__ logits, int experts,
                                                  int k, int* chosen, float* w) {
    const int lane = threadIdx.x % 32;
    float value[kRouterMaxK];
    for (int r = 0; r < k; ++r) {
        float best = -FLT_MAX;
        int arg = 0x7FFFFFFF;
        for (int e = lane; e < experts; e += 32) {
            bool taken = false;
            for (int q = 0; q < r; ++q) taken |= chosen[q] == e;
            const float v = logits[e];
            if (!taken && (v > best || (v == best && e < arg))) {
                best = v;
                arg = e;
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float ob = __shfl_xor_sync(0xFFFFFFFFu, best, o);
            const int oa = __shfl_xor_sync(0xFFFFFFFFu, arg, o);
            if (ob > best || (ob == best && oa < arg)) {
                best = ob;
                arg = oa;
            }
        }
        chosen[r] = arg;
        value[r] = best;
    }
    float g[kRouterMaxK], sum = 0.0f;
    for (int r = 0; r < k; ++r) {
        g[r] = expf(value[r] - value[0]);
        sum += g[r];
    }
    for (int r = 0; r < k; ++r) w[r] = g[r] / sum;
}

__global__ void router_topk_kernel(const float* __restrict__ logits, int experts, int k,
                                   const int* __restrict__ table, RouterOut dev, RouterOut host) {
    const int lane = threadIdx.x;
    int chosen[kRouterMaxK];
    float w[kRouterMaxK];
    topk_softmax_warp(logits, experts, k, chosen, w);
    if (lane != 0) return;
    for (int r = 0; r < k; ++r) {
        const int s = table[chosen[r]];
        dev.sel[r] = chosen[r];
        dev.gate[r] = w[r];
        dev.slot[r] = s;
        host.sel[r] = chosen[r];
        host.gate[r] = w[r];
        host.slot[r] = s;
    }
    __threadfence_system();
}

// Prefill: one warp per token row of logits [rows, experts] -> sel [rows, k], gate [rows, k].
__global__ void router_topk_rows_kernel(const float* __restrict__ logits, int rows, int experts,
                                        int k, int* __restrict__ sel, float* __restrict__ gate) {
    const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (row >= rows) return;
    int chosen[kRouterMaxK];
    float w[kRouterMaxK];
    topk_softmax_warp(logits + static_cast<std::size_t>(row) * experts, experts, k, chosen, w);
    if (threadIdx.x % 32 != 0) return;
    for (int r = 0; r < k; ++r) {
        sel[row * k + r] = chosen[r];
        gate[row * k + r] = w[r];
    }
}

}  // namespace

void router_topk_rows(const float* logits, int rows, int experts, int k, int* sel, float* gate,
                      cudaStream_t stream) {
    if (rows <= 0) return;
    router_topk_rows_kernel<<<(rows + 3) / 4, 128, 0, stream>>>(logits, rows, experts, k, sel,
                                                                gate);
}

void router_topk(const float* logits, int experts, int k, const int* slot_table,
                 RouterOut device_out, RouterOut host_out, cudaStream_t stream) {
    router_topk_kernel<<<1, 32, 0, stream>>>(logits, experts, k, slot_table, device_out, host_out);
}

}  // namespace neural::cuda
