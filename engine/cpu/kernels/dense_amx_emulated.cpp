// The AMX-BF16 dense kernel (dense_amx.inl) on emulated tiles (amx_tiles.inl), so that CPUs
// without AMX test its repacking, strides and padding against the scalar reference. Baseline
// code; never chosen by the runtime (dense_kernel.h "amx-emulated").
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cpu/kernels/dense_impl.h"

#define NEURAL_AMX_EMULATED 1

namespace neural::cpu::dense_detail {
namespace {

#include "cpu/kernels/amx_tiles.inl"
#include "cpu/kernels/dense_amx.inl"

}  // namespace

TaskFn task_amx_emulated() { return &dense_amx_task; }

}  // namespace neural::cpu::dense_detail
