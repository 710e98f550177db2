#include "backend/autotune.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "backend/backend.h"

namespace neural::autotune {

std::vector<int> thread_candidates(int cpus) {
    cpus = std::max(cpus, 1);
    std::vector<int> out;
    for (const int t : {cpus / 4, cpus / 2, cpus}) {
        const int n = std::max(t, 1);
        if (out.empty() || out.back() < n) out.push_back(n);
    }
    return out;
}

ThreadChoice choose_threads(std::vector<RamPoint> points, double grow) {
    points.erase(std::remove_if(points.begin(), points.end(),
                                [](const RamPoint& p) {
                                    return p.threads <= 0 || !std::isfinite(p.gb_s) || p.gb_s <= 0;
                                }),
                 points.end());
    std::stable_sort(points.begin(), points.end(),
                     [](const RamPoint& a, const RamPoint& b) { return a.threads < b.threads; });
    if (points.empty()) return {0, 0, "threads: RAM bandwidth not measured; the team's default"};
    std::size_t i = 0;
    while (i + 1 < points.size() && points[i + 1].gb_s >= points[i].gb_s * (1.0 + grow)) ++i;
    std::string seen;
    for (const RamPoint& p : points)
        seen += fmt::format("{}{:.1f} at {}", seen.empty() ? "" : ", ", p.gb_s, p.threads);
    const RamPoint& c = points[i];
    return {c.threads, c.gb_s,
            i + 1 < points.size()
                ? fmt::format("threads {}: RAM read bandwidth stops growing there (GB/s at "
                              "threads: {})",
                              c.threads, seen)
                : fmt::format("threads {}: RAM read bandwidth still grows up to all of them (GB/s "
                              "at threads: {})",
                              c.threads, seen)};
}

PinChoice choose_pin(const PinInputs& in) {
    if (in.mode == "0") return {false, "store not pinned: --pin-store 0"};
    if (in.mode == "1") return {true, "store pinned: --pin-store 1"};
    const double gb = static_cast<double>(in.store_bytes) / 1e9;
    if (!pin_store_by_default(in.store_bytes, in.ram_bytes)) {
        return {false, in.ram_bytes == 0
                           ? std::string("store not pinned: the RAM size is unknown (--pin-store 1 "
                                         "pins it anyway)")
                           : fmt::format("store not pinned: {:.1f} GB is more than half of the "
                                         "{:.1f} GB of RAM (--pin-store 1 pins it anyway)",
                                         gb, static_cast<double>(in.ram_bytes) / 1e9)};
    }
    if (in.pinned_gb_s > 0 && in.pageable_gb_s > 0 &&
        in.pinned_gb_s < in.pageable_gb_s * kPinGain) {
        return {false, fmt::format("store not pinned: pinned copies ({:.1f} GB/s) are not "
                                   "materially faster than pageable ones ({:.1f} GB/s)",
                                   in.pinned_gb_s, in.pageable_gb_s)};
    }
    const std::string measured =
        in.pinned_gb_s > 0 && in.pageable_gb_s > 0
            ? fmt::format("pinned copies {:.1f} GB/s, pageable {:.1f} GB/s", in.pinned_gb_s,
                          in.pageable_gb_s)
            : std::string("copy speeds not measured");
    return {true,
            fmt::format("store pinned: {:.1f} GB, at most half of the RAM; {}", gb, measured)};
}

StreamChoice choose_stream_share(const StreamInputs& in) {
    StreamChoice c;
    if (in.mode == 0) {
        c.line = "misses not streamed: --stream-misses 0";
        return c;
    }
    if (!in.can_stream) {
        c.line = "misses not streamed: " + in.why_not;
        return c;
    }
    const bool fixed = in.fixed_share >= 0;
    if (in.mode == 1 || fixed) {
        c.share = std::clamp(fixed ? in.fixed_share : kDefaultShare, 0.0, 1.0);
        c.line = fmt::format("streams {:.0f}% of misses over PCIe: {}", 100.0 * c.share,
                             fixed ? "--stream-share" : "--stream-misses 1 (half)");
        if (c.share == 0) c.line = "misses not streamed: --stream-share 0";
        return c;
    }
    if (!(in.ram_gb_s > 0) || !(in.pcie_gb_s > 0)) {
        c.line = "misses not streamed: the copy or RAM bandwidth was not measured";
        return c;
    }
    const double s = in.pcie_gb_s / (in.pcie_gb_s + in.ram_gb_s);
    const std::string numbers =
        fmt::format("copies {:.0f} GB/s, CPU team {:.0f} GB/s", in.pcie_gb_s, in.ram_gb_s);
    if (s < kMinShare) {
        c.line = fmt::format("misses not streamed: the balance share {:.0f}% is below {:.0f}% ({})",
                             100.0 * s, 100.0 * kMinShare, numbers);
        return c;
    }
    c.share = std::min(s, kMaxShare);
    c.refine = !in.frozen;
    // Frozen residency is the reproducible mode: the share is rounded to a quarter so that the
    // few-percent spread of the probes between two loads picks the same streamed experts.
    if (in.frozen) c.share = std::clamp(std::round(c.share * 4.0) / 4.0, 0.25, kMaxShare);
    c.line = fmt::format("streams {:.0f}% of misses over PCIe: {}{}", 100.0 * c.share, numbers,
                         in.frozen ? " (fixed, rounded to a quarter: residency is frozen)" : "");
    return c;
}

double refine_share(double share, const ShareTally& t, double step) {
    const int n = t.cpu_slower + t.copies_slower;
    if (n <= 0) return share;
    const double next =
        share + step * static_cast<double>(t.cpu_slower - t.copies_slower) / static_cast<double>(n);
    return std::clamp(next, kRefineMin, kMaxShare);
}

}  // namespace neural::autotune
