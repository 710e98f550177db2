// Internal to the expert kernels: the plain-data job descriptions the dispatcher
// (expert_kernel.cpp, baseline ISA) hands to the per-ISA task functions (expert_scalar.cpp,
// expert_avx2.cpp, expert_avx512.cpp, each compiled with its own flags). Only trivially
// copyable data crosses: the ISA files must not call inline functions shared with baseline
// files (the linker may keep any one copy of an inline function, and an AVX-512 copy would then
// run on a CPU without AVX-512), so they use nothing of expert_record.h but this header, whose
// only functions are `static inline` (one private copy per file) and whose tables are constant
// data.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "cpu/kernels/exp_poly.h"

#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#include <emmintrin.h>
#endif

namespace neural::cpu {
class ExpertRecordView;
}

namespace neural::cpu::kernel_detail {

constexpr int kMaxBlocksForDecode = 1024;  // = kMaxBlocks below (G <= 1024)

// Lookup tables as plain constant data (no code, so safe to share across ISA files).
struct FloatTable16 {
    float v[16];
};
struct FloatTable256 {
    float v[256];
};
// E2M1 code -> value (docs/MODEL.md "MXFP4"): sign bit 3, then 0, .5, 1, 1.5, 2, 3, 4, 6.
alignas(64) inline constexpr FloatTable16 kE2M1Table = {{+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f,
                                                         +4.0f, +6.0f, -0.0f, -0.5f, -1.0f, -1.5f,
                                                         -2.0f, -3.0f, -4.0f, -6.0f}};
// E8M0 byte s -> 2^(s-127) as an exact float (s = 0: the subnormal 2^-127; s = 255: NaN), the
// same values as mxfp4::e8m0_to_float.
constexpr FloatTable256 make_e8m0_table() {
    FloatTable256 t{};
    for (unsigned s = 0; s < 256; ++s) {
        const std::uint32_t bits = s == 0 ? 0x00400000u : s == 255 ? 0x7FC00000u : s << 23;
        t.v[s] = std::bit_cast<float>(bits);
    }
    return t;
}
alignas(64) inline constexpr FloatTable256 kE8M0Table = make_e8m0_table();

// The geometry of one record; index 0 = gate_up, 1 = down (see expert_record.h).
struct RecordRef {
    const std::uint8_t* data;
    std::uint64_t codes[2];             // byte offset of the code blocks (in the contiguous layout)
    std::uint64_t scales[2];            // byte offset of the scale slots (in the contiguous layout)
    const std::uint8_t* code_base[2];   // where the code blocks are (data + codes, or a part of
    const std::uint8_t* scale_base[2];  // a split record: ExpertRecordView::make_split)
    std::int64_t rows[2];               // 2I, H
    int blocks[2];                      // G per row: G_h, G_i
    std::uint64_t code_stride[2];       // bytes between two rows' codes: 16 G (a slice's down
                                        // rows: 16 G_i of the whole record)
    int slot[2];  // scale slot bytes per row: G (raw) or 1 + ceil(G/2) (packed); the row stride
    bool packed;
    std::uint64_t escape;  // packed: payload offset of the escape rows (= the fixed size)
    std::uint64_t bytes;   // whole payload
};

struct ExpertArgs {
    RecordRef rec;
    const std::uint8_t* gate_up_bias;  // bf16 [2I] or null
    const std::uint8_t* down_bias;     // bf16 [H] or null
    float weight;
    std::uint8_t* capture;  // rec.bytes bytes or null
    bool capture_stream;    // capture is 16-byte aligned: streaming stores
    int prefetch;           // software prefetch distance in code bytes (0: off)
    int prefetch_down;      // the same for the down rows (a slice's: whole rows ahead)
};

// One weight row as the ISA dot products read it: G blocks of 16 code bytes and the row's G raw
// E8M0 scale bytes (for packed rows decoded into a task-local buffer first, once per row, with
// SSE2: ~30 instructions instead of a few per block in the inner loop, where they cost ~20%).
struct Row {
    const std::uint8_t* codes;
    const std::uint8_t* scales;
    std::uint8_t* cap;  // capture destination of the code bytes, or null
};

// Decodes a packed slot (base byte, then G 4-bit offsets, block 2j in the low nibble of byte
// 1 + j) into out[G]; out must have room for G rounded up to 32. static: internal linkage, one
// copy per ISA file (see the note at the top).
static inline void decode_packed_scales(const std::uint8_t* slot, int g, std::uint8_t* out) {
    const std::uint8_t base = slot[0];
    const int n = (g + 1) / 2;  // offset bytes
#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
    alignas(16) std::uint8_t local[kMaxBlocksForDecode / 2 + 16];
    std::memcpy(local, slot + 1, static_cast<size_t>(n));  // never read past the slot
    std::memset(local + n, 0, 16);
    const __m128i lo_mask = _mm_set1_epi8(0x0F);
    const __m128i b = _mm_set1_epi8(static_cast<char>(base));
    for (int j = 0; j < n; j += 16) {
        const __m128i v = _mm_load_si128(reinterpret_cast<const __m128i*>(local + j));
        const __m128i lo = _mm_and_si128(v, lo_mask);
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), lo_mask);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * j),
                         _mm_add_epi8(_mm_unpacklo_epi8(lo, hi), b));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * j + 16),
                         _mm_add_epi8(_mm_unpackhi_epi8(lo, hi), b));
    }
