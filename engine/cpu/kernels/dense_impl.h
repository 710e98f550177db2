// Internal to the dense kernels: the job the dispatcher (dense_kernel.cpp, baseline ISA) hands
// to the per-ISA task functions (dense_scalar.cpp, dense_avx2.cpp, dense_avx512.cpp,
// dense_avx512bf16.cpp, each compiled with its own flags). As for the expert kernels
// (expert_kernel_impl.h), only plain data crosses and every function the ISA files
// share is `static inline` or lives in the .inl they include inside an anonymous namespace.
#pragma once

#include <cstdint>

#include "cpu/kernels/bf16_at.h"

namespace neural::cpu::dense_detail {

using kernel_detail::bf16_at;

constexpr int kMaxOutputs = 4;
// Rows of a task: a multiple of the widest row tile (4), at most kMaxRowsPerTask.
constexpr std::int64_t kMaxRowsPerTask = 64;

struct Output {
    const std::uint8_t* w;     // bf16 [rows, cols]
    const std::uint8_t* bias;  // bf16 [rows] or null
    float* y;
    std::int64_t rows;
    std::int64_t y_stride;
    std::int64_t rows_per_task;
    std::int64_t first_task;  // tasks [first_task, first_task + ceil(rows / rows_per_task))
};

struct Job {
    int n_outputs;
    Output out[kMaxOutputs];
    std::int64_t cols;
    std::int64_t padded;     // cols rounded up to 32
    const std::uint16_t* x;  // [tokens][hi, lo][padded] bf16, zero past cols
    std::int64_t tokens;
};

// The rows [r0, r1) of output `out` that task `task` of a job computes (Output::first_task,
// rows_per_task): what every variant's task body starts from.
struct TaskRows {
    const Output* out;
    std::int64_t r0, r1;
};
static inline TaskRows task_rows(const Job& job, std::int64_t task) {
    int o = 0;
    while (o + 1 < job.n_outputs && job.out[o + 1].first_task <= task) ++o;
    const Output& out = job.out[o];
    const std::int64_t r0 = (task - out.first_task) * out.rows_per_task;
    const std::int64_t r1 = r0 + out.rows_per_task < out.rows ? r0 + out.rows_per_task : out.rows;
    return {&out, r0, r1};
}

// Zero operand rows after the last token of a call where the prompt variant is AMX (its token
// tiles read whole tiles: dense_amx.inl).
constexpr std::int64_t kAmxTokenPad = 32;

using TaskFn = void (*)(void* ctx, std::int64_t task, std::int32_t worker);

TaskFn task_scalar();
TaskFn task_avx2();          // nullptr when this build has no AVX2 variant
TaskFn task_avx512();        // nullptr when this build has no AVX-512 variant
TaskFn task_avx512bf16();    // nullptr when this build (compiler) has no AVX512_BF16 variant
TaskFn task_amx_bf16();      // nullptr when this build (compiler) has no AMX-BF16 variant
TaskFn task_amx_emulated();  // the AMX-BF16 code on emulated tiles (tests)

}  // namespace neural::cpu::dense_detail
