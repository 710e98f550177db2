// AMX int8 prompt kernel (compiled with -mamx-tile -mamx-int8 on top of the AVX512_VNNI flags;
// only called after cpu_features() reported AMX-INT8 with AVX512_VNNI, the OS's tile state and,
// on Linux, this process's permission for it). The GEMM is prompt_amx.inl on the hardware
// tiles; every tile is configured and released within one GEMM call, so no tile state outlives
// a task.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "cpu/kernels/prompt_impl.h"

namespace neural::cpu::prompt_detail {
namespace {

using kernel_detail::kE8M0Table;
using kernel_detail::kMaxBlocks;
using kernel_detail::RecordRef;

#include "cpu/kernels/amx_tiles.inl"
#include "cpu/kernels/prompt_decode16.inl"
#include "cpu/kernels/prompt_amx.inl"
#include "cpu/kernels/prompt_tasks.inl"

constexpr PromptOps kOps = make_prompt_ops("amx-int8");

}  // namespace

const PromptOps* prompt_ops_amx() { return &kOps; }

}  // namespace neural::cpu::prompt_detail
