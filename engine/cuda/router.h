// Router decision for one token and layer: top-k of the expert logits (descending, ties to the
// lower index, like cpu/reference_model.cpp), softmax over the k selected, and each choice's
// VRAM slot from the slot table (-1: missed, the CPU computes it). Written to device memory for
// the resident-expert kernels and to host-mapped memory for the host thread that runs the CPU
// kernel on the misses (zero-copy, fenced for the host). Host entry point only.
#pragma once

#include <cuda.h>

namespace neural::cuda {

constexpr int kRouterMaxK = 4;

struct RouterOut {
    int* sel;     // [k] expert ids
    float* gate;  // [k] softmax weights
    int* slot;    // [k] slot index or -1
};

void router_topk(const float* logits, int experts, int k, const int* slot_table /* [experts] */,
                 RouterOut device_out, RouterOut host_out, CUstream stream);

// Prefill: the same decision for `rows` tokens, logits fp32 [rows, experts] -> sel [rows, k],
// gate [rows, k] in device memory (the host reads them after the layer's dense part).
void router_topk_rows(const float* logits, int rows, int experts, int k, int* sel, float* gate,
                      CUstream stream);

}  // namespace neural::cuda
