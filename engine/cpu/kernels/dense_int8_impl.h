// Internal to the int8 dense kernels: the job the dispatcher (dense_int8_kernel.cpp, baseline
// ISA) hands to the per-ISA task functions (dense_int8_scalar.cpp, dense_int8_avx2.cpp,
// dense_int8_avx512vnni.cpp, each compiled with its own flags). As for the bf16 kernels
// (dense_impl.h), only plain data crosses, and what the ISA files share is `static inline` or
// lives in the .inl they include inside an anonymous namespace.
#pragma once

#include <cstdint>

#include "cpu/kernels/bf16_at.h"

namespace neural::cpu::int8_detail {

using kernel_detail::bf16_at;

constexpr int kMaxOutputs = 4;

struct Output {
    const std::uint8_t* w;     // group 0 of the matrix (Int8Matrix layout)
    const std::uint8_t* bias;  // bf16 [rows] or null
    float* y;
    std::int64_t rows;
    std::int64_t y_stride;
    std::int64_t group_bytes;
    std::int64_t groups_per_task;
    std::int64_t first_task;  // tasks [first_task, first_task + ceil(groups / groups_per_task))
    std::int64_t groups;
};

// Per token: `padded` quantized bytes, then (16-byte aligned) one 16-float vector per 64-column
// chunk with the chunk's two block scales (lanes 0-7 the first block's dx, 8-15 the second's).
struct Job {
    int n_outputs;
    Output out[kMaxOutputs];
    std::int64_t padded;  // columns rounded up to 64
    std::int64_t chunks;  // padded / 64
    const std::int8_t* xq;
    const float* xd;
    std::int64_t xq_stride;  // bytes between tokens in xq
    std::int64_t xd_stride;  // floats between tokens in xd
    std::int64_t tokens;
};

using TaskFn = void (*)(void* ctx, std::int64_t task, std::int32_t worker);

TaskFn task_scalar();
TaskFn task_avx2();        // nullptr when this build has no AVX2 variant
TaskFn task_avx512vnni();  // nullptr when this build (compiler) has no AVX512_VNNI variant

}  // namespace neural::cpu::int8_detail
