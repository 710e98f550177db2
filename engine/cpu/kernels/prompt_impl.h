// Internal to the int8 prompt kernels (prompt_kernel.h): the plain-data job the dispatcher
// (prompt_kernel.cpp, baseline ISA) hands to the per-ISA task functions (prompt_scalar.cpp,
// prompt_vnni.cpp, each compiled with its own flags). As in expert_kernel_impl.h, only trivially
// copyable data crosses, and the helpers here are `static inline` (one private copy per file):
// an ISA file must never share an inline function with a baseline file.
//
// Q8 operands: per 32-element block, 32 bytes q + 128 (q in [-127, 127], so 1..255 as unsigned
// bytes) in the kernels' operand order and one fp32 scale d (value ~ d * q). Operand order within
// a block: position p = 8m + 4h + i holds element 8m + 2i + h (m < 4, h < 2, i < 4): the order in
// which the low and high nibbles of 4 code bytes land in the 4-byte groups vpdpbusd multiplies.
#pragma once

#include <math.h>

#include <bit>
#include <cstdint>
#include <cstring>

#include "cpu/kernels/expert_kernel_impl.h"

namespace neural::cpu::prompt_detail {

using kernel_detail::ExpertArgs;

constexpr int kSubRows = 16;      // rows of one register tile (one zmm of int32 lanes)
constexpr int kGateUpRows = 64;   // gate_up rows per task: 32 gate/up pairs = one Q8 block
constexpr int kDownRows = 32;     // down rows per task
constexpr int kBlockBytes = 640;  // decoded 16-row block: 8 x 64 int8 codes, 16 fp32, 16 int32

// E2M1 code -> 2 x value, an integer (docs/MODEL.md "MXFP4"); the 1/2 goes into the scale.
struct ByteTable16 {
    std::int8_t v[16];
};
alignas(16) inline constexpr ByteTable16 kE2M1x2 = {
    {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}};

// Element of a block at operand position p (see the top).
static inline int operand_element(int p) { return 8 * (p >> 3) + 2 * (p & 3) + ((p >> 2) & 1); }

static inline float bf16_value(const std::uint8_t* p, std::int64_t i) {
    if (p == nullptr) return 0.0f;
    std::uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    const std::uint32_t bits = static_cast<std::uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// docs/MODEL.md "Experts": the same expression as the fp32 kernels (expert_tasks.inl).
static inline float swiglu_value(float g, float u, float limit, float alpha) {
    g = (limit < g) ? limit : g;
    u = (u < -limit) ? -limit : ((limit < u) ? limit : u);
    const float glu = g / (1.0f + ::expf(-alpha * g));
    return glu * (u + 1.0f);
}

// One block of 32 fp32 values to Q8: d = amax / 127, q = round-to-nearest-even(v * 127 / amax).
// An all-zero block gets d = 0 and q = 0; a block with a NaN or infinity gets d = NaN (its dot
// products become NaN, as the fp32 path's would) and q = 0. Plain scalar code: every variant
// quantizes to the same bytes (C library calls only: no inline function shared across ISA files).
static inline void quantize_block(const float* v, std::uint8_t* q, float* d) {
    float amax = 0.0f;
    bool finite = true;
    for (int k = 0; k < 32; ++k) {
        const float a = ::fabsf(v[k]);
        finite = finite && a <= 3.40282347e38f;  // false for NaN and infinities
        amax = a > amax ? a : amax;
    }
    if (!finite || amax == 0.0f) {
        std::memset(q, 128, 32);
        *d = finite ? 0.0f : std::bit_cast<float>(0x7FC00000u);
        return;
    }
    const float inv = 127.0f / amax;
    for (int p = 0; p < 32; ++p) {
        const float r = ::nearbyintf(v[operand_element(p)] * inv);  // |r| <= 127
        q[p] = static_cast<std::uint8_t>(static_cast<int>(r) + 128);
    }
    *d = amax / 127.0f;
}

// The Q8 rows a GEMM task reads: row i of the task's list is q + rows[i] / div * q_stride (and
// its scales d + rows[i] / div * d_stride): token rows for gate_up (rows = slots t * K + k,
// div = K), slot rows for down (div = 1).
struct Operands {
    const std::uint8_t* q;
    const float* d;
    std::int64_t q_stride, d_stride;
    const std::int32_t* rows;
    int div;
};

// One forward pass's MoE part for a block of T tokens, as four team phases: quantize h, gate_up
// (+ SwiGLU + Q8 of the activations), down, combine (the combine is baseline code).
struct PromptJob {
    const ExpertArgs* experts;       // [n_used], biggest token count first
    const std::int32_t* slot_begin;  // [n_used + 1]: each expert's slots in `slots`
    const std::int32_t* slots;       // t * K + k, grouped by expert, ascending within one
    int n_used, K;
    std::int64_t tokens, hidden, inter;
    float limit, alpha;
    const float* h;              // [T][H] normalized hidden states
    std::uint8_t* hq;            // [T][H] Q8 of h
    float* hd;                   // [T][H / 32]
    std::uint8_t* aq;            // [T * K][I] Q8 of the SwiGLU activations
    float* ad;                   // [T * K][I / 32]
    float* y;                    // [T * K][H] expert outputs (bias included)
    const float* gate;           // [T][K] router weights
    float* x;                    // [T][H] residual stream
    std::int64_t gate_up_tiles;  // 2I / 64 per expert
    std::int64_t down_tiles;     // H / 32 per expert
    std::uint8_t* scratch;       // per worker: scratch_bytes, 64-byte aligned
    std::int64_t scratch_bytes;
    std::int64_t decode_bytes;  // the part of a worker's scratch for one decoded 16-row tile
};

using TaskFn = void (*)(void* ctx, std::int64_t task, std::int32_t worker);

struct PromptOps {
    const char* name;
    TaskFn quantize;  // task = token
    TaskFn gate_up;   // task = (expert, 64-row tile)
    TaskFn down;      // task = (expert, 32-row tile)
    // out[i * ld + r] = sum over blocks of the int8 dot product of row row0 + r of projection p
    // with operand row i (r < 16, i < n): the GEMM itself, for the tests.
    void (*gemm16)(const ExpertArgs& e, int p, std::int64_t row0, const Operands& x, int n,
                   std::uint8_t* scratch, float* out, std::int64_t ld);
};

const PromptOps* prompt_ops_scalar();
const PromptOps* prompt_ops_vnni();  // nullptr when this build has no AVX512_VNNI variant

}  // namespace neural::cpu::prompt_detail
