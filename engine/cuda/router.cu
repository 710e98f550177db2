#include <cfloat>

#include "cuda/router.cuh"

namespace neural::cuda {

namespace {

__global__ void router_topk_kernel(const float* __restrict__ logits, int experts, int k,
                                   const int* __restrict__ table, RouterOut dev, RouterOut host) {
    const int lane = threadIdx.x;
    int chosen[kRouterMaxK];
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
    if (lane != 0) return;
    // Softmax over the selected logits, op for op like the CPU reference.
    float g[kRouterMaxK], sum = 0.0f;
    for (int r = 0; r < k; ++r) {
        g[r] = expf(value[r] - value[0]);
        sum += g[r];
    }
    for (int r = 0; r < k; ++r) {
        const float w = g[r] / sum;
        const int s = table[chosen[r]];
        dev.sel[r] = chosen[r];
        dev.gate[r] = w;
        dev.slot[r] = s;
        host.sel[r] = chosen[r];
        host.gate[r] = w;
        host.slot[r] = s;
    }
    __threadfence_system();
}

}  // namespace

void router_topk(const float* logits, int experts, int k, const int* slot_table,
                 RouterOut device_out, RouterOut host_out, cudaStream_t stream) {
    router_topk_kernel<<<1, 32, 0, stream>>>(logits, experts, k, slot_table, device_out, host_out);
}

}  // namespace neural::cuda
