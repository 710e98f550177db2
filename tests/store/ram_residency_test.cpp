// RAM residency of the expert store (--warmup-ram, --lock-ram, --release-resident): releasing a
// record drops its pages from RAM (mincore / the working set), the warm-up faults records in in
// the ranking's order within its time bound and skips released ones, the hot-first order, and
// the model-level wiring (LoadOptions).
#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "platform/page_residency.h"
#include "platform/process_stats.h"
#include "runtime/model.h"
#include "store/ranking.h"
#include "store/repack.h"
#include "store/store.h"
#include "store/store_support.h"
#include "support/damaged_store.h"
#include "support/fixtures.h"

namespace neural::store {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class RamResidency : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        tmp_ = new test::TempDir();
        RepackOptions o;
        o.checkpoint = test::tiny_model_dir();
        o.out = *tmp_ / "raw.nstore";
        o.kind = StoreKind::kRaw;
        o.threads = 2;
        repack(o);
        store_path_ = o.out;
        // Records of the real size (13 MB at H = I = 2880): the page cache holds a file in
        // folios of up to a few hundred KiB (readahead), evicted only whole, so releasing one
        // record of the tiny fixture (8 KiB) may not evict anything; a real record loses all
        // but the folios it shares with its neighbours.
        test::SynthSpec spec;  // 2 layers x 2 experts
        test::write_synthetic_checkpoint(*tmp_ / "big", spec);
        o.checkpoint = *tmp_ / "big";
        o.out = *tmp_ / "big.nstore";
        repack(o);
        big_path_ = o.out;
    }
    static void TearDownTestSuite() {
        delete tmp_;
        tmp_ = nullptr;
    }

    // Pages of the record that are resident; skips the test where the OS cannot say.
    static std::uint64_t resident(const ExpertStore& s, int layer, int expert) {
        const auto r = s.record(layer, expert);
        const auto n = resident_pages(r.data(), r.size());
        if (!n) ADD_FAILURE() << "resident_pages unavailable";
        return n.value_or(0);
    }
    static std::uint64_t pages(const ExpertStore& s, int layer, int expert) {
        const auto r = s.record(layer, expert);
        return (r.size() + page_size() - 1) / page_size();
    }
    // Drops the whole store file from RAM (no other mapping of it may be open).
    static void drop_file(const fs::path& path) {
        const MappedFile f = MappedFile::open(path);
        const PageRelease r = release_mapped_pages(f, 0, f.size());
        ASSERT_TRUE(r.ok) << r.message;
    }
    // At most this many pages of a released 13 MB record may stay: the two folios it shares
    // with its neighbours (readahead folios are at most a few hundred KiB; 2 x 1 MiB here).
    static std::uint64_t boundary_pages() { return 2 * ((1u << 20) / page_size()); }

    static test::TempDir* tmp_;
    static fs::path store_path_;
    static fs::path big_path_;
};
test::TempDir* RamResidency::tmp_ = nullptr;
fs::path RamResidency::store_path_;
fs::path RamResidency::big_path_;

std::vector<ExpertKey> all_keys(const ExpertStore& s) {
    return hot_first(nullptr, s.num_layers(), s.num_experts());
}

TEST_F(RamResidency, WarmUpFaultsRecordsInOrderWithinTheBound) {
    // A store whose records are all out of RAM (opening it reads the header, and the OS reads
    // ahead around it: dropped after opening).
    const ExpertStore s = ExpertStore::open(store_path_);
    const PageRelease dropped = s.drop_from_ram();
    ASSERT_TRUE(dropped.ok) << dropped.message;
    EXPECT_FALSE(s.released(0, 0));  // not marked: the warm-up still reads them
#ifndef _WIN32
    for (const ExpertKey& k : all_keys(s)) ASSERT_EQ(resident(s, k.layer, k.expert), 0u);
#endif
    // Hot first: the ranking's order, here layer 3 first, expert 7 down to 0.
    std::vector<ExpertKey> order;
    for (int l = s.num_layers() - 1; l >= 0; --l) {
        for (int e = s.num_experts() - 1; e >= 0; --e) order.push_back({l, e});
    }
    // Stop after 5 records: exactly the first 5 of the order are in RAM, in that order.
    std::vector<ExpertKey> seen;
    const WarmupReport w = s.warm_up(order, std::chrono::seconds(30), nullptr,
                                     [&](const ExpertKey& k, const WarmupReport&) {
                                         seen.push_back(k);
                                         return seen.size() < 5;
                                     });
    ASSERT_EQ(seen.size(), 5u);
    EXPECT_EQ(w.records, 5u);
    EXPECT_FALSE(w.completed);
    for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], order[i]) << i;
    for (std::size_t i = 0; i < 5; ++i) {
        const ExpertKey k = order[i];
        EXPECT_EQ(resident(s, k.layer, k.expert), pages(s, k.layer, k.expert)) << i;
    }
