// CPU feature detection and shared-library loading (engine/platform).
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "neural/error.h"
#include "platform/cpu_features.h"
#include "platform/shared_library.h"

namespace neural {
namespace {

TEST(CpuFeatures, AreConsistent) {
    const CpuFeatures& f = cpu_features();
    std::printf("CPU: %s (%s): %s\n", f.brand.c_str(), f.vendor.c_str(), f.summary().c_str());
    EXPECT_TRUE(!f.has_avx512() || f.has_avx2_fma());
    EXPECT_TRUE(!(f.avx2 || f.fma) || f.avx);
    EXPECT_TRUE(!(f.avx512bw || f.avx512vl || f.avx512dq) || f.avx512f);
    const CpuFeatures again = detect_cpu_features();
    EXPECT_EQ(again.summary(), f.summary());
    EXPECT_EQ(again.brand, f.brand);
}

#if defined(__linux__) && (defined(__x86_64__) || defined(__i386__))
// Linux lists a flag only when the CPU has it and the kernel enabled its state.
TEST(CpuFeatures, MatchProcCpuinfo) {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    std::set<std::string> flags;
    while (std::getline(in, line)) {
        if (line.rfind("flags", 0) != 0) continue;
        std::istringstream ss(line.substr(line.find(':') + 1));
        std::string w;
        while (ss >> w) flags.insert(w);
        break;
    }
    if (flags.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
    const CpuFeatures& f = cpu_features();
    EXPECT_EQ(f.avx2, flags.count("avx2") == 1);
    EXPECT_EQ(f.fma, flags.count("fma") == 1);
    EXPECT_EQ(f.avx512f, flags.count("avx512f") == 1);
    EXPECT_EQ(f.avx512bw, flags.count("avx512bw") == 1);
    EXPECT_EQ(f.avx512vl, flags.count("avx512vl") == 1);
    EXPECT_EQ(f.avx512dq, flags.count("avx512dq") == 1);
}
#endif

TEST(SharedLibrary, MissingFileIsAClearError) {
    try {
        SharedLibrary::open("/no/such/dir/libnothing.so");
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("/no/such/dir/libnothing.so"), std::string::npos);
    }
}

TEST(SharedLibrary, LoadsAndFindsSymbols) {
    SharedLibrary lib = SharedLibrary::open(NEURAL_KDLL_TEST_PATH);
    EXPECT_TRUE(lib.loaded());
    EXPECT_NE(lib.symbol("neural_cpu_persistent_team_v1"), nullptr);
    EXPECT_EQ(lib.symbol("no_such_symbol_here"), nullptr);
    SharedLibrary moved = std::move(lib);
    EXPECT_FALSE(lib.loaded());
    EXPECT_NE(moved.symbol("neural_cpu_persistent_team_v1"), nullptr);
#ifdef _WIN32
    EXPECT_EQ(SharedLibrary::file_name("x"), "x.dll");
#elif !defined(__APPLE__)
    EXPECT_EQ(SharedLibrary::file_name("x"), "libx.so");
#endif
}

TEST(SharedLibrary, ExecutableDirExists) {
    const auto dir = executable_dir();
    ASSERT_FALSE(dir.empty());
    EXPECT_TRUE(std::filesystem::is_directory(dir));
}

}  // namespace
}  // namespace neural
