// Run-time CPU feature detection for choosing SIMD kernels. Each feature counts only when the
// CPU reports it (cpuid) AND the OS saves its register state (XCR0 via xgetbv): a CPU with
// AVX-512 under an OS/hypervisor that does not enable ZMM state must not run AVX-512 code.
// POSIX (GCC/Clang <cpuid.h>): engine/platform/posix/cpu_features.cpp;
// Windows (MSVC __cpuidex/_xgetbv): engine/platform/windows/cpu_features.cpp.
#pragma once

#include <string>
#include <string_view>

namespace neural {

struct CpuFeatures {
    bool x86 = false;      // compiled for x86 / x86-64 (all flags below are false otherwise)
    bool avx = false;      // cpuid AVX + OSXSAVE + XCR0 saves XMM|YMM
    bool avx2 = false;     // cpuid AVX2 and `avx`
    bool fma = false;      // cpuid FMA3 and `avx`
    bool avx512f = false;  // cpuid AVX512F and XCR0 saves opmask|ZMM_Hi256|Hi16_ZMM
    bool avx512bw = false;
    bool avx512vl = false;
    bool avx512dq = false;
    bool avx512bf16 = false;  // cpuid.(7,1).EAX[5] AVX512_BF16 (vdpbf16ps) and `avx512f`
    bool avx512vnni = false;  // cpuid.(7,0).ECX[11] AVX512_VNNI (vpdpbusd) and `avx512f`
    // cpuid.(7,0).EDX[24,25] AMX-TILE + AMX-INT8 (tdpbusd), XCR0 bits 17-18 (XTILECFG,
    // XTILEDATA) and the OS's permission for this process (Linux: arch_prctl
    // ARCH_REQ_XCOMP_PERM, asked once at detection; Windows grants it with the XCR0 bits).
    bool amx_int8 = false;
    // cpuid.(7,0).EDX[22] AMX-BF16 (tdpbf16ps), with the tile state and permission as above.
    bool amx_bf16 = false;
    std::string vendor;  // "GenuineIntel", "AuthenticAMD", ...
    std::string brand;   // e.g. "11th Gen Intel(R) Core(TM) i7-11700K @ 3.60GHz"

    // What the kernels need: AVX2 + FMA; AVX-512 F/BW/VL on top of that.
    bool has_avx2_fma() const { return avx2 && fma; }
    bool has_avx512() const { return has_avx2_fma() && avx512f && avx512bw && avx512vl; }
    // The dense bf16 kernel's vdpbf16ps variant: AVX-512 as above plus AVX512_BF16.
    bool has_avx512_bf16() const { return has_avx512() && avx512bf16; }
    // Int8 dot products (vpdpbusd): AVX-512 as above plus AVX512_VNNI.
    bool has_avx512_vnni() const { return has_avx512() && avx512vnni; }
    // AMX int8 tiles with AVX512_VNNI beside them (the int8 prompt kernel's AMX variant).
    bool has_amx_int8() const { return has_avx512_vnni() && amx_int8; }
    // AMX bf16 tiles with AVX512_BF16 beside them (the dense kernels' prompt variant).
    bool has_amx_bf16() const { return has_avx512_bf16() && amx_bf16; }

    // "avx2 fma avx512f avx512bw avx512vl avx512dq avx512bf16 avx512vnni amx-int8 amx-bf16" (the
    // usable ones), for logs and reports.
    std::string summary() const;
};

// Detects once per process (thread-safe) and returns the cached result.
const CpuFeatures& cpu_features();

// Runs the detection again (tests).
CpuFeatures detect_cpu_features();

// `f` with the named features (comma-separated: amx, amx-int8, amx-bf16, avx512bf16, avx512vnni,
// avx512, avx2) and those that build on them turned off; std::invalid_argument names an unknown
// one. cpu_features() applies the environment variable NEURAL_CPU_DISABLE this way, so one
// machine runs the kernel variants a CPU without those features would choose.
CpuFeatures without_features(CpuFeatures f, std::string_view names);

}  // namespace neural