#ifndef _WIN32  // Linux: released pages left the page cache, so the warm-up read them from disk
    EXPECT_EQ(w.pages_loaded, w.pages);
    // Layer 0 expert 0 is last in the order: not warmed (and far from the read-ahead window's
    // 5 records... the window is 64 MiB, so it may have been asked for: only check the touched).
#endif
    EXPECT_GT(w.bytes, 0u);

    // A zero time bound touches nothing.
    const WarmupReport none = s.warm_up(order, std::chrono::nanoseconds(0));
    EXPECT_EQ(none.records, 0u);
    EXPECT_EQ(none.bytes, 0u);
    EXPECT_FALSE(none.completed);
    EXPECT_FALSE(none.stopped);

    // Enough time: every record, and then all of the store's records are resident.
    const WarmupReport all = s.warm_up(order, std::chrono::seconds(30));
    EXPECT_TRUE(all.completed);
    EXPECT_EQ(all.records, order.size());
    EXPECT_LE(all.seconds, 30.0);
    for (const ExpertKey& k : order)
        EXPECT_EQ(resident(s, k.layer, k.expert), pages(s, k.layer, k.expert));

    // A set stop flag stops before the first record.
    std::atomic<bool> stop{true};
    const WarmupReport stopped = s.warm_up(order, std::chrono::seconds(30), &stop);
    EXPECT_TRUE(stopped.stopped);
    EXPECT_EQ(stopped.records, 0u);
}

TEST_F(RamResidency, ReleaseDropsTheRecordsPagesAndWarmUpSkipsIt) {
    ExpertStore s = ExpertStore::open(big_path_);
    telemetry::RamCounters ram;
    s.set_ram_counters(&ram);
    const auto order = all_keys(s);
    ASSERT_TRUE(s.warm_up(order, std::chrono::seconds(60)).completed);
    ASSERT_EQ(resident(s, 1, 0), pages(s, 1, 0));
    EXPECT_FALSE(s.released(1, 0));
    const PageRelease r = s.release_expert(1, 0);
    EXPECT_TRUE(r.ok) << r.message;
    EXPECT_TRUE(s.released(1, 0));
    EXPECT_EQ(ram.released_records.load(), 1u);
    EXPECT_EQ(ram.released_bytes.load(), s.entry(1, 0).payload_bytes);
#ifdef _WIN32
    EXPECT_TRUE(r.mapping_released) << r.message;
#else
    EXPECT_TRUE(r.cache_released) << r.message;
    EXPECT_LE(resident(s, 1, 0), boundary_pages()) << "of " << pages(s, 1, 0);
    EXPECT_EQ(r.pages_left, resident(s, 1, 0));
    EXPECT_GE(resident(s, 0, 1), pages(s, 0, 1) - boundary_pages() / 2);  // the neighbours stay
    EXPECT_GE(resident(s, 1, 1), pages(s, 1, 1) - boundary_pages() / 2);
#endif
    s.release_expert(1, 0);  // idempotent: counted once
    EXPECT_EQ(ram.released_records.load(), 1u);
    // The warm-up skips it (it lives in VRAM); its bytes still read correctly on demand.
    const WarmupReport w = s.warm_up(order, std::chrono::seconds(60));
    EXPECT_TRUE(w.completed);
    EXPECT_EQ(w.skipped, 1u);
    EXPECT_EQ(w.records, order.size() - 1);
#ifndef _WIN32
    EXPECT_LE(resident(s, 1, 0), boundary_pages());
#endif
    EXPECT_TRUE(s.record_checksum_ok(1, 0));

    EXPECT_THAT(test::error_of([&] { s.release_expert(2, 0); }),
                HasSubstr("no expert 0 in layer 2"));
}

TEST_F(RamResidency, NoteResidentInVramReleasesOnlyWhenAsked) {
    ExpertStore s = ExpertStore::open(store_path_);
    EXPECT_FALSE(s.note_resident_in_vram(0, 1));
    EXPECT_FALSE(s.released(0, 1));
    s.set_release_resident(true);
    EXPECT_TRUE(s.note_resident_in_vram(0, 1));
    EXPECT_TRUE(s.released(0, 1));
}

