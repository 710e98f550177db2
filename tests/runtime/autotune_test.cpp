// The GPU backend's load-time choices from made-up probe numbers (backend/autotune.h): the thread
// count where RAM bandwidth stops growing, --pin-store auto from the copy probes, the streamed
// share from copy and RAM bandwidth with its clamps and overrides, and the decode refinement.
#include <gtest/gtest.h>

#include <cmath>

#include "backend/autotune.h"

namespace neural::autotune {
namespace {

bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
}

TEST(Autotune, ThreadCandidatesAreAQuarterHalfAndAllTheCpus) {
    EXPECT_EQ(thread_candidates(16), (std::vector<int>{4, 8, 16}));
    EXPECT_EQ(thread_candidates(8), (std::vector<int>{2, 4, 8}));
    EXPECT_EQ(thread_candidates(2), (std::vector<int>{1, 2}));
    EXPECT_EQ(thread_candidates(1), (std::vector<int>{1}));
    EXPECT_EQ(thread_candidates(0), (std::vector<int>{1}));
}

TEST(Autotune, ThreadsStopWhereBandwidthStopsGrowing) {
    // A desktop's two channels: 4 -> 8 threads still adds, 8 -> 16 (SMT siblings) does not.
    ThreadChoice c = choose_threads({{4, 38}, {8, 58}, {16, 59}});
    EXPECT_EQ(c.threads, 8);
    EXPECT_DOUBLE_EQ(c.gb_s, 58);
    EXPECT_TRUE(contains(c.line, "threads 8: RAM read bandwidth stops growing")) << c.line;
    EXPECT_TRUE(contains(c.line, "38.0 at 4, 58.0 at 8, 59.0 at 16")) << c.line;
    // A server's many channels: it grows all the way.
    c = choose_threads({{16, 90}, {4, 30}, {8, 55}});  // any order
    EXPECT_EQ(c.threads, 16);
    EXPECT_TRUE(contains(c.line, "still grows")) << c.line;
    // Flat from the start: the fewest threads.
    EXPECT_EQ(choose_threads({{2, 40}, {4, 41}, {8, 40}}).threads, 2);
    // Exactly the 5% step still counts as growth; a hair less does not.
    EXPECT_EQ(choose_threads({{2, 40}, {4, 42}}).threads, 4);
    EXPECT_EQ(choose_threads({{2, 40}, {4, 41.9}}).threads, 2);
    // Bad points are ignored; none left: the team's default (0).
    EXPECT_EQ(choose_threads({{4, NAN}, {8, 50}, {0, 70}, {16, -1}}).threads, 8);
    c = choose_threads({});
    EXPECT_EQ(c.threads, 0);
    EXPECT_TRUE(contains(c.line, "not measured")) << c.line;
}

TEST(Autotune, PinStoreAutoNeedsRoomInRamAndFasterPinnedCopies) {
    PinInputs in;
    in.store_bytes = 13'000'000'000;  // gpt-oss-20b raw
    in.ram_bytes = 65'850'000'000;    // a 64 GB PC
    in.pinned_gb_s = 24;              // PCIe 4.0 x16
    in.pageable_gb_s = 11;
    PinChoice c = choose_pin(in);
    EXPECT_TRUE(c.pin) << c.line;
    EXPECT_TRUE(contains(c.line, "pinned copies 24.0 GB/s, pageable 11.0 GB/s")) << c.line;
    // Pageable copies about as fast (an integrated GPU): not worth locking 13 GB.
    in.pageable_gb_s = 22;
    c = choose_pin(in);
    EXPECT_FALSE(c.pin);
    EXPECT_TRUE(contains(c.line, "not materially faster")) << c.line;
    // Unmeasured copies: RAM decides, as before the probes.
    in.pinned_gb_s = in.pageable_gb_s = 0;
    EXPECT_TRUE(choose_pin(in).pin);
    // 120b's 61 GB store on the same PC: more than half the RAM.
    in.store_bytes = 61'000'000'000;
    in.pinned_gb_s = 50;
    in.pageable_gb_s = 10;
    c = choose_pin(in);
    EXPECT_FALSE(c.pin);
    EXPECT_TRUE(contains(c.line, "more than half")) << c.line;
    in.ram_bytes = 0;
    EXPECT_TRUE(contains(choose_pin(in).line, "RAM size is unknown"));
    // The overrides win over everything.
    PinInputs forced = in;
    forced.mode = std::string(1, '1');
    EXPECT_TRUE(choose_pin(forced).pin);
    PinInputs never;
    never.mode = std::string(1, '0');
    never.ram_bytes = 1ull << 40;
    never.store_bytes = 1;
    EXPECT_FALSE(choose_pin(never).pin);
}

StreamInputs measured(double pcie, double ram) {
    StreamInputs in;
    in.pcie_gb_s = pcie;
    in.ram_gb_s = ram;
    return in;
}

TEST(Autotune, TheStreamedShareBalancesCopiesAgainstTheCpuTeam) {
    // The accelerator machine: PCIe 5.0 (55 GB/s) next to 8 threads at 60 GB/s: about half.
    StreamChoice c = choose_stream_share(measured(55, 60));
    EXPECT_NEAR(c.share, 55.0 / 115.0, 1e-12);
    EXPECT_TRUE(c.refine);
    EXPECT_TRUE(
        contains(c.line, "streams 48% of misses over PCIe: copies 55 GB/s, CPU team 60 GB/s"))
        << c.line;
    // A PCIe 4.0 PC (21.4 GiB/s = 23 GB/s): a smaller share.
    c = choose_stream_share(measured(23, 60));
    EXPECT_NEAR(c.share, 23.0 / 83.0, 1e-12);
    // Equal times: the CPU's (1 - s) M / ram equals the copies' s M / pcie.
    EXPECT_NEAR((1 - c.share) / 60.0, c.share / 23.0, 1e-12);
    // A fast link beside a slow CPU team: clamped to kMaxShare.
    c = choose_stream_share(measured(55, 10));
    EXPECT_DOUBLE_EQ(c.share, kMaxShare);
    // A slow link (PCIe 3.0 x4, 3.5 GB/s): below kMinShare, nothing streamed.
    c = choose_stream_share(measured(3.5, 60));
    EXPECT_EQ(c.share, 0);
    EXPECT_FALSE(c.refine);
    EXPECT_TRUE(contains(c.line, "misses not streamed: the balance share 6% is below 15%"))
        << c.line;
    // Not measured: nothing.
    EXPECT_EQ(choose_stream_share(measured(0, 60)).share, 0);
    EXPECT_EQ(choose_stream_share(measured(55, 0)).share, 0);
    EXPECT_EQ(choose_stream_share(measured(NAN, 60)).share, 0);
}

TEST(Autotune, StreamOverridesAndReproducibleModes) {
    StreamInputs in = measured(23, 60);
    // Frozen residency: the measured share rounded to a quarter, fixed (no refinement), so probes
    // a few percent apart give the same share.
    in.frozen = true;
    StreamChoice c = choose_stream_share(in);
    EXPECT_DOUBLE_EQ(c.share, 0.25);  // 23 / 83 = 0.277
    EXPECT_FALSE(c.refine);
    EXPECT_TRUE(contains(c.line, "residency is frozen")) << c.line;
    EXPECT_DOUBLE_EQ(choose_stream_share([] {
                         StreamInputs f = measured(25, 58);  // 0.301: the same quarter
                         f.frozen = true;
                         return f;
                     }())
                         .share,
                     c.share);
    in = measured(55, 60);  // 0.478
    in.frozen = true;
    EXPECT_DOUBLE_EQ(choose_stream_share(in).share, 0.5);
    in = measured(23, 60);
    in.frozen = false;
    // --stream-share F: that share, fixed, even below kMinShare.
    in.fixed_share = 0.1;
    c = choose_stream_share(in);
    EXPECT_DOUBLE_EQ(c.share, 0.1);
    EXPECT_FALSE(c.refine);
    EXPECT_TRUE(contains(c.line, "--stream-share")) << c.line;
    in.fixed_share = 0;
    EXPECT_EQ(choose_stream_share(in).share, 0);
    // --stream-misses 1: half, fixed, whatever the probes say (or --stream-share).
    in.fixed_share = -1;
    in.mode = 1;
    in.pcie_gb_s = 3.5;
    c = choose_stream_share(in);
    EXPECT_DOUBLE_EQ(c.share, kDefaultShare);
    EXPECT_FALSE(c.refine);
    in.fixed_share = 0.7;
    EXPECT_DOUBLE_EQ(choose_stream_share(in).share, 0.7);
    // --stream-misses 0: none, whatever else was given.
    in.mode = 0;
    c = choose_stream_share(in);
    EXPECT_EQ(c.share, 0);
    EXPECT_TRUE(contains(c.line, "--stream-misses 0")) << c.line;
    // Cannot stream (no pinned store): none, with the reason.
    in = measured(55, 60);
    in.can_stream = false;
    in.why_not = "the store is not pinned (--pin-store)";
    c = choose_stream_share(in);
    EXPECT_EQ(c.share, 0);
    EXPECT_EQ(c.line, "misses not streamed: the store is not pinned (--pin-store)");
}

TEST(Autotune, RefinementStepsTowardsTheSideThatFinishedFirst) {
    // The CPU finished after the copies in every streamed layer: stream more, one full step.
    EXPECT_NEAR(refine_share(0.4, {10, 0}), 0.4 + kRefineStep, 1e-12);
    // The copies were slower everywhere: stream less.
    EXPECT_NEAR(refine_share(0.4, {0, 10}), 0.4 - kRefineStep, 1e-12);
    // Proportional: 3 against 1 is half a step; balanced is no step.
    EXPECT_NEAR(refine_share(0.4, {3, 1}), 0.4 + kRefineStep / 2, 1e-12);
    EXPECT_DOUBLE_EQ(refine_share(0.4, {5, 5}), 0.4);
    // No streamed layers: unchanged (also outside the clamps).
    EXPECT_DOUBLE_EQ(refine_share(0.9, {0, 0}), 0.9);
    // Clamped: never above kMaxShare, never below kRefineMin (refinement does not switch off).
    EXPECT_DOUBLE_EQ(refine_share(kMaxShare, {4, 0}), kMaxShare);
    EXPECT_DOUBLE_EQ(refine_share(kRefineMin, {0, 4}), kRefineMin);
    double s = 0.5;
    for (int i = 0; i < 100; ++i) s = refine_share(s, {0, 7});
    EXPECT_DOUBLE_EQ(s, kRefineMin);
}

}  // namespace
}  // namespace neural::autotune