#else
    for (int j = 0; j < g; ++j) {
        const std::uint8_t nib = slot[1 + j / 2];
        out[j] = static_cast<std::uint8_t>(base + ((j & 1) ? (nib >> 4) : (nib & 0x0F)));
    }
#endif
}

// 0xFF scale bytes: rows whose escape offset is out of range read these (NaN weights).
struct ByteTable1024 {
    std::uint8_t v[1024];
};
constexpr ByteTable1024 make_nan_scales() {
    ByteTable1024 t{};
    for (auto& b : t.v) b = 0xFF;
    return t;
}
inline constexpr ByteTable1024 kNanScales = make_nan_scales();

constexpr int kMaxExperts = 4;
constexpr int kMaxTokens = 16;
constexpr int kMaxBlocks = kMaxBlocksForDecode;  // G <= 1024 (H, I <= 32768)
constexpr int kMaxDownRows = 64;                 // rows per down task (task-local result buffer)

// decode(): phase 1 = n_experts * gate_up_tasks tasks (expert-major), phase 2 = down tasks.
struct DecodeJob {
    int n_experts;
    ExpertArgs experts[kMaxExperts];
    std::int64_t hidden, inter;
    float limit, alpha;
    const float* x;              // [H] in the ISA's operand layout
    float* act;                  // [n_experts][I] operand layout (written in phase 1)
    float* out;                  // [H]
    std::int64_t i_per_task;     // gate/up pairs per phase-1 task
    std::int64_t gate_up_tasks;  // per expert
    std::int64_t rows_per_task;  // down rows per phase-2 task (<= kMaxDownRows)
};

// multi(): phase 1 = gate_up tasks, phase 2 = down tasks, one expert, `tokens` tokens.
struct MultiJob {
    ExpertArgs expert;
    int tokens;
    std::int64_t hidden, inter;
    float limit, alpha;
    const float* x;        // [T][H] operand layout
    float* act;            // [T][I] operand layout
    float* const* out;     // T rows of H
    const float* weights;  // [T]
    std::int64_t i_per_task;
    std::int64_t rows_per_task;
};

using TaskFn = void (*)(void* ctx, std::int64_t task, std::int32_t worker);

struct IsaOps {
    const char* name;
    // Operand layout: false = natural order; true = per 32-block, the 16 even elements then the
    // 16 odd ones (the order the low / high nibbles of the 16 code bytes decode into).
    bool deinterleaved;
    TaskFn decode_gate_up;
    TaskFn decode_down;
    TaskFn multi_gate_up;
    TaskFn multi_down;
};

// Raw E8M0 bytes of row r of projection p (0 = gate_up, 1 = down): a pointer into the record
// (raw records, escaped rows) or the packed slot decoded into tmp[G]. An escape offset outside
// the escape rows gives 0xFF bytes (NaN weights) instead of a read outside the record. Out of line
// in a baseline file (expert_record.cpp), so the ISA files may call it.
const std::uint8_t* record_row_scales(const RecordRef& rec, int p, std::int64_t r,
                                      std::uint8_t* tmp);

RecordRef make_record_ref(const ExpertRecordView& view);

const IsaOps* ops_scalar();
const IsaOps* ops_avx2();    // nullptr when this build has no AVX2 variant
const IsaOps* ops_avx512();  // nullptr when this build has no AVX-512 variant

}  // namespace neural::cpu::kernel_detail