// --pin-store: while the GPU backend has the mapping registered, nothing gives RAM back (the
// pages of a registered range must stay); afterwards releasing works again.
TEST_F(RamResidency, APinnedStoreReleasesNothing) {
    ExpertStore s = ExpertStore::open(big_path_);
    telemetry::RamCounters ram;
    s.set_ram_counters(&ram);
    s.set_release_resident(true);
    ASSERT_TRUE(s.warm_up(all_keys(s), std::chrono::seconds(60)).completed);
    EXPECT_EQ(s.mapping().size(), s.file_bytes());
    EXPECT_FALSE(s.pinned());
    s.set_pinned(true);
    EXPECT_TRUE(s.pinned());
    EXPECT_FALSE(s.note_resident_in_vram(1, 0));
    const PageRelease r = s.release_expert(1, 0);
    EXPECT_FALSE(r.ok);
    EXPECT_THAT(r.message, HasSubstr("--pin-store"));
    EXPECT_FALSE(s.drop_from_ram().ok);
    EXPECT_FALSE(s.released(1, 0));
    EXPECT_EQ(ram.released_records.load(), 0u);
    EXPECT_EQ(resident(s, 1, 0), pages(s, 1, 0));
    EXPECT_THAT(test::error_of([&] { s.release_expert(2, 0); }),
                HasSubstr("no expert 0 in layer 2"));
    s.set_pinned(false);
    EXPECT_TRUE(s.note_resident_in_vram(1, 0));
    EXPECT_TRUE(s.released(1, 0));
    EXPECT_EQ(ram.released_records.load(), 1u);
}

TEST_F(RamResidency, LockLocksHotRecordsWithinTheBudgetOrSaysWhy) {
    ExpertStore s = ExpertStore::open(store_path_);
    telemetry::RamCounters ram;
    s.set_ram_counters(&ram);
    s.release_expert(0, 0);  // lives in VRAM: never locked
    const auto order = all_keys(s);
    const std::uint64_t record = s.entry(0, 1).payload_bytes;
    const LockReport r = s.lock_experts(order, 3 * record + record / 2);  // room for 3 records
    if (r.records == 0) {
        EXPECT_TRUE(r.limited);
        EXPECT_THAT(r.message, HasSubstr("OS limit"));
        GTEST_SKIP() << "cannot lock memory here: " << r.message;
    }
    EXPECT_EQ(r.records, 3u) << r.message;
    EXPECT_FALSE(r.limited);
    EXPECT_FALSE(s.locked(0, 0));
    EXPECT_TRUE(s.locked(0, 1));
    EXPECT_TRUE(s.locked(0, 3));
    EXPECT_FALSE(s.locked(0, 4));
    EXPECT_EQ(ram.locked_records.load(), 3u);
    EXPECT_EQ(ram.locked_bytes.load(), 3 * record);
    EXPECT_EQ(resident(s, 0, 2), pages(s, 0, 2));  // locking faults the pages in
    // Releasing a locked record unlocks it first.
    EXPECT_TRUE(s.release_expert(0, 2).ok);
    EXPECT_FALSE(s.locked(0, 2));
    EXPECT_EQ(ram.locked_records.load(), 2u);
    EXPECT_EQ(ram.locked_bytes.load(), 2 * record);
    // The warm-up skips locked records (they are in RAM for good).
    const WarmupReport w = s.warm_up(order, std::chrono::seconds(30));
    EXPECT_EQ(w.skipped, 4u);  // (0, 0) and (0, 2) released, (0, 1) and (0, 3) locked
}

TEST(HotFirst, RankingOrderThenLayerOrder) {
    const Ranking ranking = {{0, 5, 1}, {7, 0, 5}};
    const std::vector<ExpertKey> order = hot_first(&ranking, 2, 3);
    const std::vector<ExpertKey> want = {{1, 0}, {0, 1}, {1, 2}, {0, 2}, {0, 0}, {1, 1}};
    EXPECT_EQ(order, want);
    const std::vector<ExpertKey> plain = hot_first(nullptr, 2, 2);
    EXPECT_EQ(plain, (std::vector<ExpertKey>{{0, 0}, {0, 1}, {1, 0}, {1, 1}}));
    EXPECT_THAT(test::error_of([&] { hot_first(&ranking, 3, 3); }),
                HasSubstr("2 layers, the model 3"));
    EXPECT_THAT(test::error_of([&] { hot_first(&ranking, 2, 4); }), HasSubstr("3 experts"));
}

