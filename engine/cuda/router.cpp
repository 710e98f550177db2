// Host entry points of router.cu.
#include "cuda/router.h"

#include "cuda/driver/kernels.h"

namespace neural::cuda {

namespace {
const Kernel<void(const float*, int, int, const int*, RouterOut, RouterOut)> k_router_topk(
    "router_topk_kernel");
const Kernel<void(const float*, int, int, int, int*, float*)> k_router_topk_rows(
    "router_topk_rows_kernel");
}  // namespace

void router_topk_rows(const float* logits, int rows, int experts, int k, int* sel, float* gate,
                      CUstream stream) {
    if (rows <= 0) return;
    k_router_topk_rows.launch(static_cast<unsigned>((rows + 3) / 4), 128, 0, stream, logits, rows,
                              experts, k, sel, gate);
}

void router_topk(const float* logits, int experts, int k, const int* slot_table,
                 RouterOut device_out, RouterOut host_out, CUstream stream) {
    k_router_topk.launch(1, 32, 0, stream, logits, experts, k, slot_table, device_out, host_out);
}

}  // namespace neural::cuda
