// Internal to the int8 prompt kernels (prompt_kernel.h): the plain-data job the dispatcher
// (prompt_kernel.cpp, baseline ISA) hands to the per-ISA task functions (prompt_scalar.cpp,
// prompt_vnni.cpp, each compiled with its own flags). As in expert_kernel_impl.h, only trivially
// copyable data crosses, and the helpers here are `static inline` (one private copy per file):
// an ISA file must never share an inline function with a baseline file.
//
// Q8 operands (multi-pass): per 32-element block, kPasses x 32 bytes q_j + 128 (pass j, each
// in the kernels' operand order) and one fp32 step d. Pass 0 is the usual 8-bit quantization:
// q_0 = round(v / s), s = max|v| / 127, q_0 in [-127, 127]; every later pass quantizes what is
// left with a 256 times finer step (q_1 with d = s / 256, q_2 with d / 256), in [-128, 127]:
//   v ~ d (256 q_0 + q_1) + (d / 256) q_2,
// off by at most half the last step (a whole step where that pass clamps): ~1 / 65000 of the
// block's max|v| for two passes, ~1 / 1.7e7 (fp32's own precision) for three, against 1 / 254 for
// one. The weights (2 x E2M1) are exact integers, so this is the only rounding before the fp32
// sums. The GEMMs take every pass's int32 dot product against the same decoded weights; the
// first two combine as the integer 256 s_0 + s_1, exact and below 2^24 (|s_0| <= 32 x 127 x 12,
// |s_1| <= 32 x 128 x 12), hence exact as fp32; the third is one more fp32 fma per block.
// Operand order within a block: position p = 8m + 4h + i holds element 8m + 2i + h (m < 4, h < 2,
// i < 4): the order in which the low and high nibbles of 4 code bytes land in the 4-byte groups
// vpdpbusd multiplies.
#pragma once

#include <math.h>

#include <bit>
#include <cstdint>
#include <cstring>

#include "cpu/kernels/bf16_at.h"
#include "cpu/kernels/expert_kernel_impl.h"