#ifndef _WIN32
// Page faults of reading one byte of every page of record (layer, expert).
std::uint64_t faults_reading(const ExpertStore& s, int layer, int expert) {
    const auto r = s.record(layer, expert);
    const std::uint64_t before = process_page_faults();
    (void)touch_pages(r.data(), r.size());
    return process_page_faults() - before;
}
#endif

TEST_F(RamResidency, AutoWarmUpMapsAndChecksOnlyRecordsAlreadyInRam) {
    // Records (0, 0) and (1, 1) in the page cache, (0, 1) and (1, 0) not.
    drop_file(big_path_);
    {
        const ExpertStore s = ExpertStore::open(big_path_);
        ASSERT_TRUE(
            s.warm_up(std::vector<ExpertKey>{{0, 0}, {1, 1}}, std::chrono::seconds(60)).completed);
    }
    // A new mapping: the cached pages are not mapped into it yet.
    const ExpertStore s = ExpertStore::open(big_path_);
    const std::vector<ExpertKey> order = all_keys(s);
#ifndef _WIN32
    const std::uint64_t cold_before = resident(s, 0, 1) + resident(s, 1, 0);
#endif
    const CachedWarmupReport r = s.map_cached(order, 3);
#ifdef _WIN32
    EXPECT_FALSE(r.supported);  // page_residency.h: Windows cannot say what the cache holds
    EXPECT_EQ(r.records, 0u);
#else
    ASSERT_TRUE(r.supported);
    EXPECT_EQ(r.records, 2u);
    EXPECT_EQ(r.not_cached, 2u);
    EXPECT_EQ(r.damaged, 0u);
    EXPECT_FALSE(r.stopped);
    EXPECT_EQ(r.bytes, s.record(0, 0).size() + s.record(1, 1).size());
    EXPECT_TRUE(s.record_verified(0, 0));
    EXPECT_TRUE(s.record_verified(1, 1));
    EXPECT_FALSE(s.record_verified(0, 1));
    EXPECT_FALSE(s.record_verified(1, 0));
    // Nothing was read from disk: the other records have no more pages in RAM than before.
    EXPECT_EQ(resident(s, 0, 1) + resident(s, 1, 0), cold_before);
    // The mapped records read without page faults; a cached record of another fresh mapping
    // that was not mapped takes one fault per few pages (the comparison the pass is for).
    EXPECT_LE(faults_reading(s, 0, 0), 4u);
    EXPECT_LE(faults_reading(s, 1, 1), 4u);
    const ExpertStore fresh = ExpertStore::open(big_path_);
    EXPECT_GT(faults_reading(fresh, 0, 0), pages(fresh, 0, 0) / 64);
#endif
    // A set stop flag stops before the first record.
    std::atomic<bool> stop{true};
    const CachedWarmupReport stopped = s.map_cached(order, 2, &stop);
    EXPECT_TRUE(stopped.stopped);
    EXPECT_EQ(stopped.records, 0u);
    // An order outside the store is an error, as for the other levers.
    EXPECT_THAT(test::error_of([&] {
                    s.map_cached(std::vector<ExpertKey>{{2, 0}});
                }),
                HasSubstr("outside 2 layers x 2 experts"));
}

TEST_F(RamResidency, AutoWarmUpReportsADamagedRecordAndChecksTheRest) {
    const fs::path damaged = *tmp_ / "damaged.nstore";
    fs::copy_file(store_path_, damaged, fs::copy_options::overwrite_existing);
    test::zero_store_record(damaged, 1, 2);
    const ExpertStore s = ExpertStore::open(damaged);
    const std::vector<ExpertKey> order = all_keys(s);
    for (const ExpertKey& k : order) (void)touch_pages(s.record(k.layer, k.expert).data(), 1);
    (void)s.warm_up(order, std::chrono::seconds(30));  // all of the tiny store in RAM
    // Two threads claim the records in order; the report names the damaged one either way.
    const CachedWarmupReport r = s.map_cached(order, 2);
#ifndef _WIN32
    EXPECT_EQ(r.threads, 2);
    EXPECT_EQ(r.records, order.size());
    EXPECT_EQ(r.damaged, 1u);
    EXPECT_THAT(r.damage, HasSubstr("layer 1"));
    EXPECT_FALSE(s.record_verified(1, 2));  // still reported by the read that needs it
    EXPECT_TRUE(s.record_verified(1, 3));
#else
    EXPECT_EQ(r.damaged, 0u);
#endif
}

