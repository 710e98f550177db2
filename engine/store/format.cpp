#include "store/format.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "neural/error.h"

namespace neural::store {

const char* kind_name(StoreKind kind) {
    switch (kind) {
        case StoreKind::kRaw:
            return "raw";
        case StoreKind::kPacked:
            return "packed";
    }
    return "?";
}

std::optional<StoreKind> parse_kind(std::string_view name) {
    if (name == "raw") return StoreKind::kRaw;
    if (name == "packed") return StoreKind::kPacked;
    return std::nullopt;
}

void put_u32(std::uint8_t* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

void put_u64(std::uint8_t* p, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

std::uint32_t get_u32(const std::uint8_t* p) {
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

std::uint64_t get_u64(const std::uint8_t* p) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

std::array<std::uint8_t, kHeaderBytes> FixedHeader::encode() const {
    std::array<std::uint8_t, kHeaderBytes> b{};
    std::memcpy(b.data(), magic.data(), magic.size());
    put_u32(b.data() + 8, format_version);
    put_u32(b.data() + 12, kind);
    put_u64(b.data() + 16, meta_offset);
    put_u64(b.data() + 24, meta_bytes);
    put_u64(b.data() + 32, index_offset);
    put_u64(b.data() + 40, record_count);
    put_u64(b.data() + 48, data_offset);
    put_u64(b.data() + kChecksumOffset, header_checksum);
    return b;
}

FixedHeader FixedHeader::decode(const std::uint8_t* b) {
    FixedHeader h;
    std::memcpy(h.magic.data(), b, h.magic.size());
    h.format_version = get_u32(b + 8);
    h.kind = get_u32(b + 12);
    h.meta_offset = get_u64(b + 16);
    h.meta_bytes = get_u64(b + 24);
    h.index_offset = get_u64(b + 32);
    h.record_count = get_u64(b + 40);
    h.data_offset = get_u64(b + 48);
    h.header_checksum = get_u64(b + kChecksumOffset);
    return h;
}

void IndexEntry::encode(std::uint8_t* out) const {
    put_u64(out, offset);
    put_u64(out + 8, payload_bytes);
    put_u64(out + 16, checksum);
    put_u64(out + 24, escapes);
}

IndexEntry IndexEntry::decode(const std::uint8_t* b) {
    IndexEntry e;
    e.offset = get_u64(b);
    e.payload_bytes = get_u64(b + 8);
    e.checksum = get_u64(b + 16);
    e.escapes = get_u64(b + 24);
    return e;
}

std::uint64_t packed_slot_bytes(std::int64_t groups) {
    return std::max<std::uint64_t>(kEscapeSlotBytes,
                                   1 + static_cast<std::uint64_t>(groups + 1) / 2);
}

RecordLayout RecordLayout::make(StoreKind kind, std::int64_t hidden, std::int64_t intermediate) {
    // 1 << 20 keeps every product below 2^64 with room to spare; real models use 2880.
    constexpr std::int64_t kMaxDim = 1 << 20;
    if (hidden <= 0 || intermediate <= 0 || hidden % 32 != 0 || intermediate % 32 != 0 ||
        hidden > kMaxDim || intermediate > kMaxDim) {
        fail(
            "hidden_size {} and intermediate_size {} must be positive multiples of 32 (at most {})",
            hidden, intermediate, kMaxDim);
    }
    RecordLayout l;
    l.kind = kind;
    l.hidden = hidden;
    l.intermediate = intermediate;
    ProjectionLayout& gu = l.projections[static_cast<std::size_t>(Projection::kGateUp)];
    ProjectionLayout& dn = l.projections[static_cast<std::size_t>(Projection::kDown)];
    gu.rows = 2 * intermediate;
    gu.groups = hidden / 32;
    dn.rows = hidden;
    dn.groups = intermediate / 32;
    std::uint64_t at = 0;
    for (ProjectionLayout* p : {&gu, &dn}) {
        p->scale_stride = kind == StoreKind::kRaw ? static_cast<std::uint64_t>(p->groups)
                                                  : packed_slot_bytes(p->groups);
        p->blocks_offset = at;
        at += p->blocks_bytes();
        p->scales_offset = at;
        at += p->scales_bytes();
    }
    l.fixed_bytes = at;
    if (l.max_payload_bytes() > UINT32_MAX) {
        fail(
            "hidden_size {} / intermediate_size {}: an expert record would exceed 4 GiB, which "
            "the store's 32-bit escape offsets cannot address",
            hidden, intermediate);
    }
    return l;
}

std::uint64_t RecordLayout::payload_bytes(std::uint32_t escaped_gate_up,
                                          std::uint32_t escaped_down) const {
    if (kind == StoreKind::kRaw) return fixed_bytes;
    return fixed_bytes +
           escaped_gate_up * static_cast<std::uint64_t>((*this)[Projection::kGateUp].groups) +
           escaped_down * static_cast<std::uint64_t>((*this)[Projection::kDown].groups);
}

std::uint64_t RecordLayout::max_payload_bytes() const {
    if (kind == StoreKind::kRaw) return fixed_bytes;
    return fixed_bytes + (*this)[Projection::kGateUp].raw_scales_bytes() +
           (*this)[Projection::kDown].raw_scales_bytes();
}

bool needs_escape(const std::uint8_t* scales, std::int64_t groups) {
    const auto [mn, mx] = std::minmax_element(scales, scales + groups);
    return *mx - *mn > 15 || *mn == kEscapeBase;
}

void pack_scales(const std::uint8_t* scales, std::int64_t groups, std::uint8_t* slot) {
    const std::uint64_t n = packed_slot_bytes(groups);
    std::memset(slot, 0, n);
    const std::uint8_t base = *std::min_element(scales, scales + groups);
    slot[0] = base;
    for (std::int64_t g = 0; g < groups; ++g) {
        const auto off = static_cast<std::uint8_t>(scales[g] - base);  // 0..15 (caller checked)
        slot[1 + g / 2] |= static_cast<std::uint8_t>((g & 1) ? off << 4 : off);
    }
}

void pack_escape(std::uint32_t raw_offset, std::int64_t groups, std::uint8_t* slot) {
    std::memset(slot, 0, packed_slot_bytes(groups));
    slot[0] = kEscapeBase;
    put_u32(slot + 1, raw_offset);
}

std::uint32_t escape_offset(const std::uint8_t* slot) { return get_u32(slot + 1); }

}  // namespace neural::store
