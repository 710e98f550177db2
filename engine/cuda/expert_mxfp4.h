// The resident experts of one token and layer, computed from VRAM slots (docs/MODEL.md "Experts",
// cpu/kernels/expert_kernel.h): for each of the k router choices whose slot is >= 0,
//   gu = W1 x + b1  (W1 [2I, H] MXFP4, rows 2i / 2i+1 = gate_i / up_i)
//   a_i = min(g_i, L) * sigmoid(alpha * min(g_i, L)) * (clamp(u_i, -L, L) + 1)
//   y = W2 a + b2   (W2 [H, I] MXFP4)
// and out[H] = sum over resident choices, in k order, of gate_k * y_k (missed choices add 0: the
// CPU computes them). A slot holds one raw expert-store record (store/format.h): gate_up codes
// [2I, H/32, 16] | gate_up scales [2I, H/32] | down codes [H, I/32, 16] | down scales [H, I/32].
// A slot's payload size is cpu::ExpertRecordView::raw_bytes(H, I). Host entry point only.
#pragma once

#include <cstdint>

#include <cuda.h>

namespace neural::cuda {

struct ExpertShape {
    int hidden = 0;        // H
    int intermediate = 0;  // I
    int k = 0;             // router choices per token (<= 4)
    int experts = 0;       // E (bias rows per layer)
    float limit = 7.0f;
    float alpha = 1.702f;
    // Prefill's expert GEMMs only (expert_gemm.h): fp16 operands where half_operands, the
    // gate_up input multiplied by 2^in_exp and the down input by 2^act_exp (with_half_operands);
    // otherwise bf16 hi + lo halves. Decode's kernels ignore these.
    bool half_operands = false;
    int in_exp = 0;
    int act_exp = 0;
};

// pool: slot s at pool + s * slot_stride. sel/gate/slot: the router's device outputs.
// gate_up_bias bf16 [E, 2I], down_bias bf16 [E, H] of this layer. act scratch fp32 [k, I].
// Needs k * I * 33/32 * 4 bytes of shared memory (<= 48 KiB: I <= 2976 at k = 4).
// accumulate: out[r] += the sum instead of out[r] = it (the backend's streamed misses add their
// sum to the resident one this way, --stream-misses).
// part (device, [2k] or null): choice q's slot holds only neurons [part[2q], part[2q] +
// part[2q + 1]) of its expert, laid out as the raw record of an expert of part[2q + 1] neurons
// (cpu::ExpertRecordView::slice; a count of 0 means the whole expert): the kernel computes that
// slice (its gate_up bias rows from the slice's first neuron, the down bias added in full), the
// part of a miss split with the CPU (--split-misses), which computes the rest without the bias.
void experts_resident(const std::uint8_t* pool, std::uint64_t slot_stride, const ExpertShape& shape,
                      const int* sel, const float* gate, const int* slot,
                      const std::uint16_t* gate_up_bias, const std::uint16_t* down_bias,
                      const float* x, float* act, float* out, CUstream stream,
                      bool accumulate = false, const int* part = nullptr);

}  // namespace neural::cuda