TEST_F(RamResidency, ModelLoadRunsTheAutoWarmUpByDefault) {
    LoadOptions o;  // warmup_ram_seconds: kWarmupRamAuto, during the load
    o.store = store_path_;
    [[maybe_unused]] std::uint64_t records = 0;  // checked below, except on Windows
    std::unique_ptr<Model> m;
    // The case under test is a store wholly in the page cache. A busy machine (a sanitizer run
    // beside a cross build) can evict a page between the warm-up here and the load; the auto
    // warm-up then rightly leaves that record for its first read, so the test warms and loads
    // again (at most three times) instead of asserting on the machine's memory pressure.
    for (int attempt = 0; attempt < 3; ++attempt) {
        {  // the whole store in the page cache (a repack may have dropped what it wrote)
            const ExpertStore s = ExpertStore::open(store_path_);
            ASSERT_TRUE(s.warm_up(all_keys(s), std::chrono::seconds(30)).completed);
            records = static_cast<std::uint64_t>(s.num_layers() * s.num_experts());
        }
        m = Model::load(test::tiny_model_dir(), o);
#ifdef _WIN32
        break;  // the records it maps are not checked there (below)
#else
        if (m->telemetry().ram.warmup_records.load() == records) break;
#endif
    }
    const telemetry::RamCounters& ram = m->telemetry().ram;
    EXPECT_EQ(ram.warmup_state.load(), telemetry::RamCounters::kDone);
    EXPECT_EQ(ram.warmup_pages_loaded.load(), 0u);  // it reads nothing from disk
#ifndef _WIN32
    EXPECT_EQ(ram.warmup_records.load(), records);  // all cached: all mapped and checked
    for (const ExpertKey& k : all_keys(*m->store()))
        EXPECT_TRUE(m->store()->record_verified(k.layer, k.expert));
#endif
    // Without a store the default warm-up has nothing to do, and is no error.
    EXPECT_NO_THROW(Model::load(test::tiny_model_dir(), LoadOptions{}));
    LoadOptions bad;
    bad.warmup_ram_seconds = -2;
    bad.store = store_path_;
    EXPECT_THAT(test::error_of([&] { Model::load(test::tiny_model_dir(), bad); }),
                HasSubstr("warm-up time must be 0 or more seconds (or auto)"));
}

TEST_F(RamResidency, ModelLoadRunsTheWarmUpAndPublishesIt) {
    drop_file(store_path_);
    LoadOptions o;
    o.store = store_path_;
    o.warmup_ram_seconds = 30;
    auto m = Model::load(test::tiny_model_dir(), o);  // background thread
    m->wait_ram_warmup();
    const telemetry::RamCounters& ram = m->telemetry().ram;
    EXPECT_EQ(ram.warmup_state.load(), telemetry::RamCounters::kDone);
    const auto records =
        static_cast<std::uint64_t>(m->store()->num_layers() * m->store()->num_experts());
    EXPECT_EQ(ram.warmup_records.load(), records);
    EXPECT_GT(ram.warmup_bytes.load(), 0u);
#ifndef _WIN32
    std::uint64_t all_pages = 0;
    for (const ExpertKey& k : all_keys(*m->store()))
        all_pages += pages(*m->store(), k.layer, k.expert);
    // Opening the store reads ahead around its header: the tiny store may be all in RAM already.
    EXPECT_LE(ram.warmup_pages_loaded.load(), all_pages);
#endif

    o.warmup_sync = true;
    o.release_resident = true;  // CPU backend: nothing is in VRAM, nothing released
    auto sync = Model::load(test::tiny_model_dir(), o);
    EXPECT_EQ(sync->telemetry().ram.warmup_state.load(), telemetry::RamCounters::kDone);
    EXPECT_TRUE(sync->store()->release_resident());
    EXPECT_EQ(sync->telemetry().ram.released_records.load(), 0u);

    LoadOptions no_store;
    no_store.warmup_ram_seconds = 1;
    EXPECT_THAT(test::error_of([&] { Model::load(test::tiny_model_dir(), no_store); }),
                HasSubstr("need --store"));
    LoadOptions bad_ranking = o;
    bad_ranking.gpu.ranking = *tmp_ / "missing.json";
    EXPECT_THAT(test::error_of([&] { Model::load(test::tiny_model_dir(), bad_ranking); }),
                HasSubstr("cannot read ranking file"));
}

TEST_F(RamResidency, UnloadingStopsABackgroundWarmUp) {
    LoadOptions o;
    o.store = store_path_;
    o.warmup_ram_seconds = 3600;
    auto m = Model::load(test::tiny_model_dir(), o);
    m.reset();  // joins the thread; must not hang or read an unmapped store
    SUCCEED();
}

}  // namespace
}  // namespace neural::store
