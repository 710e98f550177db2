// KvCheckpoints: the host copies of the GPU backend's K/V per sequence (budget, LRU, longest
// matching prefix). The GPU side is tested in tests/cuda/hybrid_test.cpp.
#include <gtest/gtest.h>

#include <numeric>

#include "cuda/hybrid/kv_checkpoints.h"
#include "neural/error.h"

namespace neural {
namespace {

constexpr std::uint64_t kPer = 4;  // floats per position

std::vector<float> data_for(std::size_t positions, float base) {
    std::vector<float> d(positions * kPer);
    std::iota(d.begin(), d.end(), base);
    return d;
}

TEST(KvCheckpoints, LongestMatchingPrefixWinsAndIsLimited) {
    KvCheckpoints c(1 << 20, kPer);
    ASSERT_TRUE(c.save(1, {5, 6, 7, 8}, data_for(4, 0)));
    ASSERT_TRUE(c.save(2, {5, 6, 9}, data_for(3, 100)));
    const std::vector<std::int32_t> q = {5, 6, 7, 8, 10};
    auto m = c.best(3, q, 100);
    ASSERT_NE(m.entry, nullptr);
    EXPECT_EQ(m.entry->id, 1u);
    EXPECT_EQ(m.length, 4);
    m = c.best(3, q, 2);  // the caller's limit (its own length)
    EXPECT_EQ(m.length, 2);
    m = c.best(3, std::vector<std::int32_t>{5, 6, 9, 9}, 100);
    EXPECT_EQ(m.entry->id, 2u);
    EXPECT_EQ(m.length, 3);
    EXPECT_EQ(c.best(3, std::vector<std::int32_t>{4}, 100).entry, nullptr);
    EXPECT_EQ(common_prefix(std::vector<std::int32_t>{1, 2, 3}, std::vector<std::int32_t>{1, 2}),
              2);
}

TEST(KvCheckpoints, TiesGoToTheSequencesOwnEntryThenToTheMostRecent) {
    KvCheckpoints c(1 << 20, kPer);
    c.save(1, {1, 2, 3}, data_for(3, 0));
    c.save(2, {1, 2, 4}, data_for(3, 0));
    c.save(3, {1, 2, 5}, data_for(3, 0));
    const std::vector<std::int32_t> q = {1, 2, 7};
    EXPECT_EQ(c.best(9, q, 10).entry->id, 3u);  // most recent (and now used)
    EXPECT_EQ(c.best(2, q, 10).entry->id, 2u);  // its own, although 3 is more recent
    EXPECT_EQ(c.best(9, q, 10).entry->id, 2u);  // 2 was used last
}

TEST(KvCheckpoints, BudgetDropsLeastRecentlyUsedAndSavingReplaces) {
    const std::uint64_t per_entry = 3 * kPer * sizeof(float);
    KvCheckpoints c(2 * per_entry, kPer);
    c.save(1, {1, 1, 1}, data_for(3, 0));
    c.save(2, {2, 2, 2}, data_for(3, 0));
    c.best(1, std::vector<std::int32_t>{1}, 5);  // 1 is now the more recent
    c.save(3, {3, 3, 3}, data_for(3, 0));        // drops 2
    EXPECT_EQ(c.size(), 2u);
    EXPECT_EQ(c.bytes(), 2 * per_entry);
    EXPECT_EQ(c.best(0, std::vector<std::int32_t>{2}, 5).entry, nullptr);
    EXPECT_NE(c.best(0, std::vector<std::int32_t>{1}, 5).entry, nullptr);
    // Saving a sequence again replaces its entry.
    c.save(1, {1, 1}, data_for(2, 50));
    EXPECT_EQ(c.size(), 2u);
    EXPECT_EQ(c.best(1, std::vector<std::int32_t>{1, 1, 1}, 5).length, 2);
    EXPECT_EQ(c.best(1, std::vector<std::int32_t>{1}, 5).entry->data[0], 50.0f);
    // Too large for the budget, or empty: nothing kept (the older entry of that id is gone too).
    EXPECT_FALSE(c.save(3, {3, 3, 3, 3, 3, 3, 3}, data_for(7, 0)));
    EXPECT_EQ(c.best(0, std::vector<std::int32_t>{3}, 5).entry, nullptr);
    EXPECT_FALSE(c.save(4, {}, {}));
    c.erase(1);
    EXPECT_EQ(c.size(), 0u);
    EXPECT_EQ(c.bytes(), 0u);
}

TEST(KvCheckpoints, MismatchedDataIsAnError) {
    KvCheckpoints c(1 << 20, kPer);
    EXPECT_THROW(c.save(1, {1, 2}, data_for(3, 0)), Error);
    EXPECT_THROW(KvCheckpoints(1, 0), Error);
}

// Ring checkpoints: 2 floats per position in the full layers, 3 in the ring layers, window 3.
// An entry of 10 positions whose ring part holds the last 4 (positions 6..9) restores a prefix
// of m >= 10 - 4 + 3 - 1 = 8 positions (the window before m: positions m - 2 .. m - 1 >= 6).
TEST(KvCheckpoints, RingEntriesRestoreOnlyPrefixesTheirRingPartCovers) {
    KvCheckpoints c(1 << 20, 2, 3, 3);
    std::vector<std::int32_t> t(10);
    std::iota(t.begin(), t.end(), 100);
    ASSERT_TRUE(c.save(1, t, std::vector<float>(10 * 2 + 4 * 3, 1.0f), 4));
    std::vector<std::int32_t> q = t;
    q.push_back(7);
    auto m = c.best(2, q, 100);
    ASSERT_NE(m.entry, nullptr);
    EXPECT_EQ(m.length, 10);
    EXPECT_EQ(m.entry->ring_rows, 4);
    EXPECT_EQ(m.entry->min_restore(3), 8);
    EXPECT_EQ(c.best(2, q, 8).length, 8);       // the limit at the shortest restorable prefix
    EXPECT_EQ(c.best(2, q, 7).entry, nullptr);  // one shorter: the window before it is gone
    q[7] = -1;                                  // shares only 7 positions
    EXPECT_EQ(c.best(2, q, 100).entry, nullptr);
    // A ring part holding every position restores any prefix; -1 means all.
    ASSERT_TRUE(c.save(3, {1, 2, 3}, std::vector<float>(3 * 2 + 3 * 3), -1));
    EXPECT_EQ(c.best(9, std::vector<std::int32_t>{1, 9}, 100).length, 1);
    // A ring part shorter than the window - 1 cannot restore even the whole sequence: not kept.
    EXPECT_FALSE(c.save(4, t, std::vector<float>(10 * 2 + 1 * 3), 1));
    EXPECT_EQ(c.size(), 2u);
    // Sizes are checked against both parts.
    EXPECT_THROW(c.save(5, t, std::vector<float>(10 * 2 + 4 * 3 + 1), 4), Error);
    EXPECT_THROW(c.save(5, t, std::vector<float>(10 * 2 + 11 * 3), 11), Error);
    EXPECT_THROW(KvCheckpoints(1, 2, 3, 0), Error);
}

}  // namespace
}  // namespace neural
