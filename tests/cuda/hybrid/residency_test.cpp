// The slot policy of the hybrid backend (engine/cuda/hybrid/residency.h), without a GPU.
#include <gtest/gtest.h>

#include <set>

#include "cuda/hybrid/residency.h"
#include "neural/error.h"

namespace neural {
namespace {

ResidencyOptions options(int refresh_every = 2, int refresh_m = 2, double static_fraction = 0.5) {
    ResidencyOptions o;
    o.refresh_every = refresh_every;
    o.refresh_m = refresh_m;
    o.static_fraction = static_fraction;
    o.prefill_weight = 0.25;
    return o;
}

TEST(Residency, InitialPlacementTakesTheHottestExpertsStaticFirst) {
    Residency r(2, 4, 4, options());
    // Counts: layer 1 expert 3 hottest, then layer 0 expert 2, then layer 1 expert 0, ...
    const std::vector<std::vector<double>> ranking = {{1, 0, 9, 2}, {8, 0, 0, 10}};
    const auto placed = r.initial(ranking);
    ASSERT_EQ(placed.size(), 4u);
    EXPECT_EQ(r.static_slots(), 2);
    EXPECT_EQ(r.slot_of(1, 3), 0);
    EXPECT_EQ(r.slot_of(0, 2), 1);
    EXPECT_EQ(r.slot_of(1, 0), 2);
    EXPECT_EQ(r.slot_of(0, 3), 3);
    EXPECT_EQ(r.slot_of(0, 0), -1);
    EXPECT_EQ(r.resident_count(), 4);
}

TEST(Residency, WithoutARankingOnlyStaticSlotsStartFilledInIndexOrder) {
    Residency r(2, 4, 4, options());
    const auto placed = r.initial({});
    ASSERT_EQ(placed.size(), 2u);
    EXPECT_EQ(r.slot_of(0, 0), 0);
    EXPECT_EQ(r.slot_of(0, 1), 1);
    EXPECT_EQ(r.owner(2), -1);
    EXPECT_EQ(r.owner(3), -1);
}

TEST(Residency, BadRankingsAreErrors) {
    Residency r(2, 4, 4, options());
    EXPECT_THROW(r.initial({{1, 2, 3, 4}}), Error);                 // one layer missing
    EXPECT_THROW(r.initial({{1, 2, 3}, {1, 2, 3, 4}}), Error);      // short layer
    EXPECT_THROW(r.initial({{1, 2, 3, -1}, {1, 2, 3, 4}}), Error);  // negative count
}

TEST(Residency, RefreshAdmitsHotMissesIntoFreeAdaptiveSlots) {
    Residency r(1, 8, 4, options(/*refresh_every=*/2, /*refresh_m=*/2));
    r.initial({});  // static slots 0, 1 hold experts 0, 1; slots 2, 3 free
    const int hot[] = {5, 6};
    for (int t = 0; t < 2; ++t) {
        r.observe(0, hot, false);
        r.end_token();
    }
    ASSERT_EQ(r.pending_count(), 2u);
    auto a = r.pending(0, 5);
    ASSERT_TRUE(a.has_value());
    EXPECT_GE(a->slot, 2);  // adaptive slots only
    EXPECT_EQ(a->victim_layer, -1);
    EXPECT_EQ(r.slot_of(0, 5), -1);
    r.begin(*a);
    EXPECT_FALSE(r.pending(0, 5).has_value());
    EXPECT_EQ(r.slot_of(0, 5), -1);  // not before the copy landed
    r.complete(*a);
    EXPECT_EQ(r.slot_of(0, 5), a->slot);
}

TEST(Residency, StaticSlotsAreNeverEvictedAndColdAdaptiveOnesAre) {
    Residency r(1, 8, 4, options(1, 4));
    r.initial({{10, 9, 8, 7, 0, 0, 0, 0}});  // static: 0, 1; adaptive: 2, 3
    const int hot[] = {6, 7};
    for (int t = 0; t < 3; ++t) {
        r.observe(0, hot, false);
        r.end_token();
    }
    std::set<int> victims;
    for (int e : {6, 7}) {
        auto a = r.pending(0, e);
        if (!a) continue;
        EXPECT_GE(a->slot, 2) << "a static slot was chosen as a victim";
        victims.insert(a->victim_expert);
    }
    EXPECT_FALSE(victims.empty());
    for (int v : victims) EXPECT_TRUE(v == 2 || v == 3) << v;
}

TEST(Residency, HysteresisKeepsAResidentExpertAgainstAnEquallyHotOne) {
    Residency r(1, 4, 2, options(1, 1, 0.0));  // no static slots
    r.initial({{5, 0, 0, 0}});                 // expert 0 in slot 0, slot 1 free... both adaptive
    // Expert 1 and expert 0 routed equally: expert 1 takes the free slot, nobody evicts 0.
    const int both[] = {0, 1};
    for (int t = 0; t < 4; ++t) {
        r.observe(0, both, false);
        r.end_token();
        if (auto a = r.pending(0, 1)) {
            r.begin(*a);
            r.complete(*a);
        }
    }
    EXPECT_GE(r.slot_of(0, 0), 0);
    EXPECT_GE(r.slot_of(0, 1), 0);
    const int other[] = {2};
    r.observe(0, other, false);
    r.end_token();
    EXPECT_FALSE(r.pending(0, 2).has_value()) << "a single routing must not evict hot experts";
}

TEST(Residency, PromptRoutingsWeighLess) {
    Residency r(1, 4, 2, options(1, 1, 0.0));
    r.initial({});
    const int e0[] = {0}, e1[] = {1};
    r.observe(0, e0, true);
    r.observe(0, e1, false);
    EXPECT_DOUBLE_EQ(r.score(0, 0), 0.25);
    EXPECT_DOUBLE_EQ(r.score(0, 1), 1.0);
}

TEST(Residency, RefreshEveryZeroFreezesResidency) {
    Residency r(1, 8, 4, options(0, 4));
    r.initial({{1, 1, 1, 1, 0, 0, 0, 0}});
    const int hot[] = {7};
    for (int t = 0; t < 100; ++t) {
        r.observe(0, hot, false);
        r.end_token();
    }
    EXPECT_TRUE(r.frozen());
    EXPECT_EQ(r.pending_count(), 0u);
    EXPECT_EQ(r.slot_of(0, 7), -1);
}

// A frozen pool fills every slot at load (adaptive slots would stay empty forever): with a
// ranking the hottest experts, without one the first in index order.
TEST(Residency, AFrozenPoolIsAllStaticAndFullFromTheStart) {
    Residency ranked(1, 8, 4, options(0, 4, 0.5));
    EXPECT_EQ(ranked.static_slots(), 4);
    ranked.initial({{0, 5, 0, 4, 0, 3, 0, 2}});
    EXPECT_EQ(ranked.resident_count(), 4);
    for (int e : {1, 3, 5, 7}) EXPECT_GE(ranked.slot_of(0, e), 0) << e;
    Residency plain(2, 4, 6, options(0, 4, 0.25));
    plain.initial({});
    EXPECT_EQ(plain.static_slots(), 6);
    EXPECT_EQ(plain.resident_count(), 6);
    EXPECT_GE(plain.slot_of(1, 1), 0);
    EXPECT_EQ(plain.slot_of(1, 2), -1);
    // Adaptive pools keep their split.
    EXPECT_EQ(Residency(2, 4, 6, options(8, 4, 0.5)).static_slots(), 3);
}

TEST(Residency, MoreSlotsThanExpertsHoldEveryExpert) {
    Residency r(2, 3, 100, options());
    r.initial({{1, 2, 3}, {4, 5, 6}});
    EXPECT_EQ(r.slots(), 6);
    EXPECT_EQ(r.resident_count(), 6);
}

}  // namespace
}  // namespace neural

