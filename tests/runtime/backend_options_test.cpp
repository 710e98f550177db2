// The CUDA backend's option rules that need no GPU (backend/backend.h): --pin-store's values and
// its auto policy, on the 64 GB target PC and the edges of the rule; which misses --stream-misses
// sends to the GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace neural {
namespace {

TEST(PinStore, ValuesAreAutoZeroOrOne) {
    EXPECT_EQ(GpuOptions{}.pin_store, "auto");
    for (const char* v : {"auto", "0", "1"}) EXPECT_TRUE(is_pin_store(v)) << v;
    for (const char* v : {"", "2", "yes", "on", "AUTO", "01"}) EXPECT_FALSE(is_pin_store(v)) << v;
}

TEST(PinStore, AutoPinsAStoreOfAtMostHalfTheRam) {
    // A 64 GiB PC (Linux reports a little less than the modules hold): the 20b raw store is
    // pinned, the 120b one is not.
    const std::uint64_t ram = 65'850'000'000;
    EXPECT_TRUE(pin_store_by_default(12'800'000'000, ram));
    EXPECT_FALSE(pin_store_by_default(61'000'000'000, ram));
    // Exactly half is pinned, a byte more is not; unknown RAM (0) never pins.
    EXPECT_TRUE(pin_store_by_default(ram / 2, ram));
    EXPECT_FALSE(pin_store_by_default(ram / 2 + 1, ram));
    EXPECT_FALSE(pin_store_by_default(1, 0));
}

// Choices by index; slot -1 = a miss. One layer at the start of a token (carry 0).
std::vector<int> streamed(std::vector<int> slot, std::vector<bool> admit_bits, int max_streamed,
                          double share = 0.5) {
    bool admit[8] = {};
    for (std::size_t k = 0; k < admit_bits.size(); ++k) admit[k] = admit_bits[k];
    int out[8];
    double carry = 0;
    const int n = streamed_choices(slot, std::span<const bool>(admit, slot.size()), max_streamed,
                                   share, carry, out);
    return std::vector<int>(out, out + n);
}

TEST(StreamMisses, AutoByDefaultAndHalfTheMissesOfALayerRoundedDown) {
    EXPECT_EQ(GpuOptions{}.stream_misses, -1);
    EXPECT_LT(GpuOptions{}.stream_share, 0);
    const std::vector<bool> none(4, false);
    EXPECT_EQ(streamed({-1, -1, -1, -1}, none, 4), (std::vector<int>{0, 1}));
    EXPECT_EQ(streamed({-1, 7, -1, -1}, none, 4), (std::vector<int>{0}));  // 3 misses: 1
    EXPECT_EQ(streamed({5, -1, 7, -1}, none, 4), (std::vector<int>{1}));
    EXPECT_EQ(streamed({5, -1, 7, 9}, none, 4), std::vector<int>{});  // 1 miss: the CPU's
    EXPECT_EQ(streamed({5, 6, 7, 9}, none, 4), std::vector<int>{});
}

TEST(StreamMisses, AdmissionsStayOnTheCpuAndTheScratchSlotsCap) {
    // A miss waiting for admission is captured by the CPU: the next miss streams instead; the
    // count stays floor(n / 2) of all misses while enough others are left.
    EXPECT_EQ(streamed({-1, -1, -1, -1}, {true, false, false, false}, 4), (std::vector<int>{1, 2}));
    EXPECT_EQ(streamed({-1, -1, 3, 4}, {true, false, false, false}, 4), (std::vector<int>{1}));
    EXPECT_EQ(streamed({-1, -1, 3, 4}, {true, true, false, false}, 4), std::vector<int>{});
    // At most as many as there are scratch slots (and none without any).
    EXPECT_EQ(streamed({-1, -1, -1, -1}, {false, false, false, false}, 1), (std::vector<int>{0}));
    EXPECT_EQ(streamed({-1, -1, -1, -1}, {false, false, false, false}, 0), std::vector<int>{});
}

TEST(StreamMisses, AShareIsAFractionOfTheMissesOverATokensLayers) {
    // share 0.3 over ten layers of one miss each: 3 streamed, at the layers where the carried
    // remainder reaches a whole miss (the 4th, 7th and 10th).
    const std::vector<int> one_miss = {-1, 5, 6, 7};
    const bool admit[4] = {};
    double carry = 0;
    int out[4];
    std::vector<int> streamed_at;
    for (int layer = 0; layer < 10; ++layer) {
        if (streamed_choices(one_miss, admit, 4, 0.3, carry, out) == 1)
            streamed_at.push_back(layer);
        EXPECT_GE(carry, 0.0);
        EXPECT_LE(carry, 1.0);
    }
    EXPECT_EQ(streamed_at, (std::vector<int>{3, 6, 9}));
    // Share 0 never streams, share 1 streams every miss (up to the scratch slots).
    carry = 0;
    EXPECT_EQ(streamed({-1, -1, -1, -1}, std::vector<bool>(4, false), 4, 0.0), std::vector<int>{});
    EXPECT_EQ(streamed({-1, -1, -1, -1}, std::vector<bool>(4, false), 4, 1.0),
              (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(streamed({-1, -1, -1, -1}, std::vector<bool>(4, false), 3, 1.0),
              (std::vector<int>{0, 1, 2}));
    // Out-of-range shares are clamped; a capped layer carries at most one miss over.
    EXPECT_EQ(streamed({-1, -1}, std::vector<bool>(2, false), 4, 7.0), (std::vector<int>{0, 1}));
    carry = 0;
    const std::vector<int> four = {-1, -1, -1, -1};
    const bool none[4] = {};
    EXPECT_EQ(streamed_choices(four, none, 1, 1.0, carry, out), 1);
    EXPECT_DOUBLE_EQ(carry, 1.0);
}

// One layer through split_streamed_choices: {whole choices..., split choice, its GPU neurons}.
struct Split {
    std::vector<int> whole;
    int split = -1, neurons = 0;
    bool operator==(const Split&) const = default;
};
Split split_of(std::vector<int> slot, std::vector<bool> admit_bits, int max_streamed, double share,
               int intermediate = 2880) {
    bool admit[8] = {};
    for (std::size_t k = 0; k < admit_bits.size(); ++k) admit[k] = admit_bits[k];
    int out[8];
    const StreamSplit r = split_streamed_choices(slot, std::span<const bool>(admit, slot.size()),
                                                 max_streamed, share, intermediate, out);
    return {std::vector<int>(out, out + r.whole), r.split, r.split_neurons};
}

TEST(SplitMisses, OnByDefaultAndTheShareIsMetWithinTheLayer) {
    EXPECT_TRUE(GpuOptions{}.split_misses);
    const std::vector<bool> none(4, false);
    // One miss at half: its last 1,440 of 2,880 neurons on the GPU, the first on the CPU.
    EXPECT_EQ(split_of({5, -1, 7, 9}, none, 4, 0.5), (Split{{}, 1, 1440}));
    // Three misses at half: one whole, half of the next.
    EXPECT_EQ(split_of({-1, -1, 7, -1}, none, 4, 0.5), (Split{{0}, 1, 1440}));
    // Two at half: one whole, nothing split; four: two whole.
    EXPECT_EQ(split_of({-1, 5, -1, 9}, none, 4, 0.5), (Split{{0}, -1, 0}));
    EXPECT_EQ(split_of({-1, -1, -1, -1}, none, 4, 0.5), (Split{{0, 1}, -1, 0}));
    // The fraction in 32-neuron blocks, rounded: 0.4 of 2,880 = 36 blocks; 0.3 x 3 = 0.9.
    EXPECT_EQ(split_of({-1, 1, 2, 3}, none, 4, 0.4), (Split{{}, 0, 1152}));
    EXPECT_EQ(split_of({-1, -1, -1, 3}, none, 4, 0.3), (Split{{}, 0, 2592}));
    // No miss, share 0: nothing.
    EXPECT_EQ(split_of({1, 2, 3, 4}, none, 4, 0.5), (Split{{}, -1, 0}));
    EXPECT_EQ(split_of({-1, -1, 3, 4}, none, 4, 0.0), (Split{{}, -1, 0}));
}

TEST(SplitMisses, SmallFractionsAreNotSplitAndNearWholeOnesStreamWhole) {
    const std::vector<bool> none(4, false);
    // 0.1 of one expert (9 of 90 blocks) is under 1/8: the CPU keeps it; 0.13 (12 blocks) is
    // split.
    EXPECT_EQ(split_of({-1, 1, 2, 3}, none, 4, 0.1), (Split{{}, -1, 0}));
    EXPECT_EQ(split_of({-1, 1, 2, 3}, none, 4, 0.13), (Split{{}, 0, 384}));
    // 0.99 rounds to the whole expert (90 of 90 blocks): streamed whole.
    EXPECT_EQ(split_of({-1, 1, 2, 3}, none, 4, 0.995), (Split{{0}, -1, 0}));
    // Share 1: every miss whole; out-of-range shares are clamped.
    EXPECT_EQ(split_of({-1, -1, 2, -1}, none, 4, 1.0), (Split{{0, 1, 3}, -1, 0}));
    EXPECT_EQ(split_of({-1, -1}, std::vector<bool>(2, false), 4, 7.0), (Split{{0, 1}, -1, 0}));
    EXPECT_EQ(split_of({-1, -1}, std::vector<bool>(2, false), 4, -1.0), (Split{{}, -1, 0}));
    // A small expert (I = 64: two blocks): half is one block.
    EXPECT_EQ(split_of({-1, 1}, std::vector<bool>(2, false), 4, 0.5, 64), (Split{{}, 0, 32}));
}

TEST(SplitMisses, AdmissionsStayWholeOnTheCpuAndTheScratchSlotsCap) {
    // A miss waiting for admission is captured whole by the CPU: never streamed nor split.
    EXPECT_EQ(split_of({-1, -1, 3, 4}, {true, false, false, false}, 4, 0.5), (Split{{1}, -1, 0}));
    EXPECT_EQ(split_of({-1, 2, 3, 4}, {true, false, false, false}, 4, 0.5), (Split{{}, -1, 0}));
    EXPECT_EQ(split_of({-1, -1, -1, 4}, {true, false, false, false}, 4, 0.5),
              (Split{{1}, 2, 1440}));
    // The split choice takes a scratch slot too; none left: no split.
    EXPECT_EQ(split_of({-1, -1, -1, 4}, std::vector<bool>(4, false), 1, 0.5), (Split{{0}, -1, 0}));
    EXPECT_EQ(split_of({-1, -1, -1, 4}, std::vector<bool>(4, false), 2, 0.5),
              (Split{{0}, 1, 1440}));
    EXPECT_EQ(split_of({-1, 2, 3, 4}, std::vector<bool>(4, false), 0, 0.5), (Split{{}, -1, 0}));
    // Fewer eligible misses than the whole part: all of them whole, nothing split.
    EXPECT_EQ(split_of({-1, -1, -1, -1}, {true, true, false, false}, 4, 0.9),
              (Split{{2, 3}, -1, 0}));
}

}  // namespace
}  // namespace neural
