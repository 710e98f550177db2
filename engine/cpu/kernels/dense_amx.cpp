// AMX-BF16 dense kernel for prompt blocks (compiled with -mamx-tile -mamx-bf16 on top of the
// AVX-512 flags; only called after cpu_features() reported AMX-BF16 with AVX512_BF16, the OS's
// tile state and, on Linux, this process's permission for it): dense_amx.inl on the hardware
// tiles, its weights repacked with AVX-512 (dense_repack_avx512.inl). The tiles are configured
// and released inside each task.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu/kernels/dense_impl.h"

namespace neural::cpu::dense_detail {
namespace {

#include "cpu/kernels/amx_tiles.inl"
#include "cpu/kernels/dense_repack_avx512.inl"
#define NEURAL_DENSE_REPACK_AVX512 1
#include "cpu/kernels/dense_amx.inl"

}  // namespace

TaskFn task_amx_bf16() { return &dense_amx_task; }

}  // namespace neural::cpu::dense_detail
