// The hybrid backend's timing: a steady clock and the nanoseconds since a point of it (the
// counters of decode tokens and prompts).
#pragma once

#include <chrono>
#include <cstdint>

namespace neural::hybrid {

using Clock = std::chrono::steady_clock;

inline std::uint64_t ns_since(Clock::time_point t0) {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

}  // namespace neural::hybrid
