// Internal to the bf16 expert GEMM (expert_bf16.h): the plain-data calls the dispatcher
// (expert_bf16.cpp, baseline ISA) hands to the per-ISA files and the decoding they share. As in
// expert_kernel_impl.h, the helpers are `static inline` (one private copy per file): an ISA
// file must never share an inline function with a baseline file.
//
// Decoded weights, kTileBytes per 16 rows and 32-column block, in one of two layouts:
//  - rows (the AMX A operand): 16 lines of 64 bytes, line n = row n's 32 bf16 weights;
//  - pairs (the AVX-512 and AVX2 variants, lanes = rows): 16 lines of 16 dwords, dword n of line j =
//    row n's columns 2j (low half) and 2j + 1 (high half), so a line gives the 16 rows' even
//    (dword << 16) and odd (dword & 0xFFFF0000) weights as fp32 vectors.
// Weights are bf16 bits with subnormals already zero.
//
// Prepared activations (bf16_expert_prepare), n tokens of cols = 32G bf16 values, per variant:
//  - scalar: the n rows of bf16 bits, cols apart (n * cols * 2 bytes);
//  - amx_bf16, amx_emulated (the B operand): per 16 tokens and 32-column block, 16 lines of 16
//    dwords, dword i of line j = token i's columns 2j and 2j + 1; tokens past n are zero
//    (ceil(n / 16) * G * kTileBytes bytes);
//  - avx512, avx2: fp32 planes, per token the even columns then the odd ones (cols / 2 each), so
//    that each fma takes its token's value as a broadcast (n * cols * 4 bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "cpu/kernels/expert_kernel_impl.h"

namespace neural::cpu::bf16_detail {

using kernel_detail::kE2M1Table;
using kernel_detail::kE8M0Table;
using kernel_detail::kMaxBlocks;
using kernel_detail::RecordRef;

constexpr int kRows = 16;            // rows per decoded group (a tile's 16 lines, a zmm's lanes)
constexpr int kTileBytes = 16 * 64;  // one decoded 32-column block of 16 rows

struct Gemm {
    RecordRef rec;
    int p;                    // 0 = gate_up, 1 = down
    std::int64_t row0, rows;  // rows row0 .. row0 + rows - 1, multiples of 16
    const std::uint8_t* x;    // n tokens' prepared activations, the variant's layout (above)
    int n;
    float* out;  // out[i * ld + r]
    std::int64_t ld;
    std::uint8_t* weights;  // 4 * G * kTileBytes, 64-byte aligned: decoded groups of 16 rows
    float* c;               // 256 floats, 64-byte aligned: one C tile
};

// n tokens (x + i * ldx, 32G bf16 values each) into the variant's prepared layout at `out`
// (64-byte aligned, the layout's bytes).
struct Prepare {
    const std::uint16_t* x;
    std::int64_t ldx;
    int n;
    int G;
    std::uint8_t* out;
};

using GemmFn = void (*)(const Gemm& g);
using PrepareFn = void (*)(const Prepare& p);

struct Variant {
    GemmFn gemm = nullptr;  // nullptr where this build lacks the variant
    PrepareFn prepare = nullptr;
};

// Every NaN result is stored as this one (which NaN an operation returns differs between the
// tiles, SIMD and scalar arithmetic; the variants' outputs stay bit-identical).
constexpr std::uint32_t kCanonicalNan = 0x7FC00000u;
static inline float canonical_nan() {
    float f;
    std::memcpy(&f, &kCanonicalNan, 4);
    return f;
}

// A weight as bf16 bits: E2M1 x 2^(s - 127) in fp32 (exact: two significant bits), whose upper
// half is the value for every normal result; subnormal results (and zeros) become +-0, as the
// tiles read them.
static inline std::uint16_t weight_bits(int code, std::uint8_t scale) {
    const float v = kE2M1Table.v[code] * kE8M0Table.v[scale];
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    if ((bits & 0x7F800000u) == 0) bits &= 0x80000000u;
    return static_cast<std::uint16_t>(bits >> 16);
}

// Rows row0..row0+15 of projection p, all G blocks, into `out` in the rows layout. Plain scalar
// code (a table lookup, one exact multiply, bit operations).
static inline void decode_rows_scalar(const RecordRef& rec, int p, std::int64_t row0,
                                      std::uint8_t* out) {
    const int G = rec.blocks[p];
    const std::uint64_t stride = static_cast<std::uint64_t>(G) * 16;
    std::uint8_t sbuf[kMaxBlocks + 32];
    for (int n = 0; n < kRows; ++n) {
        const std::uint8_t* codes =
            rec.code_base[p] + static_cast<std::uint64_t>(row0 + n) * stride;
        const std::uint8_t* scales = kernel_detail::record_row_scales(rec, p, row0 + n, sbuf);
        for (int b = 0; b < G; ++b) {
            std::uint8_t* line = out + static_cast<std::int64_t>(b) * kTileBytes + 64 * n;
            for (int k = 0; k < 32; ++k) {
                const std::uint8_t byte = codes[16 * b + k / 2];
                const std::uint16_t w =
                    weight_bits((k & 1) ? (byte >> 4) : (byte & 0x0F), scales[b]);
                std::memcpy(line + 2 * k, &w, 2);
            }
        }
    }
}

// Tokens i0 .. i0 + 15 (those below n; zeros after) into the AMX layout, all G blocks (plain
// scalar code: the emulated variant's).
static inline void pack_activations(const std::uint16_t* x, std::int64_t ldx, int n, int i0, int G,
                                    std::uint8_t* out) {
    std::memset(out, 0, static_cast<std::size_t>(G) * kTileBytes);
    const int m = n - i0 < 16 ? n - i0 : 16;
    for (int i = 0; i < m; ++i) {
        const std::uint16_t* row = x + (i0 + i) * ldx;
        for (int b = 0; b < G; ++b) {
            std::uint8_t* t = out + static_cast<std::int64_t>(b) * kTileBytes + 4 * i;
            for (int j = 0; j < 16; ++j) std::memcpy(t + 64 * j, row + 32 * b + 2 * j, 4);
        }
    }
}

Variant variant_avx2();          // {} where this build has no AVX2 variant
Variant variant_avx512();        // {} where this build has no AVX-512 variant
Variant variant_amx();           // {} where this build has no AMX-BF16 variant
Variant variant_amx_emulated();  // the AMX code on emulated tiles (baseline; always present)

}  // namespace neural::cpu::bf16_detail
