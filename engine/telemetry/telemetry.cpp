#include "telemetry/telemetry.h"

#include "platform/process_stats.h"

namespace neural::telemetry {

void finish_phases(TokenRecord& r) {
    const std::uint64_t named =
        r.cpu_kernel_ns + r.gpu_wait_ns + r.graph_submit_ns + r.admission_ns + r.sampling_ns;
    if (named > r.wall_ns) r.wall_ns = named;  // clock granularity: keep the sum exact
    r.other_ns = r.wall_ns - named;
}

FaultCounts fault_counts() {
    const PageFaultCounts c = process_page_fault_counts();
    return {c.total, c.major};
}

double major_faults_per_token(const std::vector<TokenRecord>& records) {
    if (records.empty()) return 0.0;
    double sum = 0;
    for (const TokenRecord& r : records) sum += static_cast<double>(r.major_page_faults);
    return sum / static_cast<double>(records.size());
}

}  // namespace neural::telemetry