namespace neural::cpu::prompt_detail {

using kernel_detail::bf16_at;
using kernel_detail::ExpertArgs;

constexpr int kSubRows = 16;      // rows of one register tile (one zmm of int32 lanes)
constexpr int kGateUpRows = 64;   // gate_up rows per task: 32 gate/up pairs = one Q8 block
constexpr int kDownRows = 32;     // down rows per task
constexpr int kBlockBytes = 640;  // decoded 16-row block: 8 x 64 int8 codes, 16 fp32, 16 int32
// Q8 passes per activation block (see the top): two, for the speed and precision trade measured
// in docs/KERNELS.md "Prompt path (int8)"; three reach fp32's precision at 1.5x the GEMM work.
constexpr int kPasses = 2;
static_assert(kPasses == 2 || kPasses == 3);
constexpr int kQ8Bytes = 32 * kPasses;  // Q8 bytes per block of 32 activations

// E2M1 code -> 2 x value, an integer (docs/MODEL.md "MXFP4"); the 1/2 goes into the scale.
struct ByteTable16 {
    std::int8_t v[16];
};
alignas(16) inline constexpr ByteTable16 kE2M1x2 = {
    {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}};

// Element of a block at operand position p (see the top).
static inline int operand_element(int p) { return 8 * (p >> 3) + 2 * (p & 3) + ((p >> 2) & 1); }

// docs/MODEL.md "Experts": the same expression as the fp32 kernels (expert_tasks.inl).
static inline float swiglu_value(float g, float u, float limit, float alpha) {
    g = (limit < g) ? limit : g;
    u = (u < -limit) ? -limit : ((limit < u) ? limit : u);
    const float glu = g / (1.0f + exp_poly(-alpha * g));  // not the C library's: exp_poly.h
    return glu * (u + 1.0f);
}

// One block of 32 fp32 values to multi-pass Q8 (q[kQ8Bytes], see the top): with s = amax / 127,
// q_0 = round-to-nearest-even(v * 127 / amax); then per pass the residual (exact in double: the
// terms are multiples of a fraction of s's ulp, within 2^53 of it) rounded to that pass's step,
// +128 carried into the pass before, clamped to [-128, 127]; d = s / 256. An all-zero block
// gets d = 0 and q = 0; a block with a NaN or infinity gets d = NaN (its dot products become
// NaN, as the fp32 path's would) and q = 0. Plain scalar code whose every operation is exact or
// one IEEE rounding, with no multiply-add a compiler could contract differently: every variant
// quantizes to the same bytes (C library calls only: no inline function shared across ISA
// files).
static inline void quantize_block(const float* v, std::uint8_t* q, float* d) {
    float amax = 0.0f;
    bool finite = true;
    for (int k = 0; k < 32; ++k) {
        const float a = ::fabsf(v[k]);
        finite = finite && a <= 3.40282347e38f;  // false for NaN and infinities
        amax = a > amax ? a : amax;
    }
    if (!finite || amax == 0.0f) {
        std::memset(q, 128, kQ8Bytes);
        *d = finite ? 0.0f : std::bit_cast<float>(0x7FC00000u);
        return;
    }
    const float inv = 127.0f / amax;
    const float s = amax / 127.0f;
    for (int p = 0; p < 32; ++p) {
        const float x = v[operand_element(p)];
        int qv[kPasses];
        qv[0] = static_cast<int>(::nearbyintf(x * inv));  // |q_0| <= 127
        double r = static_cast<double>(x) - static_cast<double>(s) * qv[0];
        double step = static_cast<double>(s);
        for (int j = 1; j < kPasses; ++j) {
            const double inv_step = 256.0 / step;
            step *= 1.0 / 256.0;
            int qj = static_cast<int>(::nearbyint(r * inv_step));
            // A residual of half the previous step (+128) carries into the previous pass where
            // that has room (the same value), else it clamps.
            if (qj > 127 && qv[j - 1] < 127) {
                qv[j - 1] += 1;
                r -= 256.0 * step;
                qj -= 256;
            }
            qj = qj < -128 ? -128 : (qj > 127 ? 127 : qj);
            qv[j] = qj;
            r -= step * qj;
        }
        for (int j = 0; j < kPasses; ++j) q[32 * j + p] = static_cast<std::uint8_t>(qv[j] + 128);
    }
    *d = s * (1.0f / 256.0f);
}

// The Q8 rows a GEMM task reads, one after the other: row i is q + i * q_stride, its scales
// d + i * d_stride. The job keeps every expert's operand rows contiguous (PromptJob), so the AMX
// variant loads a tile of them with one stride; at least kOperandPad readable rows follow the
// last one (their results are never used).
struct Operands {
    const std::uint8_t* q;
    const float* d;
    std::int64_t q_stride, d_stride;
};
constexpr int kOperandPad = 16;

// One forward pass's MoE part for a block of T tokens, as four team phases: quantize h, gate_up
// (+ SwiGLU + Q8 of the activations), down, combine (the combine is baseline code).
struct PromptJob {
    const ExpertArgs* experts;       // [n_used], biggest token count first
    const std::int32_t* slot_begin;  // [n_used + 1]: each expert's rows in `slots`
    const std::int32_t* slots;       // row g -> slot t * K + k, grouped by expert, ascending
    const std::int32_t* row_of;      // slot t * K + k -> its row g (the inverse of `slots`)
    int n_used, K;
    std::int64_t tokens, hidden, inter;
    float limit, alpha;
    const float* h;  // [T][H] normalized hidden states
    // The GEMM operands by row g (grouped by expert, `slots`), kOperandPad rows of padding after:
    std::uint8_t* hq;            // [T * K][H / 32][kQ8Bytes] Q8 of h[slots[g] / K]
    float* hd;                   // [T * K][H / 32]
    std::uint8_t* aq;            // [T * K][I / 32][kQ8Bytes] Q8 of the SwiGLU activations
    float* ad;                   // [T * K][I / 32]
    float* y;                    // [T * K][H] expert outputs by slot (bias included)
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
    TaskFn quantize;  // task = token: its Q8 into the rows of its K slots
    TaskFn gate_up;   // task = (expert, 64-row tile)
    TaskFn down;      // task = (expert, 32-row tile)
    // out[i * ld + r] = sum over blocks of the int8 dot product of row row0 + r of projection p
    // with operand row i (r < 16, i < n): the GEMM itself, for the tests.
    void (*gemm16)(const ExpertArgs& e, int p, std::int64_t row0, const Operands& x, int n,
                   std::uint8_t* scratch, float* out, std::int64_t ld);
};

const PromptOps* prompt_ops_scalar();
const PromptOps* prompt_ops_vnni();  // nullptr when this build has no AVX512_VNNI variant
const PromptOps* prompt_ops_amx();   // nullptr when this build has no AMX variant
// The AMX variant's code on tiles emulated in plain C++ (tests on CPUs without AMX); nullptr
// where the AVX512_VNNI variant is missing.
const PromptOps* prompt_ops_amx_emulated();

}  // namespace neural::cpu::prompt_detail
