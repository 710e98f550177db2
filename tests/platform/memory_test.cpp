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
        GTEST_SKIP() << "no limit here (unlimited RLIMIT_MEMLOCK, or a Windows/Wine that accepts it)";
    }
    EXPECT_FALSE(error.empty());
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
