// Internal to the dense kernels: the job the dispatcher (dense_kernel.cpp, baseline ISA) hands
// to the per-ISA task functions (dense_scalar.cpp, dense_avx2.cpp, dense_avx512.cpp,
// dense_avx512bf16.cpp, dense_amx*.cpp, dense_tile_*.cpp, each compiled with its own flags). As for the expert kernels
// (expert_kernel_impl.h), only plain data crosses and every function the ISA files
// share is `static inline` or lives in the .inl they include inside an anonymous namespace.
#pragma once

#include <cstdint>
#include <cstring>

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
    // The same operand as fp32 planes, for the tile-order SIMD variants (dense_tile.inl; null
    // for the others): per token and 32-column chunk 64 floats, the high parts of the chunk's
    // even columns, of its odd columns, then the low parts' even and odd columns (kPlaneFloats
    // per token), so that each fma takes a token's value as a broadcast from memory.
    const float* planes;
    std::int64_t tokens;
    // Per worker (the team task's `worker`) scratch_dwords dwords where the AMX and tile-order
    // variants repack a group of rows (null for the others). Allocated by the baseline
    // dispatcher: an ISA file instantiates no std::vector (the linker keeps one copy of an
    // inline function, which baseline code could then run).
    std::uint32_t* scratch;
    std::int64_t scratch_dwords;
};

// Dwords of one worker's repacked rows (Job::scratch): two B tiles of 256 dwords per chunk.
static inline std::int64_t repack_dwords(std::int64_t padded) { return padded / 32 * 512; }

// Every NaN result of the tile-order variants (the AMX ones included) is stored as this one
// (which NaN an operation returns differs between the tiles, SIMD and scalar code).
static inline float canonical_nan() {
    const std::uint32_t bits = 0x7FC00000u;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// Floats of a token's operand planes (Job::planes): two per padded column.
static inline std::int64_t plane_floats(std::int64_t padded) { return 2 * padded; }

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
// The AMX variant's arithmetic (dense_kernel.h "tile order") without tiles: the scalar reference
// (dense_tile_scalar.cpp) and the AVX2 and AVX-512F variants (dense_tile_avx2.cpp,
// dense_tile_avx512.cpp, which read Job::planes).
TaskFn task_tile_scalar();
TaskFn task_tile_avx2();    // nullptr when this build has no AVX2 variant
TaskFn task_tile_avx512();  // nullptr when this build has no AVX-512 variant

}  // namespace neural::cpu::dense_detail
