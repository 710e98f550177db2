// Load-time choices of the GPU backend made from measurements (docs/USER_GUIDE.md "Chosen at
// load"): the CPU team's thread count from RAM read bandwidth at a few team sizes, whether to pin
// the expert store from pinned vs pageable copy bandwidth, and the share of decode misses streamed
// over PCIe from the CPU team's RAM bandwidth and the pinned copy bandwidth; while decoding, the
// share follows which side of each streamed layer finished first. Pure functions of the numbers,
// so they are unit-tested with made-up machines; the backend (engine/cuda/hybrid/) measures and
// `neural fit` (runtime/fit.h) explains the same decisions from the same functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace neural::autotune {

// RAM read bandwidth of a team of `threads` (cpu/ram_probe.h).
struct RamPoint {
    int threads = 0;
    double gb_s = 0;  // 1e9 bytes / s
};

// The team sizes to probe on a machine of `cpus` CPUs: a quarter, half and all of them
// (ascending, distinct, at least 1).
std::vector<int> thread_candidates(int cpus);

struct ThreadChoice {
    int threads = 0;
    double gb_s = 0;
    std::string line;  // one line: the choice and the numbers it came from
};
// Walks the points by team size and stops where the next size adds less than `grow` (5%) of
// read bandwidth: the expert kernels are bandwidth-bound, so threads past that only compete with
// the thread feeding the GPU. No usable point: threads 0 (the team's default) and a line saying so.
ThreadChoice choose_threads(std::vector<RamPoint> points, double grow = 0.05);

struct PinInputs {
    std::string mode = "auto";      // GpuOptions::pin_store: auto, 0 or 1
    std::uint64_t store_bytes = 0;  // the raw store's mapping
    std::uint64_t ram_bytes = 0;    // physical RAM (0: unknown)
    double pinned_gb_s = 0;         // copies from pinned host memory (0: not measured)
    double pageable_gb_s = 0;       // copies from pageable host memory (0: not measured)
};
struct PinChoice {
    bool pin = false;
    std::string line;
};
// "1" pins, "0" does not; "auto" pins when the store takes at most half the RAM
// (pin_store_by_default) and pinned copies are materially faster than pageable ones (at least
// kPinGain times; an unmeasured side counts as faster, which is every discrete GPU measured).
inline constexpr double kPinGain = 1.2;
PinChoice choose_pin(const PinInputs& in);

struct StreamInputs {
    int mode = -1;            // GpuOptions::stream_misses: -1 auto, 0 off, 1 on
    double fixed_share = -1;  // GpuOptions::stream_share: < 0 auto (from the probes)
    bool frozen = false;      // residency frozen (--refresh-every 0): reproducible runs
    // Whether the backend can stream at all (pinned store, scratch slots); why_not otherwise.
    bool can_stream = true;
    std::string why_not;
    double ram_gb_s = 0;   // the CPU team's read bandwidth (0: not measured)
    double pcie_gb_s = 0;  // pinned host-to-device copies (0: not measured)
};
struct StreamChoice {
    double share = 0;     // of each layer's misses, streamed (0: none)
    bool refine = false;  // the share follows the decode timing (auto, not frozen, not fixed)
    std::string line;
};
// The share that makes the CPU's part and the copies' part of a layer's misses take the same
// time: the CPU reads (1 - s) M bytes at ram_gb_s while s M bytes cross PCIe at pcie_gb_s, so
// s = pcie / (pcie + ram). auto: that share, clamped to [0, kMaxShare], and 0 below kMinShare
// (a streamed layer costs fixed copy and graph launches); refined while decoding unless residency
// is frozen or the share was given (--stream-share), so those runs stay deterministic; with
// frozen residency the share is also rounded to a quarter (0.25, 0.5 or 0.75), so that two loads
// whose probes differ by a few percent stream the same experts.
// --stream-misses 1: --stream-share, else kDefaultShare (half), fixed; 0: none.
inline constexpr double kMinShare = 0.15, kMaxShare = 0.75, kDefaultShare = 0.5;
StreamChoice choose_stream_share(const StreamInputs& in);

// Decode telemetry of streamed layers since the last step: after the CPU computed its misses,
// the streamed copies had already landed (the CPU was the slower side: stream more) or not yet
// (the copies were: stream less).
struct ShareTally {
    int cpu_slower = 0;
    int copies_slower = 0;
};
inline constexpr int kRefineEvery = 16;  // decode tokens between steps
inline constexpr double kRefineStep = 0.02;
inline constexpr double kRefineMin = 0.05;  // refinement never switches streaming off
// One proportional step: share + step * (cpu_slower - copies_slower) / (their sum), clamped to
// [kRefineMin, kMaxShare]; no streamed layers: unchanged.
double refine_share(double share, const ShareTally& t, double step = kRefineStep);

}  // namespace neural::autotune
