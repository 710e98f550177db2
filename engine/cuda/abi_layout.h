// The layout of every struct shared between host and device code (kernel parameters passed by
// value): size, alignment and each field's offset, as one list both compilers evaluate. The GPU
// test CudaAbi.HostAndDeviceLayoutsAgree compares the host's numbers with the ones the device
// writes (abi_probe.cu): a mismatch (a `long`, a padding difference between the host compiler
// and nvcc) fails there instead of corrupting a launch (docs/CUDA.md "One ABI").
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/decode_fused.h"
#include "cuda/expert_gemm.h"
#include "cuda/expert_mxfp4.h"
#include "cuda/router.h"

// X(text, value) for each number.
#define NEURAL_ABI_STRUCT(X, T) X(#T " size", sizeof(T)) X(#T " align", alignof(T))
#define NEURAL_ABI_FIELD(X, T, f) X(#T "." #f, offsetof(T, f))
#define NEURAL_ABI_LAYOUT(X)                                      \
    NEURAL_ABI_STRUCT(X, neural::cuda::ExpertShape)               \
    NEURAL_ABI_FIELD(X, neural::cuda::ExpertShape, hidden)        \
    NEURAL_ABI_FIELD(X, neural::cuda::ExpertShape, intermediate)  \
    NEURAL_ABI_FIELD(X, neural::cuda::ExpertShape, k)             \
    NEURAL_ABI_FIELD(X, neural::cuda::ExpertShape, experts)       \
    NEURAL_ABI_FIELD(X, neural::cuda::ExpertShape, limit)         \
    NEURAL_ABI_FIELD(X, neural::cuda::ExpertShape, alpha)         \
    NEURAL_ABI_FIELD(X, neural::cuda::ExpertShape, half_operands) \
    NEURAL_ABI_FIELD(X, neural::cuda::ExpertShape, in_exp)        \
    NEURAL_ABI_FIELD(X, neural::cuda::ExpertShape, act_exp)       \
    NEURAL_ABI_STRUCT(X, neural::cuda::ExpertJob)                 \
    NEURAL_ABI_FIELD(X, neural::cuda::ExpertJob, record)          \
    NEURAL_ABI_FIELD(X, neural::cuda::ExpertJob, expert)          \
    NEURAL_ABI_FIELD(X, neural::cuda::ExpertJob, entry0)          \
    NEURAL_ABI_FIELD(X, neural::cuda::ExpertJob, count)           \
    NEURAL_ABI_FIELD(X, neural::cuda::ExpertJob, row0)            \
    NEURAL_ABI_STRUCT(X, neural::cuda::ExpertGroup)               \
    NEURAL_ABI_FIELD(X, neural::cuda::ExpertGroup, job)           \
    NEURAL_ABI_FIELD(X, neural::cuda::ExpertGroup, tiles)         \
    NEURAL_ABI_FIELD(X, neural::cuda::ExpertGroup, jobs)          \
    NEURAL_ABI_STRUCT(X, neural::cuda::RouterOut)                 \
    NEURAL_ABI_FIELD(X, neural::cuda::RouterOut, sel)             \
    NEURAL_ABI_FIELD(X, neural::cuda::RouterOut, gate)            \
    NEURAL_ABI_FIELD(X, neural::cuda::RouterOut, slot)            \
    NEURAL_ABI_STRUCT(X, neural::cuda::NormQkvRope)               \
    NEURAL_ABI_FIELD(X, neural::cuda::NormQkvRope, x)             \
    NEURAL_ABI_FIELD(X, neural::cuda::NormQkvRope, norm_w)        \
    NEURAL_ABI_FIELD(X, neural::cuda::NormQkvRope, eps)           \
    NEURAL_ABI_FIELD(X, neural::cuda::NormQkvRope, hidden)        \
    NEURAL_ABI_FIELD(X, neural::cuda::NormQkvRope, qkv_w)         \
    NEURAL_ABI_FIELD(X, neural::cuda::NormQkvRope, qkv_b)         \
    NEURAL_ABI_FIELD(X, neural::cuda::NormQkvRope, q_heads)       \
    NEURAL_ABI_FIELD(X, neural::cuda::NormQkvRope, kv_heads)      \
    NEURAL_ABI_FIELD(X, neural::cuda::NormQkvRope, head_dim)      \
    NEURAL_ABI_FIELD(X, neural::cuda::NormQkvRope, inv_freq)      \
    NEURAL_ABI_FIELD(X, neural::cuda::NormQkvRope, concentration) \
    NEURAL_ABI_FIELD(X, neural::cuda::NormQkvRope, pos)           \
    NEURAL_ABI_FIELD(X, neural::cuda::NormQkvRope, k_cache)       \
    NEURAL_ABI_FIELD(X, neural::cuda::NormQkvRope, v_cache)       \
    NEURAL_ABI_FIELD(X, neural::cuda::NormQkvRope, ring)          \
    NEURAL_ABI_FIELD(X, neural::cuda::NormQkvRope, qkv)           \
    NEURAL_ABI_STRUCT(X, neural::cuda::OprojRoute)                \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, o_w)            \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, o_b)            \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, attn)           \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, attn_width)     \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, x)              \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, hidden)         \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, norm_w)         \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, eps)            \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, h)              \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, h_mirror)       \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, router_w)       \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, router_b)       \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, experts)        \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, k)              \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, router_logits)  \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, slot_table)     \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, device_out)     \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, host_out)       \
    NEURAL_ABI_FIELD(X, neural::cuda::OprojRoute, counter)        \
    X("std::size_t size", sizeof(std::size_t))                    \
    X("pointer size", sizeof(void*))

namespace neural::cuda {

#define NEURAL_ABI_COUNT(text, value) +1
inline constexpr int kAbiLayoutCount = 0 NEURAL_ABI_LAYOUT(NEURAL_ABI_COUNT);
#undef NEURAL_ABI_COUNT

}  // namespace neural::cuda
