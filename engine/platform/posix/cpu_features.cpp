// CPU feature detection with GCC/Clang: <cpuid.h> for cpuid, inline asm for xgetbv (the
// _xgetbv intrinsic would need -mxsave on this baseline-compiled file).
#include "platform/cpu_features.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define NEURAL_CPUID_X86 1
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace neural::detail_cpuid {
namespace {

bool cpuid(unsigned leaf, unsigned subleaf, unsigned regs[4]) {
    // __get_cpuid_count checks the leaf against the maximum (basic or extended range).
    return __get_cpuid_count(leaf, subleaf, &regs[0], &regs[1], &regs[2], &regs[3]) != 0;
}

unsigned long long read_xcr0() {
    unsigned eax = 0, edx = 0;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return (static_cast<unsigned long long>(edx) << 32) | eax;
}

// Linux hands out the AMX tile state (XTILEDATA, 8 KB per thread) only to a process that asks:
// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), process-wide, for every thread.
bool request_amx() {
#if defined(__linux__) && defined(SYS_arch_prctl)
    constexpr long kReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
}

}  // namespace
}  // namespace neural::detail_cpuid
#else
#define NEURAL_CPUID_X86 0
#endif

#include "platform/cpu_features_common.inl"
