// Repack of a synthetic sharded checkpoint with the real 120b row widths (H = I = 2880) but 2
// layers x 2 experts: record sizes, exact decode of every row (escapes and the base-0xFF rule
// included), determinism across thread counts, progress, cancel, and an existing store surviving
// a failed repack.
#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/safetensors.h"
#include "model/weights.h"
#include "store/format.h"
#include "store/repack.h"
#include "store/store.h"
#include "store/store_support.h"
#include "store/verify.h"
#include "support/fixtures.h"

namespace neural::store {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using ::testing::HasSubstr;

// Scale rows the synthetic checkpoint gets on purpose (layer, projection, expert, row).
void special_rows(int layer, int proj, int expert, std::int64_t row, std::uint8_t* s,
                  std::int64_t g) {
    if (layer == 0 && proj == 0 && expert == 1 && row == 5) {
        std::memset(s, 255, static_cast<std::size_t>(g));  // min 255: escaped (base-0xFF rule)
    } else if (layer == 0 && proj == 1 && expert == 0 && row == 9) {
        for (std::int64_t i = 0; i < g; ++i)
            s[i] = static_cast<std::uint8_t>(240 + i % 16);  // span 15
    } else if (row % 1000 == 17) {
        s[row % g] = static_cast<std::uint8_t>(s[row % g] + 40);  // span > 15: escaped
    } else if (layer == 1 && proj == 1 && expert == 1 && row == 2) {
        s[0] = 100;
        s[1] = 116;  // span exactly 16: escaped
        for (std::int64_t i = 2; i < g; ++i) s[i] = 110;
    }
}

// Independent of the code under test: a row is escaped iff its span exceeds 15 or its min is 255.
std::uint32_t expected_escapes(const Mxfp4Experts& m, int expert) {
    std::uint32_t n = 0;
    for (std::int64_t r = 0; r < m.rows; ++r) {
        const std::uint8_t* s = m.row_scales(expert, r);
        int lo = 255, hi = 0;
        for (std::int64_t i = 0; i < m.blocks_per_row(); ++i) {
            lo = std::min<int>(lo, s[i]);
            hi = std::max<int>(hi, s[i]);
        }
        n += (hi - lo > 15 || lo == 255) ? 1 : 0;
    }
    return n;
}

class Repack120bWidths : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        tmp_ = new test::TempDir();
        test::SynthSpec spec;  // H = I = 2880, 2 layers x 2 experts, vocab 64
        spec.scale_rows = special_rows;
        test::write_synthetic_checkpoint(*tmp_ / "ckpt", spec);
    }
    static void TearDownTestSuite() { delete tmp_; }
    static fs::path checkpoint() { return *tmp_ / "ckpt"; }

    RepackResult run(StoreKind kind, const fs::path& out, int threads = 2) {
        RepackOptions o;
        o.checkpoint = checkpoint();
        o.out = out;
        o.kind = kind;
        o.threads = threads;
        return repack(o);
    }

    static test::TempDir* tmp_;
    test::TempDir out_;
};
test::TempDir* Repack120bWidths::tmp_ = nullptr;

TEST_F(Repack120bWidths, SizesAndExactDecode) {
    const ModelConfig config = ModelConfig::load(checkpoint() / "config.json");
    const Checkpoint ckpt = Checkpoint::open(checkpoint());
    ASSERT_EQ(ckpt.files().size(), 2u);  // sharded
    const ModelWeights w = ModelWeights::bind(ckpt, config);
    std::uint32_t total_escapes = 0;
    for (int l = 0; l < 2; ++l) {
        for (int e = 0; e < 2; ++e) {
            total_escapes += expected_escapes(w.layers[static_cast<std::size_t>(l)].gate_up, e) +
                             expected_escapes(w.layers[static_cast<std::size_t>(l)].down, e);
        }
    }
    ASSERT_GT(total_escapes, 10u);

    for (StoreKind kind : {StoreKind::kRaw, StoreKind::kPacked}) {
        SCOPED_TRACE(kind_name(kind));
        const fs::path path = out_ / (std::string(kind_name(kind)) + ".nstore");
        const RepackResult r = run(kind, path);
        EXPECT_EQ(r.records, 4);
        EXPECT_EQ(r.bytes, fs::file_size(path));
        EXPECT_EQ(r.escaped_rows, kind == StoreKind::kPacked ? total_escapes : 0u);
        const ExpertStore s = ExpertStore::open(path);
        EXPECT_EQ(s.layout().fixed_bytes, kind == StoreKind::kRaw ? 13219200u : 12839040u);
        std::uint64_t end = 0;
        for (int l = 0; l < 2; ++l) {
            const LayerWeights& lw = w.layers[static_cast<std::size_t>(l)];
            for (int e = 0; e < 2; ++e) {
                const IndexEntry& x = s.entry(l, e);
                EXPECT_EQ(x.offset % 4096, 0u);
                const std::uint32_t gu = expected_escapes(lw.gate_up, e),
                                    dn = expected_escapes(lw.down, e);
                EXPECT_EQ(x.payload_bytes,
                          kind == StoreKind::kRaw ? 13219200u : 12839040u + 90u * (gu + dn));
                if (kind == StoreKind::kPacked) {
                    EXPECT_EQ(x.escaped_rows(Projection::kGateUp), gu);
                    EXPECT_EQ(x.escaped_rows(Projection::kDown), dn);
                }
                EXPECT_TRUE(s.record_checksum_ok(l, e));
                s.check_escapes(l, e);
                // Every row: the same 16-byte code blocks and the same 90 scale bytes.
                std::uint8_t buf[90];
                for (Projection p : {Projection::kGateUp, Projection::kDown}) {
                    const Mxfp4Experts& m = p == Projection::kGateUp ? lw.gate_up : lw.down;
                    for (std::int64_t row = 0; row < m.rows; ++row) {
                        const ExpertRow got = s.row(l, p, e, row, buf);
                        ASSERT_EQ(std::memcmp(got.blocks, m.row_blocks(e, row), 90 * 16), 0)
                            << l << " " << e << " " << row;
                        ASSERT_EQ(std::memcmp(got.scales, m.row_scales(e, row), 90), 0)
                            << l << " " << e << " " << row;
                    }
                }
                end = x.offset + align_up(x.payload_bytes, 4096);
            }
        }
        EXPECT_EQ(end, r.bytes);  // padded to 4 KiB, nothing after the last record
        VerifyOptions vo;
        vo.checkpoint = checkpoint();
        const VerifyReport v = verify_store(path, vo);
        EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems[0]);
    }
    // The rows the spec plants: min 255 escaped, span-15 row with 255 not escaped.
    const ExpertStore packed = ExpertStore::open(out_ / "packed.nstore");
    const auto& gu = packed.layout()[Projection::kGateUp];
    const auto& dn = packed.layout()[Projection::kDown];
    EXPECT_TRUE(is_escape(packed.record(0, 1).data() + gu.scales_offset + 5 * gu.scale_stride));
    const std::uint8_t* span15 =
        packed.record(0, 0).data() + dn.scales_offset + 9 * dn.scale_stride;
    EXPECT_FALSE(is_escape(span15));
    EXPECT_EQ(span15[0], 240);
    EXPECT_TRUE(is_escape(packed.record(1, 1).data() + dn.scales_offset + 2 * dn.scale_stride));
}

