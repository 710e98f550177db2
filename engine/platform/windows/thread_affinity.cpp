#include "platform/thread_affinity.h"

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

#include <thread>

namespace neural {

bool pin_current_thread(int cpu) {
    // Processor groups beyond the first 64 CPUs are not handled (desktops have one group).
    if (cpu < 0 || cpu >= static_cast<int>(8 * sizeof(DWORD_PTR))) return false;
    const DWORD_PTR mask = static_cast<DWORD_PTR>(1) << cpu;
    return SetThreadAffinityMask(GetCurrentThread(), mask) != 0;
}

int available_cpus() {
    DWORD_PTR process_mask = 0, system_mask = 0;
    if (GetProcessAffinityMask(GetCurrentProcess(), &process_mask, &system_mask) &&
        process_mask != 0) {
        int n = 0;
        for (DWORD_PTR m = process_mask; m != 0; m &= m - 1) ++n;
        return n;
    }
    const unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : static_cast<int>(hw);
}

}  // namespace neural
