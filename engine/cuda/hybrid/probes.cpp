// Load-time probes of the hybrid backend (backend/autotune.h, docs/CUDA.md "Chosen at load"):
// host-to-device copy bandwidth from pinned and pageable memory, and the CPU team's RAM read
// bandwidth at a few team sizes. The decisions they feed (threads, --pin-store auto,
// --stream-misses auto) are the pure functions of backend/autotune.h; each is logged in one line.
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "backend/autotune.h"
#include "cpu/ram_probe.h"
#include "cuda/hybrid/hybrid_backend.h"
#include "cuda/transfer.h"
#include "platform/thread_affinity.h"
#include "store/store.h"

namespace neural::hybrid {

namespace {
constexpr std::size_t kCopyProbeBytes = std::size_t{32} << 20;
constexpr int kCopyProbePasses = 3;
}  // namespace

// Copies of 32 MiB, 3 timed each way (a few ms): only where a choice needs them, a raw store
// with --pin-store auto or --stream-misses auto.
void HybridBackend::probe_copies() {
    const bool raw = in_.store != nullptr && in_.store->kind() == store::StoreKind::kRaw;
    if (!raw || (opt_.pin_store != "auto" && opt_.stream_misses >= 0)) return;
    std::string why;
    probes_.pinned_gb_s =
        cuda::pinned_h2d_gbps(opt_.device, kCopyProbeBytes, kCopyProbePasses, &why);
    if (probes_.pinned_gb_s > 0) {
        probes_.pageable_gb_s =
            cuda::pageable_h2d_gbps(opt_.device, kCopyProbeBytes, kCopyProbePasses, &why);
    }
    if (probes_.pinned_gb_s <= 0 || probes_.pageable_gb_s <= 0)
        spdlog::warn("copy probe failed: {}; load-time choices use their defaults", why);
    else
        spdlog::info("copy probe: {:.1f} GB/s from pinned memory, {:.1f} GB/s from pageable",
                     probes_.pinned_gb_s, probes_.pageable_gb_s);
}

// The CPU team's size: --threads when given, else where RAM read bandwidth stops growing
// (autotune::choose_threads over a quarter, half and all CPUs). The chosen size's bandwidth is
// what --stream-misses auto balances the copies against; it is measured also with --threads
// when streaming may need it. Returns the team size to ask for (0: the team's default).
int HybridBackend::probe_threads() {
    const bool raw = in_.store != nullptr && in_.store->kind() == store::StoreKind::kRaw;
    const bool want_ram = raw && opt_.stream_misses < 0 && opt_.stream_share < 0;
    if (in_.threads > 0) {
        if (want_ram) {
            const auto b = bench::read_bandwidth_by_threads({in_.threads});
            probes_.ram_gb_s = b.empty() ? 0 : b.front().gb_per_s;
        }
        probes_.threads_line = fmt::format("threads {}: --threads", in_.threads);
        return in_.threads;
    }
    std::vector<autotune::RamPoint> points;
    for (const bench::ThreadBandwidth& b :
         bench::read_bandwidth_by_threads(autotune::thread_candidates(available_cpus())))
        points.push_back({b.threads, b.gb_per_s});
    const autotune::ThreadChoice c = autotune::choose_threads(points);
    probes_.ram_gb_s = c.gb_s;
    probes_.threads_line = c.line;
    spdlog::info("{}", c.line);
    return c.threads;
}

}  // namespace neural::hybrid