namespace neural {
namespace {

TEST(Residency, FreeAdaptiveSlotsFillFromTheFirstMissesWithoutEvicting) {
    Residency r(1, 8, 4, options(/*refresh_every=*/100, /*refresh_m=*/1));
    r.initial({});  // static slots hold experts 0, 1; slots 2, 3 free
    auto a = r.admission_for(0, 5);
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(a->slot, 2);
    EXPECT_EQ(a->victim_layer, -1);
    EXPECT_EQ(r.admission_for(0, 5)->slot, 2) << "asking again returns the same pending admission";
    auto b = r.admission_for(0, 6);
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->slot, 3);
    EXPECT_FALSE(r.admission_for(0, 7).has_value()) << "no free slot left";
    EXPECT_FALSE(r.admission_for(0, 0).has_value()) << "already resident";
    r.begin(*a);
    r.complete(*a);
    EXPECT_EQ(r.slot_of(0, 5), 2);
    Residency frozen(1, 8, 4, options(0));
    frozen.initial({});
    EXPECT_FALSE(frozen.admission_for(0, 5).has_value());
}

// Observes one prompt's routing (each row's experts at a layer) and returns its counts.
std::vector<std::uint32_t> prompt(Residency& r, const std::vector<std::vector<int>>& rows_at_layer,
                                  int layer) {
    std::vector<std::uint32_t> counts(static_cast<std::size_t>(r.layers() * r.experts()), 0);
    for (const auto& row : rows_at_layer) {
        r.observe(layer, row, true);
        for (int e : row) ++counts[static_cast<std::size_t>(layer * r.experts() + e)];
    }
    return counts;
}

void run_batch(Residency& r, const std::vector<Residency::Admission>& batch) {
    for (const auto& a : batch) r.begin(a);
    for (const auto& a : batch) r.complete(a);
}

TEST(Residency, TheFirstPromptFillsTheFreeAdaptiveSlotsMostUsedFirst) {
    // 2 layers x 8 experts, 6 slots: 3 static (experts 0..2 of layer 0), 3 adaptive and free.
    Residency r(2, 8, 6, options(8, 2));
    r.initial({});
    ASSERT_EQ(r.resident_count(), 3);
    // Layer 1's prompt rows: expert 5 four times, 6 three times, 7 twice, 4 once; layer 0's
    // expert 1 is static already.
    auto counts = prompt(r, {{5, 6}, {5, 6}, {5, 7}, {5, 6}, {7, 4}}, 1);
    counts[1] = 9;  // layer 0, expert 1: resident (static), never a candidate
    const auto batch = r.prompt_admissions(counts, 100, 0);
    ASSERT_EQ(batch.size(), 3u);
    EXPECT_EQ(batch[0].layer, 1);
    EXPECT_EQ(batch[0].expert, 5);
    EXPECT_EQ(batch[1].expert, 6);
    EXPECT_EQ(batch[2].expert, 7);
    std::set<int> slots;
    for (const auto& a : batch) {
        EXPECT_EQ(a.victim_layer, -1);  // free slots: nothing evicted
        EXPECT_GE(a.slot, r.static_slots());
        slots.insert(a.slot);
    }
    EXPECT_EQ(slots.size(), 3u);
    // Pending until begun; loading (not resident) between begin and complete.
    EXPECT_EQ(r.pending_count(), 3u);
    for (const auto& a : batch) r.begin(a);
    EXPECT_EQ(r.slot_of(1, 5), -1);
    EXPECT_FALSE(r.admission_for(1, 5).has_value());  // being loaded: not admitted twice
    for (const auto& a : batch) r.complete(a);
    EXPECT_EQ(r.slot_of(1, 5), batch[0].slot);
    EXPECT_EQ(r.resident_count(), 6);
    // max_free bounds the free-slot fill (a packed store assembles each record on the host).
    Residency small(2, 8, 6, options(8, 2));
    small.initial({});
    EXPECT_EQ(small.prompt_admissions(counts, 2, 0).size(), 2u);
}

TEST(Residency, LaterPromptsReplaceColderAdaptiveExpertsUpToTheLimit) {
    Residency r(1, 8, 4, options(8, 2));  // 2 static (0, 1), 2 adaptive
    r.initial({});
    run_batch(r, r.prompt_admissions(prompt(r, {{2, 3}}, 0), 100, 8));
    ASSERT_GE(r.slot_of(0, 2), 0);
    ASSERT_GE(r.slot_of(0, 3), 0);
    // A prompt of experts 4 (10 rows), 5 (10 rows) and 3 (once): no free slot left, so 4 and 5
    // replace the adaptive experts they beat by the hysteresis margin, here at most 1 of them.
    const auto counts = prompt(r, std::vector<std::vector<int>>(10, {4, 5}), 0);
    const auto batch = r.prompt_admissions(counts, 100, 1);
    ASSERT_EQ(batch.size(), 1u);
    EXPECT_EQ(batch[0].expert, 4);  // equal scores: index order
    EXPECT_EQ(batch[0].victim_layer, 0);
    EXPECT_TRUE(batch[0].victim_expert == 2 || batch[0].victim_expert == 3);
    EXPECT_LT(batch[0].slot, 4);
    EXPECT_GE(batch[0].slot, r.static_slots());  // static slots are never victims
    run_batch(r, batch);
    EXPECT_GE(r.slot_of(0, 4), 0);
    EXPECT_EQ(r.slot_of(0, batch[0].victim_expert), -1);
    // A prompt too light to beat the residents (hysteresis): nothing evicted.
    Residency q(1, 8, 4, options(8, 2));
    q.initial({});
    run_batch(q,
              q.prompt_admissions(prompt(q, std::vector<std::vector<int>>(4, {2, 3}), 0), 100, 8));
    EXPECT_TRUE(q.prompt_admissions(prompt(q, {{4}}, 0), 100, 8).empty());
    // Limit 0 evicts nothing.
    EXPECT_TRUE(
        q.prompt_admissions(prompt(q, std::vector<std::vector<int>>(40, {6}), 0), 100, 0).empty());
}

TEST(Residency, FrozenResidencyAdmitsNothingAfterAPromptAndBadCountsAreErrors) {
    Residency frozen(1, 8, 4, options(0));
    frozen.initial({});
    std::vector<std::uint32_t> counts(8, 5);
    EXPECT_TRUE(frozen.prompt_admissions(counts, 100, 100).empty());
    EXPECT_EQ(frozen.pending_count(), 0u);
    Residency r(1, 8, 4, options());
    r.initial({});
    EXPECT_THROW(r.prompt_admissions(std::vector<std::uint32_t>(7, 1), 100, 100), Error);
    // No counts at all: nothing.
    EXPECT_TRUE(r.prompt_admissions(std::vector<std::uint32_t>(8, 0), 100, 100).empty());
}

TEST(Residency, APendingRefreshAdmissionKeepsItsSlotAndItsExpert) {
    Residency r(1, 8, 4, options(1, 1));  // 2 static, 2 adaptive; refresh every token
    r.initial({});
    // A decode miss of expert 6 takes the first free adaptive slot (pending, not begun).
    const auto pending = r.admission_for(0, 6);
    ASSERT_TRUE(pending.has_value());
    std::vector<std::uint32_t> counts(8, 0);
    counts[6] = 9;
    counts[7] = 3;
    counts[5] = 1;
    const auto batch = r.prompt_admissions(counts, 100, 0);
    ASSERT_EQ(batch.size(), 1u);  // 6 is pending already; 7 takes the other free slot
    EXPECT_EQ(batch[0].expert, 7);
    EXPECT_NE(batch[0].slot, pending->slot);
}

}  // namespace
}  // namespace neural
