// The expert store file format, version 1 (docs/STORE_FORMAT.md): a 64-byte fixed header, JSON
// metadata, an index of 32-byte entries, then one 4 KiB-aligned record per (layer, expert).
// All integers little-endian. This header holds the constants, the byte layout of a record and
// the packed-scale codec; reading is store.h, writing repack.h.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "model/expert_source.h"

namespace neural::store {

constexpr std::array<char, 8> kMagic = {'N', 'R', 'L', 'S', 'T', 'O', 'R', 'E'};
constexpr std::uint32_t kFormatVersion = 1;
constexpr std::uint64_t kHeaderBytes = 64;      // fixed header; the metadata starts here
constexpr std::uint64_t kIndexEntryBytes = 32;  // per record
constexpr std::uint64_t kRecordAlignment = 4096;
constexpr std::uint8_t kEscapeBase = 0xFF;     // packed slot base byte of an escaped row
constexpr std::uint64_t kEscapeSlotBytes = 5;  // 0xFF + u32 payload offset of the raw scales
// Bound on the JSON metadata (real stores: ~20 KB at 120b) so a corrupt length cannot turn
// into a huge read.
constexpr std::uint64_t kMaxMetaBytes = 64ull << 20;

enum class StoreKind : std::uint32_t { kRaw = 0, kPacked = 1 };

const char* kind_name(StoreKind kind);  // "raw" / "packed"
std::optional<StoreKind> parse_kind(std::string_view name);

constexpr std::uint64_t align_up(std::uint64_t n, std::uint64_t a) { return (n + a - 1) / a * a; }

// Bytes [0, 64) of the file.
struct FixedHeader {
    std::array<char, 8> magic = kMagic;
    std::uint32_t format_version = kFormatVersion;
    std::uint32_t kind = 0;
    std::uint64_t meta_offset = kHeaderBytes;
    std::uint64_t meta_bytes = 0;
    std::uint64_t index_offset = 0;
    std::uint64_t record_count = 0;
    std::uint64_t data_offset = 0;
    std::uint64_t header_checksum = 0;  // XXH3-64 of bytes [0, 56) ++ metadata ++ index

    static constexpr std::uint64_t kChecksumOffset = 56;
    std::array<std::uint8_t, kHeaderBytes> encode() const;
    static FixedHeader decode(const std::uint8_t* bytes);  // kHeaderBytes bytes, no validation
};

// One index entry, layer-major (layer * E + expert).
struct IndexEntry {
    std::uint64_t offset = 0;         // of the record payload, a multiple of kRecordAlignment
    std::uint64_t payload_bytes = 0;  // without the zero padding up to the next record
    std::uint64_t checksum = 0;       // XXH3-64 of the payload
    // raw: 0. packed: escaped rows, gate_up in the low 32 bits, down in the high 32 bits.
    std::uint64_t escapes = 0;

    std::uint32_t escaped_rows(Projection p) const {
        return static_cast<std::uint32_t>(p == Projection::kGateUp ? escapes : escapes >> 32);
    }
    void encode(std::uint8_t* out) const;  // kIndexEntryBytes bytes
    static IndexEntry decode(const std::uint8_t* bytes);
};

// Byte layout of one projection inside a record payload.
struct ProjectionLayout {
    std::int64_t rows = 0;            // output rows: 2I (gate_up) or H (down)
    std::int64_t groups = 0;          // MXFP4 blocks per row: H / 32 (gate_up) or I / 32 (down)
    std::uint64_t blocks_offset = 0;  // [rows, groups, 16] code bytes
    std::uint64_t scales_offset = 0;  // [rows, scale_stride]: raw E8M0 bytes or packed slots
    std::uint64_t scale_stride = 0;   // bytes per row: groups (raw) or packed_slot_bytes (packed)

    std::uint64_t blocks_bytes() const { return static_cast<std::uint64_t>(rows * groups) * 16; }
    std::uint64_t scales_bytes() const { return static_cast<std::uint64_t>(rows) * scale_stride; }
    std::uint64_t raw_scales_bytes() const { return static_cast<std::uint64_t>(rows * groups); }
};

// Record layout for hidden size H and intermediate size I (multiples of 32):
//   gate_up blocks, gate_up scales, down blocks, down scales[, packed: escape rows].
// gpt-oss-20b/120b (H = I = 2880): raw 13,219,200 B, packed 12,839,040 B without escapes.
struct RecordLayout {
    StoreKind kind = StoreKind::kRaw;
    std::int64_t hidden = 0;
    std::int64_t intermediate = 0;
    std::array<ProjectionLayout, 2> projections;  // indexed by Projection
    std::uint64_t fixed_bytes = 0;  // payload without escape rows (raw: the whole payload)

    // Throws neural::Error unless H and I are positive multiples of 32 (and not absurdly large).
    static RecordLayout make(StoreKind kind, std::int64_t hidden, std::int64_t intermediate);
    const ProjectionLayout& operator[](Projection p) const {
        return projections[static_cast<std::size_t>(p)];
    }
    // Payload bytes of a record with these escaped-row counts (0 for raw).
    std::uint64_t payload_bytes(std::uint32_t escaped_gate_up, std::uint32_t escaped_down) const;
    // Upper bound of any payload: every row escaped (packed), else fixed_bytes.
    std::uint64_t max_payload_bytes() const;
};

// Packed scale slot of a row of `groups` blocks: a base byte plus one 4-bit offset per block,
// at least kEscapeSlotBytes so an escape fits (1 + ceil(G / 2) = 46 B at G = 90).
std::uint64_t packed_slot_bytes(std::int64_t groups);

// True when a row must be escaped: its scales span more than 15 steps, or its minimum is 0xFF
// (the base byte 0xFF marks an escape).
bool needs_escape(const std::uint8_t* scales, std::int64_t groups);

// Writes the slot of a row that does not need an escape: base = min, then offsets (block 2j in
// the low nibble of byte 1 + j, block 2j + 1 in the high nibble); unused bits are 0.
void pack_scales(const std::uint8_t* scales, std::int64_t groups, std::uint8_t* slot);

// Writes the slot of an escaped row: 0xFF, then the u32 payload offset of its raw scale bytes.
void pack_escape(std::uint32_t raw_offset, std::int64_t groups, std::uint8_t* slot);

inline bool is_escape(const std::uint8_t* slot) { return slot[0] == kEscapeBase; }
std::uint32_t escape_offset(const std::uint8_t* slot);

// The row's `groups` E8M0 scale bytes: decoded into `out` for a normal slot, or a pointer into
// `payload` (at the escape offset, which the caller has checked) for an escaped one.
inline const std::uint8_t* unpack_scales(const std::uint8_t* slot, std::int64_t groups,
                                         const std::uint8_t* payload, std::uint8_t* out) {
    if (is_escape(slot)) return payload + escape_offset(slot);
    const std::uint8_t base = slot[0];
    for (std::int64_t g = 0; g < groups; ++g) {
        const std::uint8_t nib = slot[1 + g / 2];
        out[g] = static_cast<std::uint8_t>(base + ((g & 1) ? (nib >> 4) : (nib & 0x0f)));
    }
    return out;
}

// Little-endian helpers.
void put_u32(std::uint8_t* p, std::uint32_t v);
void put_u64(std::uint8_t* p, std::uint64_t v);
std::uint32_t get_u32(const std::uint8_t* p);
std::uint64_t get_u64(const std::uint8_t* p);

}  // namespace neural::store
