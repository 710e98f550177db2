// Packed scale codec (offsets, the escape, the base-0xFF rule), header/index encoding, and the
// record sizes of the real shapes computed from their configs.
#include <cstring>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/config.h"
#include "store/format.h"
#include "store/hash.h"
#include "store/store_support.h"
#include "support/fixtures.h"

namespace neural::store {
namespace {

using ::testing::HasSubstr;

// Encodes `scales` the way repack does (escape rows' raw bytes at payload offset 1000) and
// decodes them back.
std::vector<std::uint8_t> round_trip(const std::vector<std::uint8_t>& scales, bool* escaped) {
    const auto G = static_cast<std::int64_t>(scales.size());
    std::vector<std::uint8_t> payload(2000, 0xAA);
    std::uint8_t* slot = payload.data();
    *escaped = needs_escape(scales.data(), G);
    if (*escaped) {
        pack_escape(1000, G, slot);
        std::memcpy(payload.data() + 1000, scales.data(), scales.size());
    } else {
        pack_scales(scales.data(), G, slot);
    }
    std::vector<std::uint8_t> out(scales.size());
    const std::uint8_t* got = unpack_scales(slot, G, payload.data(), out.data());
    return std::vector<std::uint8_t>(got, got + G);
}

TEST(PackedScales, SlotSizes) {
    EXPECT_EQ(packed_slot_bytes(90), 46u);  // 120b / 20b rows: 1 + 45
    EXPECT_EQ(packed_slot_bytes(89), 46u);  // odd: the last high nibble is unused
    EXPECT_EQ(packed_slot_bytes(10), 6u);
    // Never below 5 bytes: an escape needs 0xFF + a u32 offset.
    EXPECT_EQ(packed_slot_bytes(8), 5u);
    EXPECT_EQ(packed_slot_bytes(3), 5u);
    EXPECT_EQ(packed_slot_bytes(1), 5u);
}

TEST(PackedScales, NibbleLayoutIsLowThenHigh) {
    const std::vector<std::uint8_t> s = {120, 121, 135, 127, 120};
    std::vector<std::uint8_t> slot(packed_slot_bytes(5));
    pack_scales(s.data(), 5, slot.data());
    EXPECT_EQ(slot[0], 120);   // base = minimum
    EXPECT_EQ(slot[1], 0x10);  // blocks 0 (low) and 1 (high): offsets 0, 1
    EXPECT_EQ(slot[2], 0x7F);  // blocks 2 (15) and 3 (7)
    EXPECT_EQ(slot[3], 0x00);  // block 4 (0), unused high nibble 0
    EXPECT_EQ(slot[4], 0x00);  // padding up to 5 bytes
}

TEST(PackedScales, RoundTripsEveryKindOfRow) {
    struct Case {
        std::vector<std::uint8_t> scales;
        bool escaped;
    };
    const std::vector<Case> cases = {
        {{127}, false},
        {{0, 15, 7, 0}, false},    // span exactly 15
        {{0, 16}, true},           // span 16: escape
        {{240, 255, 250}, false},  // 255 reachable as base 240 + 15
        {{255}, true},             // min 255: base would be 0xFF -> escape
        {{255, 255, 255}, true},
        {{254, 255}, false},
        {{1, 200, 3, 4, 5}, true},
        {std::vector<std::uint8_t>(90, 118), false},
    };
    for (const auto& c : cases) {
        bool escaped = false;
        EXPECT_EQ(round_trip(c.scales, &escaped), c.scales);
        EXPECT_EQ(escaped, c.escaped) << ::testing::PrintToString(c.scales);
    }
    // Every (min, span <= 15) pair decodes exactly.
    for (int base = 0; base < 255; ++base) {
        for (int span = 0; span <= 15 && base + span <= 255; ++span) {
            std::vector<std::uint8_t> s(90);
            for (std::size_t g = 0; g < s.size(); ++g)
                s[g] = static_cast<std::uint8_t>(base + (g * 7) % (span + 1));
            bool escaped = true;
            ASSERT_EQ(round_trip(s, &escaped), s) << base << " " << span;
            ASSERT_FALSE(escaped);
        }
    }
}

TEST(PackedScales, NonEscapedSlotNeverStartsWith0xFF) {
    // The only rows whose minimum is 255 are all-255 rows, and those are escaped.
    const std::vector<std::uint8_t> s(7, 255);
    EXPECT_TRUE(needs_escape(s.data(), 7));
    std::vector<std::uint8_t> slot(packed_slot_bytes(7));
    pack_escape(123456, 7, slot.data());
    EXPECT_TRUE(is_escape(slot.data()));
    EXPECT_EQ(escape_offset(slot.data()), 123456u);
}

TEST(StoreFormat, HeaderAndIndexRoundTrip) {
    FixedHeader h;
    h.kind = 1;
    h.meta_bytes = 1234;
    h.index_offset = 1304;
    h.record_count = 99;
    h.data_offset = 8192;
    h.header_checksum = 0x0123456789abcdefull;
    const auto b = h.encode();
    EXPECT_EQ(std::memcmp(b.data(), "NRLSTORE", 8), 0);
    EXPECT_EQ(b[8], 1);  // version, little-endian
    const FixedHeader d = FixedHeader::decode(b.data());
    EXPECT_EQ(d.kind, 1u);
    EXPECT_EQ(d.meta_offset, 64u);
    EXPECT_EQ(d.meta_bytes, 1234u);
    EXPECT_EQ(d.index_offset, 1304u);
    EXPECT_EQ(d.record_count, 99u);
    EXPECT_EQ(d.data_offset, 8192u);
    EXPECT_EQ(d.header_checksum, 0x0123456789abcdefull);

    IndexEntry e{4096, 12839040 + 90, 42, (std::uint64_t{1} << 32) | 0};
    std::uint8_t buf[kIndexEntryBytes];
    e.encode(buf);
    const IndexEntry f = IndexEntry::decode(buf);
    EXPECT_EQ(f.offset, 4096u);
    EXPECT_EQ(f.payload_bytes, 12839130u);
    EXPECT_EQ(f.checksum, 42u);
    EXPECT_EQ(f.escaped_rows(Projection::kGateUp), 0u);
    EXPECT_EQ(f.escaped_rows(Projection::kDown), 1u);
}

TEST(StoreFormat, Xxh3MatchesKnownValues) {
    // XXH3-64 (seed 0) of the empty input: the reference value of the xxHash spec.
    EXPECT_EQ(hex64(xxh3_64("", 0)), "2d06800538d394c2");
    Xxh3 s;
    s.update("ab", 2);
    s.update("c", 1);
    EXPECT_EQ(s.digest(), xxh3_64("abc", 3));
    EXPECT_EQ(parse_hex64("2d06800538d394c2"), 0x2d06800538d394c2ull);
    EXPECT_FALSE(parse_hex64("2d06800538d394c"));
    EXPECT_FALSE(parse_hex64("2d06800538d394cg"));
}

// The real shapes from their config.json fields (hidden 2880, intermediate 2880; 24 layers x 32
// experts for 20b, 36 x 128 for 120b).
ModelConfig real_config(int layers, int experts) {
    nlohmann::json c = test::read_json(test::tiny_model_dir() / "config.json");
    c["hidden_size"] = 2880;
    c["intermediate_size"] = 2880;
    c["num_hidden_layers"] = layers;
    c["num_local_experts"] = experts;
    c["num_attention_heads"] = 64;
    c["num_key_value_heads"] = 8;
    c["sliding_window"] = 128;
    nlohmann::json types = nlohmann::json::array();
    for (int l = 0; l < layers; ++l)
        types.push_back(l % 2 ? "full_attention" : "sliding_attention");
    c["layer_types"] = types;
    return ModelConfig::from_json(c, "config.json");
}

TEST(StoreFormat, RecordSizesOfTheRealShapes) {
    for (const auto& c : {real_config(24, 32), real_config(36, 128)}) {
        SCOPED_TRACE(c.num_layers);
        const RecordLayout raw =
            RecordLayout::make(StoreKind::kRaw, c.hidden_size, c.intermediate_size);
        const RecordLayout packed =
            RecordLayout::make(StoreKind::kPacked, c.hidden_size, c.intermediate_size);
        EXPECT_EQ(raw.fixed_bytes, 13219200u);
        EXPECT_EQ(packed.fixed_bytes, 12839040u);
        EXPECT_EQ(raw.payload_bytes(0, 0), 13219200u);
        EXPECT_EQ(packed.payload_bytes(0, 0), 12839040u);
        EXPECT_EQ(packed.payload_bytes(2, 1), 12839040u + 3 * 90);
        // gate_up: 5760 rows x 90 blocks; down: 2880 rows x 90 blocks.
        EXPECT_EQ(raw[Projection::kGateUp].blocks_bytes(), 8294400u);
        EXPECT_EQ(raw[Projection::kGateUp].scales_bytes(), 518400u);
        EXPECT_EQ(raw[Projection::kDown].blocks_bytes(), 4147200u);
        EXPECT_EQ(raw[Projection::kDown].scales_bytes(), 259200u);
        EXPECT_EQ(packed[Projection::kGateUp].scale_stride, 46u);
        EXPECT_EQ(packed[Projection::kDown].scales_offset, 8294400u + 5760u * 46 + 4147200u);
    }
}

TEST(StoreFormat, LayoutRejectsBadDimensions) {
    EXPECT_THAT(test::error_of([] { RecordLayout::make(StoreKind::kRaw, 2880, 100); }),
                HasSubstr("multiples of 32"));
    EXPECT_THAT(test::error_of([] { RecordLayout::make(StoreKind::kRaw, 0, 32); }),
                HasSubstr("positive"));
    EXPECT_EQ(parse_kind("packed"), StoreKind::kPacked);
    EXPECT_FALSE(parse_kind("zip"));
}

}  // namespace
}  // namespace neural::store
