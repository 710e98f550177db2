// Host-to-device copy bandwidth, for `neural bench`'s probes, `neural fit`'s and the hybrid
// backend's load-time choices (backend/autotune.h). Host entry points only.
#pragma once

#include <cstddef>
#include <string>

namespace neural::cuda {

// Copies `bytes` from pinned host memory to device `index`, one warm-up and `passes` timed
// copies; returns the best GB/s (1e9 bytes / s), or 0 with `why` set when it cannot run.
double pinned_h2d_gbps(int index, std::size_t bytes, int passes, std::string* why);
// The same from pageable host memory (what cudaMemcpy does with an unregistered buffer).
double pageable_h2d_gbps(int index, std::size_t bytes, int passes, std::string* why);

}  // namespace neural::cuda
