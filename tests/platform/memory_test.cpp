#include "platform/memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace neural {
namespace {

TEST(PlatformMemory, LocksAndUnlocksASmallBuffer) {
    std::vector<std::uint8_t> buf(64 * 1024, 1);
    std::string error;
    // A small range fits the default limits (Linux RLIMIT_MEMLOCK >= 64 KiB, Windows' default
    // working-set minimum); where a sandbox forbids locking, the reason must be given.
    if (!lock_memory(buf.data(), buf.size(), &error)) {
        EXPECT_FALSE(error.empty());
        GTEST_SKIP() << "cannot lock memory here: " << error;
    }
    buf[100] = 7;
    EXPECT_EQ(buf[100], 7);
    unlock_memory(buf.data(), buf.size());
}

TEST(PlatformMemory, EmptyRangesAreNoOps) {
    EXPECT_TRUE(lock_memory(nullptr, 0));
    unlock_memory(nullptr, 0);
}

TEST(PlatformMemory, WorkingSetMinimumOfASmallSizeSucceeds) {
    std::string error;
    EXPECT_TRUE(set_working_set_minimum(1 << 20, &error)) << error;
}

TEST(PlatformMemory, ImpossibleWorkingSetMinimumFailsWithAReason) {
    std::string error;
    if (set_working_set_minimum(UINT64_C(1) << 62, &error)) {
        GTEST_SKIP()
            << "no limit here (unlimited RLIMIT_MEMLOCK, or a Windows/Wine that accepts it)";
    }
    EXPECT_FALSE(error.empty());
}

TEST(PlatformMemory, KeepResidentAppliesTheMinimumOrLocksTheHotRanges) {
    std::vector<std::uint8_t> a(16 * 1024, 1), b(16 * 1024, 2), c(16 * 1024, 3);
    const MemoryRange hot[] = {{a.data(), a.size()}, {b.data(), b.size()}, {c.data(), c.size()}};
    const std::uint64_t want = 40 * 1024;  // all of a and b, half of c
    const ResidentResult r = keep_resident(want, hot);
#ifdef _WIN32
    EXPECT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.locked_bytes, 0u);
    EXPECT_NE(r.message.find("SetProcessWorkingSetSizeEx"), std::string::npos) << r.message;
#else
    if (!r.ok) {  // a sandbox without locked memory: the reason must be given
        EXPECT_NE(r.message.find("RLIMIT_MEMLOCK"), std::string::npos) << r.message;
        GTEST_SKIP() << r.message;
    }
    EXPECT_EQ(r.locked_bytes, want) << r.message;
    EXPECT_NE(r.message.find("locked 40960 of 40960 bytes"), std::string::npos) << r.message;
    for (const MemoryRange& m : hot) unlock_memory(m.p, m.n);
#endif
}

TEST(PlatformMemory, KeepResidentWithNothingHotLocksNothing) {
    const ResidentResult r = keep_resident(1 << 20, {});
    EXPECT_TRUE(r.ok) << r.message;
    EXPECT_EQ(r.locked_bytes, 0u);
    EXPECT_FALSE(r.message.empty());
}

TEST(PlatformMemory, AppDataDirEndsInNeural) {
    const std::filesystem::path dir = app_data_dir();
    ASSERT_FALSE(dir.empty());
    EXPECT_TRUE(dir.is_absolute()) << dir.string();
    const std::string leaf = dir.filename().string();
    EXPECT_TRUE(leaf == "neural" || leaf == "Neural") << leaf;
}

}  // namespace
}  // namespace neural
