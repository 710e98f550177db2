// A view of one expert record of the expert store: the bytes a CPU kernel streams and a copy
// engine uploads for one expert of one layer. Layout as written by engine/store (format.h,
// docs/STORE_FORMAT.md):
//
//   raw    (kind 0): gate_up codes [2I, G_h, 16] | gate_up scales [2I, G_h]
//                    | down codes [H, G_i, 16]   | down scales [H, G_i]
//   packed (kind 1): gate_up codes | gate_up slots [2I, S_h] | down codes | down slots [H, S_i]
//                    | escape rows (raw scale bytes of escaped rows, gate_up's then down's)
//
// G_h = H / 32, G_i = I / 32 (MXFP4 blocks per row); S = max(5, 1 + ceil(G / 2)). A packed slot
// is a base byte b plus one 4-bit offset per block (block 2j in the low nibble of byte 1 + j,
// 2j + 1 in the high nibble): scale[g] = b + offset[g]. Base 0xFF marks an escaped row: bytes
// 1..4 hold the little-endian u32 payload offset of its G raw scale bytes. The number of
// escape rows is in the store index, so a packed record's size comes from there
// (payload_bytes); everything before the escape rows has a fixed size.
#pragma once

#include <cstdint>

#include "model/expert_source.h"  // neural::Projection

namespace neural::cpu {

enum class RecordKind : std::uint8_t { raw = 0, packed = 1 };

class ExpertRecordView {
public:
    // Largest supported H / I: kernels keep one row's G <= 1024 scale bytes on the stack.
    static constexpr std::int64_t kMaxDim = 32768;

    // `payload_bytes` = the record's size (store index entry); 0 means "no escape rows". Throws
    // neural::Error unless H and I are multiples of 32 in [32, kMaxDim] and payload_bytes is
    // the fixed size (raw) or at least it, with whole escape rows possible (packed).
    static ExpertRecordView make(const std::uint8_t* data, std::int64_t hidden,
                                 std::int64_t intermediate, RecordKind kind,
                                 std::uint64_t payload_bytes = 0);

    // A raw record whose four parts lie apart: the checkpoint's expert tensors (gate_up_proj /
    // down_proj _blocks and _scales of one expert hold exactly the raw record's four parts), so
    // the kernels read a checkpoint without a repacked store. Offsets and bytes() stay those of
    // the contiguous raw layout (a capture buffer receives the contiguous record). Throws like
    // make() for bad shapes or a null part.
    static ExpertRecordView make_split(const std::uint8_t* gate_up_codes,
                                       const std::uint8_t* gate_up_scales,
                                       const std::uint8_t* down_codes,
                                       const std::uint8_t* down_scales, std::int64_t hidden,
                                       std::int64_t intermediate);

    // Neurons [first, first + count) of a raw record (both multiples of 32, within I): gate_up
    // rows [2 first, 2 (first + count)) and blocks [first / 32, (first + count) / 32) of every
    // down row, read in place (the down rows keep the whole record's stride). The view is an
    // expert of intermediate size `count`; its down output plus the rest's adds up to the whole
    // expert's (each part with or without the down bias: the caller adds it once). The hybrid
    // backend splits a missed expert this way between the CPU and the GPU (docs/CUDA.md
    // "Streamed misses"). A slice cannot be captured and is for the decode kernel only. Throws
    // neural::Error for a packed record or a bad range.
    ExpertRecordView slice(std::int64_t first, std::int64_t count) const;
    bool sliced() const { return down_stride_ != 0; }
    // Blocks between the starts of two consecutive rows of a projection in memory: the
    // blocks per row, except for a slice's down rows (the whole record's G_i).
    int row_stride_blocks(Projection p) const;

    // Record sizes: raw; packed with the given numbers of escaped rows.
    static std::uint64_t raw_bytes(std::int64_t hidden, std::int64_t intermediate);
    static std::uint64_t packed_bytes(std::int64_t hidden, std::int64_t intermediate,
                                      std::uint32_t escaped_gate_up = 0,
                                      std::uint32_t escaped_down = 0);
    // Bytes of one row's scale slot: G (raw) or max(5, 1 + ceil(G / 2)) (packed).
    static int slot_bytes(RecordKind kind, int blocks);

    ExpertRecordView() = default;

    // The first byte (of the gate_up codes, for a split record).
    const std::uint8_t* data() const { return data_; }
    bool split() const { return split_; }
    // Where the code blocks / scale slots of a projection start in memory.
    const std::uint8_t* codes(Projection p) const;
    const std::uint8_t* scales(Projection p) const;
    RecordKind kind() const { return kind_; }
    std::int64_t hidden() const { return hidden_; }              // H
    std::int64_t intermediate() const { return intermediate_; }  // I
    std::uint64_t bytes() const { return bytes_; }               // whole payload
    std::uint64_t fixed_bytes() const { return fixed_; }         // packed: escape rows start here

    // gate_up: 2I rows of G_h blocks; down: H rows of G_i blocks.
    std::int64_t rows(Projection p) const;
    int blocks_per_row(Projection p) const;
    int scale_row_bytes(Projection p) const;  // slot bytes per row
    std::uint64_t codes_offset(Projection p) const;
    std::uint64_t scales_offset(Projection p) const;

    // Raw E8M0 scale bytes of row r (G of them): a pointer into the record (raw records,
    // escaped rows) or the slot decoded into `tmp` (G bytes). An escape offset outside the
    // escape rows gives 0xFF bytes (NaN weights) instead of a read outside the record.
    const std::uint8_t* row_scales(Projection p, std::int64_t r, std::uint8_t* tmp) const;

private:
    const std::uint8_t* data_ = nullptr;
    RecordKind kind_ = RecordKind::raw;
    std::int64_t hidden_ = 0, intermediate_ = 0;
    std::uint64_t fixed_ = 0, bytes_ = 0;
    bool split_ = false;
    const std::uint8_t* parts_[4] = {};  // split: gate_up codes, scales, down codes, scales
    int down_stride_ = 0;                // a slice: the whole record's G_i; else 0
};

}  // namespace neural::cpu
