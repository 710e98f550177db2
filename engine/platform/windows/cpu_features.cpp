// CPU feature detection on Windows: MSVC's __cpuidex and _xgetbv intrinsics (also provided by
// clang-cl); MinGW GCC/Clang use <cpuid.h> as on POSIX.
#include "platform/cpu_features.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#if defined(_M_X64) || defined(_M_IX86) || defined(__x86_64__) || defined(__i386__)
#define NEURAL_CPUID_X86 1
#if defined(_MSC_VER)
#include <immintrin.h>
#include <intrin.h>
#else
#include <cpuid.h>
#endif

namespace neural::detail_cpuid {
namespace {

bool cpuid(unsigned leaf, unsigned subleaf, unsigned regs[4]) {
#if defined(_MSC_VER)
    int r[4] = {0, 0, 0, 0};
    // Leaves above the maximum return garbage rather than failing: check the range first.
    __cpuidex(r, static_cast<int>(leaf & 0x80000000u), 0);
    if (static_cast<unsigned>(r[0]) < leaf) return false;
    __cpuidex(r, static_cast<int>(leaf), static_cast<int>(subleaf));
    for (int i = 0; i < 4; ++i) regs[i] = static_cast<unsigned>(r[i]);
    return true;
#else
    return __get_cpuid_count(leaf, subleaf, &regs[0], &regs[1], &regs[2], &regs[3]) != 0;
#endif
}

unsigned long long read_xcr0() {
#if defined(_MSC_VER)
    return _xgetbv(0);
#else
    unsigned eax = 0, edx = 0;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return (static_cast<unsigned long long>(edx) << 32) | eax;
#endif
}

// Windows enables the AMX tile state for every process where XCR0 has it (Windows 11 / Server
// 2022 and later): nothing to ask.
bool request_amx() { return true; }

}  // namespace
}  // namespace neural::detail_cpuid
#else
#define NEURAL_CPUID_X86 0
#endif

#include "platform/cpu_features_common.inl"
