#include "platform/system_info.h"

#include <windows.h>

namespace neural {

SystemMemory system_memory() {
    SystemMemory m;
    MEMORYSTATUSEX s{};
    s.dwLength = sizeof(s);
    if (GlobalMemoryStatusEx(&s)) {
        m.total_bytes = s.ullTotalPhys;
        m.available_bytes = s.ullAvailPhys;
    }
    return m;
}

int logical_cpus() {
    DWORD_PTR process = 0, system = 0;
    if (GetProcessAffinityMask(GetCurrentProcess(), &process, &system) && process != 0) {
        int n = 0;
        for (DWORD_PTR m = process; m != 0; m &= m - 1) ++n;
        return n;
    }
    SYSTEM_INFO info{};
    GetSystemInfo(&info);
    return info.dwNumberOfProcessors > 0 ? static_cast<int>(info.dwNumberOfProcessors) : 1;
}

}  // namespace neural
