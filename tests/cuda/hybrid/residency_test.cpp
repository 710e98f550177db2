// The slot policy of the hybrid backend (engine/cuda/hybrid/residency.h), without a GPU.
#include <gtest/gtest.h>

#include <set>
#include <span>
#include <cstdint>
#include <vector>

#include "cuda/hybrid/residency.h"
#include "neural/error.h"

namespace neural {

// Reaches into a Residency for states no placement leaves behind.
struct ResidencyTestAccess {
    // Empties slot s (its expert leaves the pool): initial() fills every slot, so a free slot
    // occurs only here.
    static void empty(Residency& r, int s) {
        const auto su = static_cast<std::size_t>(s);
        const int o = r.owner_[su];
        if (o >= 0) {
            r.where_[static_cast<std::size_t>(o)] = -1;
            r.held_[static_cast<std::size_t>(o)] = -1;
        }
        r.owner_[su] = -1;
        if (r.placeholder_[su]) {
            r.placeholder_[su] = 0;
            --r.placeholders_;
        }
        r.free_hint_ = r.placeholder_hint_ = 0;
    }
};

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

// A fresh install (no ranking, nothing learned): no static slots, and every slot holds a
// placeholder, the same share of every layer (its first experts).
TEST(Residency, WithoutARankingPlaceholdersFillEverySlotSpreadOverTheLayers) {
    Residency r(3, 8, 10, options());
    EXPECT_EQ(r.static_slots(), 5);  // the split asked for, until initial() knows better
    const auto placed = r.initial({});
    ASSERT_EQ(placed.size(), 10u);
    EXPECT_EQ(r.static_slots(), 0);
    EXPECT_EQ(r.resident_count(), 10);
    EXPECT_EQ(r.placeholder_count(), 10);
    std::set<int> slots;
    std::vector<int> per_layer(3, 0);
    for (const auto& a : placed) {
        EXPECT_EQ(a.victim_layer, -1);
        EXPECT_EQ(r.slot_of(a.layer, a.expert), a.slot);
        EXPECT_TRUE(r.placeholder(a.slot));
        slots.insert(a.slot);
        ++per_layer[static_cast<std::size_t>(a.layer)];
    }
    EXPECT_EQ(slots.size(), 10u);
    EXPECT_EQ(per_layer, (std::vector<int>{4, 3, 3}));  // round-robin: layer 0 has the 10th
    // Round-robin by layer, index order within a layer.
    EXPECT_EQ(r.slot_of(0, 0), 0);
    EXPECT_EQ(r.slot_of(1, 0), 1);
    EXPECT_EQ(r.slot_of(2, 0), 2);
    EXPECT_EQ(r.slot_of(0, 1), 3);
    EXPECT_EQ(r.slot_of(0, 3), 9);
    EXPECT_EQ(r.slot_of(1, 3), -1);
    // Equal shares when the slots divide evenly; scores start at 0.
    Residency even(4, 8, 12, options());
    even.initial({});
    for (int l = 0; l < 4; ++l) {
        for (int e = 0; e < 8; ++e) {
            EXPECT_EQ(even.slot_of(l, e) >= 0, e < 3) << l << " " << e;
            EXPECT_EQ(even.score(l, e), 0.0);
        }
    }
}

// A ranked placement and a frozen one are as before: static slots, no placeholders.
TEST(Residency, RankedAndFrozenPlacementsHaveNoPlaceholders) {
    Residency ranked(2, 4, 4, options());
    ranked.initial({{1, 0, 9, 2}, {8, 0, 0, 10}});
    EXPECT_EQ(ranked.static_slots(), 2);
    EXPECT_EQ(ranked.placeholder_count(), 0);
    for (int s = 0; s < 4; ++s) EXPECT_FALSE(ranked.placeholder(s)) << s;
    Residency frozen(2, 4, 4, options(0));
    frozen.initial({});
    EXPECT_EQ(frozen.static_slots(), 4);
    EXPECT_EQ(frozen.placeholder_count(), 0);
    for (int e = 0; e < 4; ++e) EXPECT_EQ(frozen.slot_of(0, e), e);  // index order
    EXPECT_EQ(frozen.slot_of(1, 0), -1);
}

TEST(Residency, BadRankingsAreErrors) {
    Residency r(2, 4, 4, options());
    EXPECT_THROW(r.initial({{1, 2, 3, 4}}), Error);                 // one layer missing
    EXPECT_THROW(r.initial({{1, 2, 3}, {1, 2, 3, 4}}), Error);      // short layer
    EXPECT_THROW(r.initial({{1, 2, 3, -1}, {1, 2, 3, 4}}), Error);  // negative count
}

TEST(Residency, RefreshAdmitsHotMissesInPlaceOfTheColdestPlaceholders) {
    Residency r(1, 8, 4, options(/*refresh_every=*/2, /*refresh_m=*/2));
    r.initial({});                // placeholders: experts 0..3 in slots 0..3
    const int hot[] = {5, 6, 1};  // expert 1 (a placeholder) is a hit
    for (int t = 0; t < 2; ++t) {
        r.observe(0, hot, false);
        r.end_token();
    }
    ASSERT_EQ(r.pending_count(), 2u);
    auto a = r.pending(0, 5);
    auto b = r.pending(0, 6);
    ASSERT_TRUE(a.has_value());
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(a->slot, 0);  // the placeholders of score 0, in slot order; expert 1 stays
    EXPECT_EQ(a->victim_layer, 0);
    EXPECT_EQ(a->victim_expert, 0);
    EXPECT_EQ(b->slot, 2);
    EXPECT_EQ(b->victim_expert, 2);
    EXPECT_EQ(r.slot_of(0, 5), -1);
    r.begin(*a);
    EXPECT_FALSE(r.pending(0, 5).has_value());
    EXPECT_FALSE(r.placeholder(0));
    EXPECT_EQ(r.placeholder_count(), 3);
    EXPECT_EQ(r.slot_of(0, 0), -1);  // the victim left the table
    EXPECT_EQ(r.slot_of(0, 5), -1);  // not before the copy landed
    r.complete(*a);
    EXPECT_EQ(r.slot_of(0, 5), 0);
    EXPECT_EQ(r.slot_of(0, 1), 1);
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

// prior(): a ranked adaptive expert starts at the score its share of the ranking's routing
// reaches in a conversation, so an expert the first tokens route to once does not replace it;
// one routed every token still does within a few rounds; without the prior it would at once.
TEST(Residency, ThePriorFromTheRankingProtectsRankedAdaptiveExpertsFromOneOffMisses) {
    ResidencyOptions o = options(/*refresh_every=*/8, /*refresh_m=*/4);
    // 1 layer, 8 experts, 4 slots: static 0, 1 (experts 0, 1), adaptive 2, 3 (experts 2, 3).
    const std::vector<std::vector<double>> ranking = {{40, 30, 20, 10, 0, 0, 0, 0}};
    const int one_off[] = {6};
    const int steady[] = {7};
    auto run = [&](bool with_prior, int tokens, const int* routed) {
        Residency r(1, 8, 4, o);
        r.initial(ranking);
        if (with_prior) r.prior(ranking, /*choices_per_token=*/2);
        for (int t = 0; t < tokens; ++t) {
            if (t == 0 || routed == steady) r.observe(0, std::span<const int>(routed, 1), false);
            r.end_token();
        }
        return r;
    };
    // p(expert 3) = 2 * 10 / 100 = 0.2: score 8 * 0.2 * 0.75 / 0.25 = 4.8.
    EXPECT_DOUBLE_EQ(run(true, 0, one_off).score(0, 3), 4.8);
    EXPECT_DOUBLE_EQ(run(true, 0, one_off).score(0, 0), 8 * 0.8 * 3);
    EXPECT_DOUBLE_EQ(run(false, 0, one_off).score(0, 3), 0.0);
    // One routing of expert 6 in the first 8 tokens: without the prior it replaces a ranked
    // adaptive expert at the first refresh round, with it nothing is pending.
    EXPECT_TRUE(run(false, 8, one_off).pending(0, 6).has_value());
    EXPECT_FALSE(run(true, 8, one_off).pending(0, 6).has_value());
    // Expert 7 routed on every token overtakes the coldest ranked expert (3) within 3 rounds.
    bool admitted = false;
    for (int rounds = 1; rounds <= 3 && !admitted; ++rounds) {
        const auto a = run(true, 8 * rounds, steady).pending(0, 7);
        if (a) {
            admitted = true;
            EXPECT_EQ(a->victim_expert, 3);
        }
    }
    EXPECT_TRUE(admitted);
    // The prior also guards the first prompt's evictions: a prompt that routes twice to expert 6
    // (prompt weight 0.25 each) does not beat expert 3's prior by the hysteresis margin.
    std::vector<std::uint32_t> counts(8, 0);
    counts[6] = 2;
    for (const bool with_prior : {false, true}) {
        Residency r(1, 8, 4, o);
        r.initial(ranking);
        if (with_prior) r.prior(ranking, 2);
        r.observe(0, one_off, true);
        r.observe(0, one_off, true);
        EXPECT_EQ(r.prompt_admissions(counts, 32, 32).empty(), with_prior);
    }
}

TEST(Residency, APriorIsANoOpWhenFrozenOrWithoutARankingAndBadPriorsAreErrors) {
    Residency frozen(1, 4, 2, options(/*refresh_every=*/0));
    frozen.initial({{4, 3, 2, 1}});
    frozen.prior({{4, 3, 2, 1}}, 2);
    EXPECT_EQ(frozen.score(0, 0), 0.0);
    Residency r(1, 4, 2, options());
    r.initial({});
    r.prior({}, 2);
    EXPECT_EQ(r.score(0, 0), 0.0);
    r.prior({{0, 0, 0, 0}}, 2);  // a layer nothing was counted for: no prior
    EXPECT_EQ(r.score(0, 0), 0.0);
    EXPECT_THROW(r.prior({{1, 2, 3}}, 2), Error);                   // short layer
    EXPECT_THROW(r.prior({{1, 2, 3, 4}, {1, 2, 3, 4}}, 2), Error);  // a layer too many
    EXPECT_THROW(r.prior({{1, 2, -3, 4}}, 2), Error);               // negative count
    EXPECT_THROW(r.prior({{1, 2, 3, 4}}, 0), Error);                // no choices per token
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

// The first misses take free slots, then placeholders no routing chose since load, without
// waiting for a refresh round.
TEST(Residency, TheFirstMissesTakeFreeSlotsThenUnroutedPlaceholders) {
    Residency r(1, 8, 4, options(/*refresh_every=*/100, /*refresh_m=*/1));
    r.initial({});                     // placeholders: experts 0..3 in slots 0..3
    ResidencyTestAccess::empty(r, 3);  // slot 3 free
    const int hit[] = {1};
    r.observe(0, hit, false);  // placeholder 1 was routed to: it stays
    auto a = r.admission_for(0, 5);
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(a->slot, 3) << "a free slot before any placeholder";
    EXPECT_EQ(a->victim_layer, -1);
    EXPECT_EQ(r.admission_for(0, 5)->slot, 3) << "asking again returns the same pending admission";
    auto b = r.admission_for(0, 6);
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(b->slot, 0);
    EXPECT_EQ(b->victim_layer, 0);
    EXPECT_EQ(b->victim_expert, 0);
    auto c = r.admission_for(0, 7);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->slot, 2) << "the routed placeholder in slot 1 is kept";
    EXPECT_EQ(c->victim_expert, 2);
    EXPECT_FALSE(r.admission_for(0, 4).has_value()) << "no free slot or unrouted placeholder left";
    EXPECT_FALSE(r.admission_for(0, 1).has_value()) << "already resident";
    EXPECT_EQ(r.pending_count(), 3u);
    r.begin(*b);
    EXPECT_EQ(r.slot_of(0, 0), -1);
    EXPECT_FALSE(r.placeholder(0));
    r.complete(*b);
    EXPECT_EQ(r.slot_of(0, 6), 0);
    Residency frozen(1, 8, 4, options(0));
    frozen.initial({});
    EXPECT_FALSE(frozen.admission_for(0, 5).has_value());
}

// A refresh round re-plans what was not started: a slot a dropped admission had reserved is
// offered again.
TEST(Residency, AnAdmissionDroppedByARefreshRoundGivesItsSlotBack) {
    Residency r(1, 8, 2, options(/*refresh_every=*/1, /*refresh_m=*/1));
    r.initial({});  // placeholders: experts 0, 1
    ASSERT_EQ(r.admission_for(0, 5)->slot, 0);
    ASSERT_EQ(r.admission_for(0, 6)->slot, 1);
    EXPECT_FALSE(r.admission_for(0, 7).has_value());
    r.end_token();  // a round with no scores: nothing pending
    EXPECT_EQ(r.pending_count(), 0u);
    const auto a = r.admission_for(0, 7);
    ASSERT_TRUE(a.has_value());
    EXPECT_EQ(a->slot, 0);
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

TEST(Residency, TheFirstPromptReplacesThePlaceholdersMostUsedFirst) {
    // 2 layers x 8 experts, 6 slots, all placeholders: slot 0 (0, 0), 1 (1, 0), 2 (0, 1),
    // 3 (1, 1), 4 (0, 2), 5 (1, 2).
    Residency r(2, 8, 6, options(8, 2));
    r.initial({});
    ASSERT_EQ(r.placeholder_count(), 6);
    // Layer 1's prompt rows: expert 5 four times, 6 three times, 7 twice, 1 (a placeholder)
    // once; layer 0's expert 1 is held already.
    auto counts = prompt(r, {{5, 6}, {5, 6}, {5, 7}, {5, 6}, {7, 1}}, 1);
    counts[1] = 9;  // layer 0, expert 1: resident, never a candidate
    // No evictions allowed: placeholders count as free slots.
    const auto batch = r.prompt_admissions(counts, 100, 0);
    ASSERT_EQ(batch.size(), 3u);
    EXPECT_EQ(batch[0].layer, 1);
    EXPECT_EQ(batch[0].expert, 5);
    EXPECT_EQ(batch[1].expert, 6);
    EXPECT_EQ(batch[2].expert, 7);
    // The placeholders no routing chose, in slot order; the prompt's (1, 1) stays.
    EXPECT_EQ(batch[0].slot, 0);
    EXPECT_EQ(batch[1].slot, 1);
    EXPECT_EQ(batch[2].slot, 2);
    EXPECT_EQ(batch[0].victim_layer, 0);
    EXPECT_EQ(batch[0].victim_expert, 0);
    EXPECT_EQ(batch[1].victim_layer, 1);
    EXPECT_EQ(batch[1].victim_expert, 0);
    // Pending until begun; loading (not resident) between begin and complete.
    EXPECT_EQ(r.pending_count(), 3u);
    for (const auto& a : batch) r.begin(a);
    EXPECT_EQ(r.slot_of(1, 5), -1);
    EXPECT_EQ(r.slot_of(0, 0), -1);                   // the victims left the table
    EXPECT_FALSE(r.admission_for(1, 5).has_value());  // being loaded: not admitted twice
    for (const auto& a : batch) r.complete(a);
    EXPECT_EQ(r.slot_of(1, 5), 0);
    EXPECT_EQ(r.slot_of(1, 1), 3);
    EXPECT_EQ(r.resident_count(), 6);
    EXPECT_EQ(r.placeholder_count(), 3);
    // max_free bounds the placeholder fill (a packed store assembles each record on the host).
    Residency small(2, 8, 6, options(8, 2));
    small.initial({});
    EXPECT_EQ(small.prompt_admissions(counts, 2, 0).size(), 2u);
}

// A placeholder the conversation has routed to is replaced only by an expert that scores
// higher (still without the hysteresis margin, still not an eviction).
TEST(Residency, APromptReplacesARoutedPlaceholderOnlyWithAHotterExpert) {
    Residency r(1, 8, 2, options(8, 2));
    r.initial({});  // placeholders: expert 0 (slot 0), 1 (slot 1)
    // Expert 2 four times, 3 twice, 0 (a placeholder) and 4 once.
    auto batch = r.prompt_admissions(prompt(r, {{0, 2}, {2, 3}, {2, 3}, {2, 4}}, 0), 100, 0);
    ASSERT_EQ(batch.size(), 2u);
    EXPECT_EQ(batch[0].expert, 2);
    EXPECT_EQ(batch[0].slot, 1);  // the unrouted placeholder first
    EXPECT_EQ(batch[1].expert, 3);
    EXPECT_EQ(batch[1].slot, 0);  // 3 (score 0.5) beats placeholder 0 (0.25)
    EXPECT_EQ(batch[1].victim_expert, 0);
    Residency q(1, 8, 2, options(8, 2));
    q.initial({});
    // Placeholder 0 four times, 2 three times, 3 twice: 2 takes placeholder 1, 3 does not beat 0.
    batch = q.prompt_admissions(prompt(q, {{0, 2}, {0, 2}, {0, 2}, {0, 3}, {3}}, 0), 100, 8);
    ASSERT_EQ(batch.size(), 1u);
    EXPECT_EQ(batch[0].expert, 2);
    EXPECT_EQ(batch[0].slot, 1);
}

TEST(Residency, LaterPromptsReplaceColderAdaptiveExpertsUpToTheLimit) {
    const std::vector<std::vector<double>> ranking = {{2, 2, 1, 1, 0, 0, 0, 0}};
    Residency r(1, 8, 4, options(8, 2));  // 2 static (0, 1), 2 adaptive (2, 3)
    r.initial(ranking);
    run_batch(r, r.prompt_admissions(prompt(r, {{2, 3}}, 0), 100, 8));  // held: nothing
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
    q.initial(ranking);
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

TEST(Residency, APendingAdmissionKeepsItsSlotAndItsExpert) {
    Residency r(1, 8, 4, options(1, 1));  // placeholders: experts 0..3; refresh every token
    r.initial({});
    // A decode miss of expert 6 takes the first placeholder (pending, not begun).
    const auto pending = r.admission_for(0, 6);
    ASSERT_TRUE(pending.has_value());
    EXPECT_EQ(pending->slot, 0);
    std::vector<std::uint32_t> counts(8, 0);
    counts[6] = 9;
    counts[7] = 3;
    counts[5] = 1;
    const auto batch = r.prompt_admissions(counts, 100, 0);
    ASSERT_EQ(batch.size(), 2u);  // 6 is pending already; 7 and 5 take other placeholders
    EXPECT_EQ(batch[0].expert, 7);
    EXPECT_EQ(batch[0].slot, 1);
    EXPECT_EQ(batch[1].expert, 5);
    EXPECT_EQ(batch[1].slot, 2);
    // The prompt's placeholders are not also given to a miss before their uploads begin.
    const auto miss = r.admission_for(0, 4);
    ASSERT_TRUE(miss.has_value());
    EXPECT_EQ(miss->slot, 3);
    EXPECT_EQ(r.admission_for(0, 7)->slot, 1) << "the prompt's admission, not a second one";
    EXPECT_FALSE(r.admission_for(0, 3).has_value()) << "placeholder 3 is resident";
    EXPECT_EQ(r.pending_count(), 4u);
    run_batch(r, batch);
    EXPECT_FALSE(r.admission_for(0, 2).has_value()) << "no placeholder left to take";
}

}  // namespace
}  // namespace neural
