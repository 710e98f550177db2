// RAM read-bandwidth probe: every worker of a team sums 1 MiB chunks of a buffer much larger
// than the caches, so the figure is what the expert kernels can at best stream from DRAM with
// the same threads. Used by `neural bench` and tests/kernels/kernel_bench.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cpu/team/worker_team.h"

namespace neural::bench {

class ReadProbe {
public:
    // Allocates and fills `bytes` (rounded down to 32 bytes) with pseudo-random words, so the
    // pages are touched (faulted in) before any timing.
    explicit ReadProbe(std::size_t bytes);
    ~ReadProbe();
    ReadProbe(const ReadProbe&) = delete;
    ReadProbe& operator=(const ReadProbe&) = delete;

    std::size_t bytes() const { return words_.size() * 8; }
    // One pass over the whole buffer on `team`.
    void run(cpu::WorkerTeam& team);
    // Sum of everything read, so the compiler cannot drop the reads.
    std::uint64_t checksum() const;

    struct Ctx;  // the probe task's arguments (ram_probe.cpp)

private:
    std::vector<std::uint64_t> words_;
    std::unique_ptr<Ctx> ctx_;
};

struct ReadBandwidth {
    double gb_per_s = 0;  // best pass: bytes / seconds / 1e9
    int threads = 0;
    std::size_t bytes = 0;
    int passes = 0;
};

// One warm-up pass, then the best of `passes` timed passes on `team`.
ReadBandwidth measure_read_bandwidth(cpu::WorkerTeam& team, std::size_t bytes, int passes = 5);
// The same over an existing probe (one buffer for several team sizes).
ReadBandwidth measure_read_bandwidth(cpu::WorkerTeam& team, ReadProbe& probe, int passes = 5);

// The buffer the load-time probes read (backend/autotune.h): larger than a desktop CPU's last
// level cache, small enough to fill in a few tens of milliseconds.
inline constexpr std::size_t kAutotuneProbeBytes = std::size_t{128} << 20;
// RAM read bandwidth at each team size (reference teams), over one buffer of `bytes`.
struct ThreadBandwidth {
    int threads = 0;
    double gb_per_s = 0;
};
std::vector<ThreadBandwidth> read_bandwidth_by_threads(const std::vector<int>& threads,
                                                       std::size_t bytes = kAutotuneProbeBytes,
                                                       int passes = 3);

}  // namespace neural::bench
