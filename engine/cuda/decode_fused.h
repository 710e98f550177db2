// The fused kernels of a decode layer's dense part (GpuOptions::fused_decode, docs/CUDA.md "A
// token"). The chain from the layer's input to its routing is a dozen small dependent steps, most
// of them one-block kernels: on the GPU its time was the launches and their gaps, not the ~30 MB
// of weights it reads. Fused, a layer's graph runs
//   add_moe (copy_vector on layer 0) -> norm_qkv_rope -> attention_decode (one launch, counters)
//   -> oproj_norm_route -> [event] -> resident experts
// instead of ten launches before the event. The fused kernels compute every value with the
// one-step kernels' device functions (decode_steps.cuh), in the same order, so the values should
// be the reference graph's bits (kept: --fused-decode 0; the tests allow fp32 rounding). Plain CUDA (no clusters, no programmatic launch), for
// every GPU the backend runs on. Host entry points only.
//
// `x += experts` stays a kernel of its own: the CPU's part is read zero-copy from host-mapped
// memory, and every block of a fused kernel reading it would cross PCIe once per block.
#pragma once

#include <cstdint>

#include <cuda.h>

#include "cuda/router.h"

namespace neural::cuda {

// The layer's start: every block computes h = rms_norm(x) * norm_w itself (x [hidden] from L2,
// into shared memory; h is not written out), then a warp per (row i, row i + d/2) pair of a head
// computes those two rows of qkv = W h + b and applies RoPE to them (query and key heads; the
// key head also into the K cache) or copies them into the V cache (value heads), at the position
// *pos: rms_norm + gemv_bf16 + rope_kv in one launch. qkv fp32 [(q_heads + 2 kv_heads) head_dim];
// W bf16 [that, hidden]; hidden a multiple of 8; hidden floats of shared memory (<= 48 KiB).
struct NormQkvRope {
    const float* x = nullptr;
    const std::uint16_t* norm_w = nullptr;
    float eps = 1e-5f;
    int hidden = 0;
    const std::uint16_t *qkv_w = nullptr, *qkv_b = nullptr;
    int q_heads = 0, kv_heads = 0, head_dim = 0;
    const float* inv_freq = nullptr;
    float concentration = 1.0f;
    const int* pos = nullptr;
    float *k_cache = nullptr, *v_cache = nullptr;
    int ring = 0;  // rope_kv.h
    float* qkv = nullptr;
};
void norm_qkv_rope(const NormQkvRope& p, CUstream stream);

// The layer's end up to the routing: x += o_w attn + o_b (a warp per row, like gemv_bf16
// accumulating); then the last block to finish (a device counter, set back to zero by that block
// for the next launch) computes h = rms_norm(x) * norm_w into h and h_mirror (host-mapped, may be
// null; fenced for the host), the router logits (router_logits [experts]) and the top-k + softmax
// + slot lookup of router_topk, to device and host-mapped memory. While the output projection
// runs, the blocks prefetch the router's weights into L2 for that last block. Shared memory:
// attn_width + hidden + experts floats (<= 48 KiB); attn_width and hidden multiples of 8.
struct OprojRoute {
    const std::uint16_t *o_w = nullptr, *o_b = nullptr;
    const float* attn = nullptr;
    int attn_width = 0;
    float* x = nullptr;
    int hidden = 0;
    const std::uint16_t* norm_w = nullptr;
    float eps = 1e-5f;
    float *h = nullptr, *h_mirror = nullptr;
    const std::uint16_t *router_w = nullptr, *router_b = nullptr;
    int experts = 0, k = 0;
    float* router_logits = nullptr;
    const int* slot_table = nullptr;  // [experts]
    RouterOut device_out{}, host_out{};
    unsigned* counter = nullptr;  // device, one, zero before the first launch
};
void oproj_norm_route(const OprojRoute& p, CUstream stream);

}  // namespace neural::cuda