TEST_F(Repack120bWidths, SameBytesForAnyThreadCount) {
    run(StoreKind::kPacked, out_ / "a.nstore", 1);
    run(StoreKind::kPacked, out_ / "b.nstore", 4);
    EXPECT_TRUE(test::read_file(out_ / "a.nstore") == test::read_file(out_ / "b.nstore"));
}

TEST_F(Repack120bWidths, ProgressCountsEveryRecord) {
    RepackOptions o;
    o.checkpoint = checkpoint();
    o.out = out_ / "raw.nstore";
    std::vector<RepackProgress> seen;
    o.on_progress = [&](const RepackProgress& p) { seen.push_back(p); };
    const RepackResult r = repack(o);
    ASSERT_EQ(seen.size(), 4u);
    for (std::size_t i = 0; i < seen.size(); ++i) {
        EXPECT_EQ(seen[i].records_done, static_cast<std::int64_t>(i + 1));
        EXPECT_EQ(seen[i].records_total, 4);
        EXPECT_EQ(seen[i].bytes_total, r.bytes);  // exact for raw
        EXPECT_GT(seen[i].bytes_done, 0u);
    }
    EXPECT_EQ(seen.back().bytes_done, r.bytes);
}

TEST_F(Repack120bWidths, CancelledRepackLeavesNoFile) {
    std::atomic<bool> cancel{false};
    RepackOptions o;
    o.checkpoint = checkpoint();
    o.out = out_ / "store.nstore";
    o.kind = StoreKind::kPacked;
    o.cancel = &cancel;
    o.on_progress = [&](const RepackProgress& p) {
        if (p.records_done == 2) cancel = true;
    };
    EXPECT_THROW(repack(o), Cancelled);
    EXPECT_TRUE(fs::is_empty(out_.path()));  // neither the store nor its temporary file
}

TEST_F(Repack120bWidths, ExistingStoreSurvivesAFailedRepack) {
    const fs::path path = out_ / "experts.nstore";
    RepackOptions first;
    first.checkpoint = test::tiny_model_dir();
    first.out = path;
    repack(first);
    const std::string before = test::read_file(path);

    std::atomic<bool> cancel{false};
    RepackOptions o;
    o.checkpoint = checkpoint();
    o.out = path;
    o.kind = StoreKind::kPacked;
    o.cancel = &cancel;
    o.on_progress = [&](const RepackProgress& p) {
        if (p.records_done == 3) cancel = true;
    };
    EXPECT_THROW(repack(o), Cancelled);
    o.cancel = nullptr;
    o.checkpoint = out_ / "no-such-checkpoint";
    EXPECT_THAT(error_of([&] { repack(o); }), HasSubstr("no-such-checkpoint"));
    EXPECT_EQ(test::read_file(path), before);
    std::size_t files = 0;
    for ([[maybe_unused]] const auto& f : fs::directory_iterator(out_.path())) ++files;
    EXPECT_EQ(files, 1u);
    EXPECT_TRUE(verify_store(path, {}).ok());
}

TEST_F(Repack120bWidths, BadDestinations) {
    RepackOptions o;
    o.checkpoint = test::tiny_model_dir();
    o.out = out_ / "missing-folder" / "x.nstore";
    EXPECT_THAT(error_of([&] { repack(o); }), HasSubstr("missing-folder does not exist"));
    o.out = out_.path();
    EXPECT_THAT(error_of([&] { repack(o); }), HasSubstr("is a folder"));
    o.checkpoint = checkpoint();
    o.out = checkpoint() / "model-00000-of-00001.safetensors";
    EXPECT_THAT(error_of([&] { repack(o); }), HasSubstr("is a file of the checkpoint itself"));
}

}  // namespace
}  // namespace neural::store
