// Server-side queue wait: for each job the GenerationQueue starts, the time from enqueue() to the
// moment the queue hands it to the engine thread. Exposed by GET /metrics (a Prometheus summary,
// neural_queue_wait_seconds) and GET /health (queue_wait). Owned by the queue, server thread only.
//
// Percentiles are nearest-rank over the most recent kWindow waits (a ring), so they describe the
// current load, not the whole uptime; count and sum cover every job since start.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace neural::host {

class QueueWaitStats {
public:
    static constexpr std::size_t kWindow = 4096;

    void record(double seconds) {
        if (!(seconds >= 0)) seconds = 0;  // NaN or a clock step back
        if (m_recent.size() < kWindow)
            m_recent.push_back(seconds);
        else
            m_recent[m_next] = seconds;
        m_next = (m_next + 1) % kWindow;
        ++m_count;
        m_sum += seconds;
    }

    std::uint64_t count() const { return m_count; }
    double sum() const { return m_sum; }
    std::size_t windowSize() const { return m_recent.size(); }

    // Nearest-rank percentile (q in [0, 1]) of the recent waits, in seconds; 0 when none yet.
    double quantile(double q) const {
        if (m_recent.empty()) return 0;
        std::vector<double> sorted = m_recent;
        q = std::clamp(q, 0.0, 1.0);
        auto rank = static_cast<std::size_t>(std::ceil(q * double(sorted.size())));
        const std::size_t index = rank == 0 ? 0 : rank - 1;
        std::nth_element(sorted.begin(), sorted.begin() + std::ptrdiff_t(index), sorted.end());
        return sorted[index];
    }

private:
    std::vector<double> m_recent;  // ring of the last kWindow waits
    std::size_t m_next = 0;
    std::uint64_t m_count = 0;
    double m_sum = 0;
};

}  // namespace neural::host
