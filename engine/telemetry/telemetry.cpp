#include "telemetry/telemetry.h"

namespace neural::telemetry {

void finish_phases(TokenRecord& r) {
    const std::uint64_t named =
        r.cpu_kernel_ns + r.gpu_wait_ns + r.graph_submit_ns + r.admission_ns;
    if (named > r.wall_ns) r.wall_ns = named;  // clock granularity: keep the sum exact
    r.other_ns = r.wall_ns - named;
}

}  // namespace neural::telemetry
