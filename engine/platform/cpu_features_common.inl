// The OS-independent part of cpu_features.{posix,windows}.cpp. The including file defines, in
// namespace neural::detail_cpuid, the two compiler-specific primitives when it is built for x86:
//   bool cpuid(unsigned leaf, unsigned subleaf, unsigned regs[4]);  // false: leaf unsupported
//   unsigned long long read_xcr0();
//   bool request_amx();  // the OS lets this process use the AMX tile data (once per process)
// and NEURAL_CPUID_X86 = 1 (0 on other architectures, where every feature is false).

namespace neural {

#if NEURAL_CPUID_X86
namespace detail_cpuid {

CpuFeatures detect_x86() {
    CpuFeatures f;
    f.x86 = true;
    unsigned r[4] = {0, 0, 0, 0};
    if (!cpuid(0, 0, r)) return f;
    const unsigned max_leaf = r[0];
    char vendor[13] = {};
    std::memcpy(vendor + 0, &r[1], 4);  // EBX, EDX, ECX spell the vendor
    std::memcpy(vendor + 4, &r[3], 4);
    std::memcpy(vendor + 8, &r[2], 4);
    f.vendor = vendor;

    cpuid(1, 0, r);
    const unsigned ecx1 = r[2];
    const bool osxsave = (ecx1 >> 27) & 1u;
    const bool cpu_avx = (ecx1 >> 28) & 1u;
    const bool cpu_fma = (ecx1 >> 12) & 1u;
    const unsigned long long xcr0 = osxsave ? read_xcr0() : 0;
    // XCR0 bit 1 = SSE (XMM) state, bit 2 = AVX (upper YMM halves); bits 5..7 = opmask, upper
    // halves of ZMM0-15, ZMM16-31. All must be OS-enabled before the instructions may be used.
    const bool os_avx = (xcr0 & 0x6u) == 0x6u;
    const bool os_avx512 = os_avx && (xcr0 & 0xE0u) == 0xE0u;
    f.avx = cpu_avx && os_avx;
    f.fma = f.avx && cpu_fma;
    if (max_leaf >= 7) {
        cpuid(7, 0, r);
        const unsigned ebx7 = r[1];
        f.avx2 = f.avx && ((ebx7 >> 5) & 1u);
        f.avx512f = os_avx512 && ((ebx7 >> 16) & 1u);
        f.avx512dq = f.avx512f && ((ebx7 >> 17) & 1u);
        f.avx512bw = f.avx512f && ((ebx7 >> 30) & 1u);
        f.avx512vl = f.avx512f && ((ebx7 >> 31) & 1u);
        const unsigned max_sub7 = r[0];
        const unsigned ecx7 = r[2];
        f.avx512vnni = f.avx512f && ((ecx7 >> 11) & 1u);
        // XCR0 bit 17 = XTILECFG, bit 18 = XTILEDATA.
        const unsigned edx7 = r[3];
        const bool os_amx = (xcr0 & 0x60000u) == 0x60000u;
        const bool amx_tile = os_amx && ((edx7 >> 24) & 1u) && request_amx();
        f.amx_int8 = amx_tile && ((edx7 >> 25) & 1u);
        f.amx_bf16 = amx_tile && ((edx7 >> 22) & 1u);
        if (max_sub7 >= 1 && cpuid(7, 1, r)) f.avx512bf16 = f.avx512f && ((r[0] >> 5) & 1u);
    }
    if (cpuid(0x80000000u, 0, r) && r[0] >= 0x80000004u) {
        char brand[49] = {};
        for (unsigned i = 0; i < 3; ++i) {
            cpuid(0x80000002u + i, 0, r);
            std::memcpy(brand + 16 * i, r, 16);
        }
        const std::string b = brand;
        const auto first = b.find_first_not_of(' ');
        const auto last = b.find_last_not_of(' ');
        if (first != std::string::npos) f.brand = b.substr(first, last - first + 1);
    }
    return f;
}

}  // namespace detail_cpuid
#endif

CpuFeatures detect_cpu_features() {
#if NEURAL_CPUID_X86
    return detail_cpuid::detect_x86();
#else
    return CpuFeatures{};
#endif
}

CpuFeatures without_features(CpuFeatures f, std::string_view names) {
    std::size_t pos = 0;
    while (pos <= names.size()) {
        std::size_t end = names.find(',', pos);
        if (end == std::string_view::npos) end = names.size();
        std::string_view name = names.substr(pos, end - pos);
        while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
        while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
        pos = end + 1;
        if (name.empty()) continue;
        // A feature off turns off what builds on it, as a CPU without it would report.
        if (name == "amx") {
            f.amx_int8 = f.amx_bf16 = false;
        } else if (name == "amx-int8") {
            f.amx_int8 = false;
        } else if (name == "amx-bf16") {
            f.amx_bf16 = false;
        } else if (name == "avx512bf16") {
            f.avx512bf16 = false;
        } else if (name == "avx512vnni") {
            f.avx512vnni = false;
        } else if (name == "avx512") {
            f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = false;
            f.avx512bf16 = f.avx512vnni = f.amx_int8 = f.amx_bf16 = false;
        } else if (name == "avx2") {
            f.avx2 = f.fma = false;
            f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = false;
            f.avx512bf16 = f.avx512vnni = f.amx_int8 = f.amx_bf16 = false;
        } else {
            throw std::invalid_argument(
                "unknown CPU feature \"" + std::string(name) +
                "\" (amx, amx-int8, amx-bf16, avx512bf16, avx512vnni, avx512, avx2)");
        }
    }
    return f;
}

const CpuFeatures& cpu_features() {
    static const CpuFeatures features = [] {
        CpuFeatures f = detect_cpu_features();
        // NEURAL_CPU_DISABLE=amx,avx512vnni,... runs this process as on a CPU without them (the
        // kernel variants another machine would choose: docs/KERNELS.md "CPU features").
        const char* off = std::getenv("NEURAL_CPU_DISABLE");
        if (off != nullptr && *off != '\0') {
            try {
                f = without_features(f, off);
            } catch (const std::invalid_argument& e) {
                std::fprintf(stderr, "NEURAL_CPU_DISABLE: %s; ignored\n", e.what());
            }
        }
        return f;
    }();
    return features;
}

std::string CpuFeatures::summary() const {
    std::string s;
    auto add = [&s](bool on, const char* name) {
        if (!on) return;
        if (!s.empty()) s += ' ';
        s += name;
    };
    add(avx, "avx");
    add(avx2, "avx2");
    add(fma, "fma");
    add(avx512f, "avx512f");
    add(avx512bw, "avx512bw");
    add(avx512vl, "avx512vl");
    add(avx512dq, "avx512dq");
    add(avx512bf16, "avx512bf16");
    add(avx512vnni, "avx512vnni");
    add(amx_int8, "amx-int8");
    add(amx_bf16, "amx-bf16");
    return s.empty() ? std::string("baseline") : s;
}

}  // namespace neural
