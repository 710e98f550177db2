#include "cuda/decode_steps.cuh"
#include "cuda/router.h"

namespace neural::cuda {

namespace router_kernels {

extern "C" __global__ void router_topk_kernel(const float* __restrict__ logits, int experts, int k,
                                              const int* __restrict__ table, RouterOut dev,
                                              RouterOut host) {
    const int lane = threadIdx.x;
    int chosen[kRouterMaxK];
    float w[kRouterMaxK];
    topk_softmax_warp(logits, experts, k, chosen, w);
    if (lane != 0) return;
    store_route(chosen, w, k, table, dev, host);
}

// Prefill: one warp per token row of logits [rows, experts] -> sel [rows, k], gate [rows, k].
extern "C" __global__ void router_topk_rows_kernel(const float* __restrict__ logits, int rows,
                                                   int experts, int k, int* __restrict__ sel,
                                                   float* __restrict__ gate) {
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

}  // namespace router_kernels

}  // namespace neural::cuda
