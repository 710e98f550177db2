#include "cpu/kernels/expert_record.h"

#include <cstring>

#include "cpu/kernels/expert_kernel_impl.h"
#include "neural/error.h"

namespace neural::cpu {

namespace {

std::uint64_t u64(std::int64_t v) { return static_cast<std::uint64_t>(v); }

}  // namespace

int ExpertRecordView::slot_bytes(RecordKind kind, int blocks) {
    if (kind == RecordKind::raw) return blocks;
    const int s = 1 + (blocks + 1) / 2;
    return s < 5 ? 5 : s;  // an escape (0xFF + u32 offset) must fit
}

std::uint64_t ExpertRecordView::raw_bytes(std::int64_t hidden, std::int64_t intermediate) {
    const std::uint64_t g_h = u64(hidden) / 32, g_i = u64(intermediate) / 32;
    return 2 * u64(intermediate) * g_h * 17 + u64(hidden) * g_i * 17;
}

std::uint64_t ExpertRecordView::packed_bytes(std::int64_t hidden, std::int64_t intermediate,
                                             std::uint32_t escaped_gate_up,
                                             std::uint32_t escaped_down) {
    const int g_h = static_cast<int>(hidden / 32), g_i = static_cast<int>(intermediate / 32);
    const auto s_h = static_cast<std::uint64_t>(slot_bytes(RecordKind::packed, g_h));
    const auto s_i = static_cast<std::uint64_t>(slot_bytes(RecordKind::packed, g_i));
    return 2 * u64(intermediate) * (16 * static_cast<std::uint64_t>(g_h) + s_h) +
           u64(hidden) * (16 * static_cast<std::uint64_t>(g_i) + s_i) +
           std::uint64_t{escaped_gate_up} * static_cast<std::uint64_t>(g_h) +
           std::uint64_t{escaped_down} * static_cast<std::uint64_t>(g_i);
}

ExpertRecordView ExpertRecordView::make(const std::uint8_t* data, std::int64_t hidden,
                                        std::int64_t intermediate, RecordKind kind,
                                        std::uint64_t payload_bytes) {
    if (data == nullptr) fail("expert record: null data pointer");
    for (std::int64_t d : {hidden, intermediate}) {
        if (d < 32 || d > kMaxDim || d % 32 != 0) {
            fail("expert record: hidden {} and intermediate {} must be multiples of 32 in [32, {}]",
                 hidden, intermediate, kMaxDim);
        }
    }
    if (kind != RecordKind::raw && kind != RecordKind::packed) {
        fail("expert record: unknown kind {}", static_cast<int>(kind));
    }
    ExpertRecordView v;
    v.data_ = data;
    v.kind_ = kind;
    v.hidden_ = hidden;
    v.intermediate_ = intermediate;
    v.fixed_ = kind == RecordKind::raw ? raw_bytes(hidden, intermediate)
                                       : packed_bytes(hidden, intermediate);
    v.bytes_ = payload_bytes == 0 ? v.fixed_ : payload_bytes;
    if (kind == RecordKind::raw && v.bytes_ != v.fixed_) {
        fail("expert record: a raw record of H={} I={} holds {} bytes, not {}", hidden,
             intermediate, v.fixed_, payload_bytes);
    }
    if (kind == RecordKind::packed) {
        const std::uint64_t max_escapes =
            2 * u64(intermediate) * (u64(hidden) / 32) + u64(hidden) * (u64(intermediate) / 32);
        if (v.bytes_ < v.fixed_ || v.bytes_ - v.fixed_ > max_escapes) {
            fail("expert record: a packed record of H={} I={} holds {} to {} bytes, not {}", hidden,
                 intermediate, v.fixed_, v.fixed_ + max_escapes, payload_bytes);
        }
    }
    return v;
}

ExpertRecordView ExpertRecordView::make_split(const std::uint8_t* gate_up_codes,
                                              const std::uint8_t* gate_up_scales,
                                              const std::uint8_t* down_codes,
                                              const std::uint8_t* down_scales, std::int64_t hidden,
                                              std::int64_t intermediate) {
    if (gate_up_scales == nullptr || down_codes == nullptr || down_scales == nullptr) {
        fail("expert record: null data pointer");
    }
    ExpertRecordView v = make(gate_up_codes, hidden, intermediate, RecordKind::raw);
    v.split_ = true;
    v.parts_[0] = gate_up_codes;
    v.parts_[1] = gate_up_scales;
    v.parts_[2] = down_codes;
    v.parts_[3] = down_scales;
    return v;
}

ExpertRecordView ExpertRecordView::slice(std::int64_t first, std::int64_t count) const {
    if (data_ == nullptr) fail("expert record: slice of an empty view");
    if (kind_ != RecordKind::raw) fail("expert record: only raw records can be sliced");
    if (sliced()) fail("expert record: a slice cannot be sliced again");
    if (first < 0 || count < 32 || first % 32 != 0 || count % 32 != 0 ||
        first + count > intermediate_) {
        fail("expert record: neurons [{}, {}) are not a slice of 32-multiples within I={}", first,
             first + count, intermediate_);
    }
    const std::uint64_t g_h = u64(hidden_) / 32, g0 = u64(first) / 32;
    ExpertRecordView v = *this;
    v.split_ = true;
    v.parts_[0] = codes(Projection::kGateUp) + 2 * u64(first) * g_h * 16;
    v.parts_[1] = scales(Projection::kGateUp) + 2 * u64(first) * g_h;
    v.parts_[2] = codes(Projection::kDown) + g0 * 16;
    v.parts_[3] = scales(Projection::kDown) + g0;
    v.data_ = v.parts_[0];
    v.down_stride_ = blocks_per_row(Projection::kDown);
    v.intermediate_ = count;
    v.fixed_ = v.bytes_ = raw_bytes(hidden_, count);
    return v;
}

int ExpertRecordView::row_stride_blocks(Projection p) const {
    return p == Projection::kDown && sliced() ? down_stride_ : blocks_per_row(p);
}

const std::uint8_t* ExpertRecordView::codes(Projection p) const {
    if (split_) return parts_[p == Projection::kGateUp ? 0 : 2];
    return data_ + codes_offset(p);
}

const std::uint8_t* ExpertRecordView::scales(Projection p) const {
    if (split_) return parts_[p == Projection::kGateUp ? 1 : 3];
    return data_ + scales_offset(p);
}

std::int64_t ExpertRecordView::rows(Projection p) const {
    return p == Projection::kGateUp ? 2 * intermediate_ : hidden_;
}

int ExpertRecordView::blocks_per_row(Projection p) const {
    return static_cast<int>((p == Projection::kGateUp ? hidden_ : intermediate_) / 32);
}

int ExpertRecordView::scale_row_bytes(Projection p) const {
    return slot_bytes(kind_, blocks_per_row(p));
}

std::uint64_t ExpertRecordView::codes_offset(Projection p) const {
    if (p == Projection::kGateUp) return 0;
    return scales_offset(Projection::kGateUp) +
           u64(rows(Projection::kGateUp)) *
               static_cast<std::uint64_t>(scale_row_bytes(Projection::kGateUp));
}

std::uint64_t ExpertRecordView::scales_offset(Projection p) const {
    return codes_offset(p) + u64(rows(p)) * static_cast<std::uint64_t>(blocks_per_row(p)) * 16;
}

const std::uint8_t* ExpertRecordView::row_scales(Projection p, std::int64_t r,
                                                 std::uint8_t* tmp) const {
    return kernel_detail::record_row_scales(kernel_detail::make_record_ref(*this),
                                            p == Projection::kGateUp ? 0 : 1, r, tmp);
}

namespace kernel_detail {

RecordRef make_record_ref(const ExpertRecordView& v) {
    RecordRef ref{};
    ref.data = v.data();
    for (int p = 0; p < 2; ++p) {
        const Projection proj = p == 0 ? Projection::kGateUp : Projection::kDown;
        ref.codes[p] = v.codes_offset(proj);
        ref.scales[p] = v.scales_offset(proj);
        ref.rows[p] = v.rows(proj);
        ref.blocks[p] = v.blocks_per_row(proj);
        ref.code_stride[p] = static_cast<std::uint64_t>(v.row_stride_blocks(proj)) * 16;
        // The scale slots' stride: a slice's down rows keep the whole record's (raw: G bytes).
        ref.slot[p] = ExpertRecordView::slot_bytes(v.kind(), v.row_stride_blocks(proj));
        ref.code_base[p] = v.codes(proj);
        ref.scale_base[p] = v.scales(proj);
    }
    ref.packed = v.kind() == RecordKind::packed;
    ref.escape = v.fixed_bytes();
    ref.bytes = v.bytes();
    return ref;
}

const std::uint8_t* record_row_scales(const RecordRef& rec, int p, std::int64_t r,
                                      std::uint8_t* tmp) {
    const int g = rec.blocks[p];
    const std::uint8_t* slot = rec.scale_base[p] + u64(r) * static_cast<std::uint64_t>(rec.slot[p]);
    if (!rec.packed) return slot;
    const std::uint8_t base = slot[0];
    if (base == 0xFF) {
        std::uint32_t off;  // little-endian on disk, as every supported host
        std::memcpy(&off, slot + 1, 4);
        if (off < rec.escape || off + static_cast<std::uint64_t>(g) > rec.bytes) {
            std::memset(tmp, 0xFF, static_cast<size_t>(g));
            return tmp;
        }
        return rec.data + off;
    }
    for (int j = 0; j < g; ++j) {
        const std::uint8_t nib = slot[1 + j / 2];
        tmp[j] = static_cast<std::uint8_t>(base + ((j & 1) ? (nib >> 4) : (nib & 0x0F)));
    }
    return tmp;
}

}  // namespace kernel_detail

}  // namespace neural::cpu
