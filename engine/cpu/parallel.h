// Minimal fork-join parallelism for the reference CPU path (OpenMP when available). Each index
// is processed by exactly one thread with a fixed inner order, so results do not depend on the
// thread count or the schedule.
#pragma once

#include <cstdint>

#ifdef NEURAL_HAVE_OPENMP
#include <omp.h>
#endif

namespace neural::cpu {

// Number of worker threads the reference path uses (0 = all hardware threads).
void set_threads(int n);
int threads();

// Calls fn(begin, end) over [0, n) in chunks of `grain` indices.
template <typename Fn>
void parallel_for(std::int64_t n, std::int64_t grain, Fn&& fn) {
    if (grain < 1) grain = 1;
    const std::int64_t chunks = (n + grain - 1) / grain;
#ifdef NEURAL_HAVE_OPENMP
    const int nt = threads();
    if (nt > 1 && chunks > 1) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt)
        for (std::int64_t c = 0; c < chunks; ++c) {
            const std::int64_t b = c * grain;
            fn(b, b + grain < n ? b + grain : n);
        }
        return;
    }
#endif
    for (std::int64_t c = 0; c < chunks; ++c) {
        const std::int64_t b = c * grain;
        fn(b, b + grain < n ? b + grain : n);
    }
}

}  // namespace neural::cpu
