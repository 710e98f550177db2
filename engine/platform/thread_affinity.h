// Pinning the calling thread to one logical CPU (optional for the persistent worker team; the
// reference study measured pinning as -8% on its desktop, so it is off by default).
// POSIX: engine/platform/posix/thread_affinity.cpp; Windows: windows/thread_affinity.cpp.
// Self-contained (no neural_engine symbols): the persistent-team DLL compiles it in as well.
#pragma once

namespace neural {

// Restricts the calling thread to logical CPU `cpu` (0-based). Returns false when the platform
// cannot (macOS, cpu out of range, a cgroup/job object forbids it); the thread is unchanged then.
bool pin_current_thread(int cpu);

// Logical CPUs this process may run on (affinity mask / cgroup aware where cheap), at least 1.
int available_cpus();

}  // namespace neural
