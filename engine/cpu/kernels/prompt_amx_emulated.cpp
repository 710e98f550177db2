// The AMX int8 prompt kernel's code (prompt_amx.inl) on emulated tiles (amx_tiles.inl), so that
// the AMX variant's layouts, strides and pipelining are tested bit for bit against the scalar
// reference on CPUs without AMX. Compiled with the AVX512_VNNI flags (the decode and the
// post-processing are AVX-512 code); never chosen by the runtime (prompt_kernel.h
// "amx-emulated").
#include <immintrin.h>

#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cpu/kernels/prompt_impl.h"

#define NEURAL_AMX_EMULATED 1

namespace neural::cpu::prompt_detail {
namespace {

using kernel_detail::kE8M0Table;
using kernel_detail::kMaxBlocks;
using kernel_detail::RecordRef;

#include "cpu/kernels/amx_tiles.inl"
#include "cpu/kernels/prompt_decode16.inl"
#include "cpu/kernels/prompt_amx.inl"
#include "cpu/kernels/prompt_tasks.inl"

constexpr PromptOps kOps = make_prompt_ops("amx-emulated");

}  // namespace

const PromptOps* prompt_ops_amx_emulated() { return &kOps; }

}  // namespace neural::cpu::prompt_detail
