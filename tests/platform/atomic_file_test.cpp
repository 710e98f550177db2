// write_file_atomic (engine/platform/atomic_file.h): replaces the file whole, and the temporary
// files that killed writers left behind are removed by the next write of the same file — not a
// live writer's (locked), not a recent one, not other files.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#ifndef _WIN32
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>
#endif

#include "platform/atomic_file.h"
#include "support/fixtures.h"

namespace neural {
namespace {

namespace fs = std::filesystem;

void touch(const fs::path& p, std::chrono::minutes age) {
    std::ofstream(p) << "partial";
    fs::last_write_time(p, fs::file_time_type::clock::now() - age);
}

std::string read(const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(AtomicFile, ReplacesTheFileAndRemovesTempFilesOfKilledWriters) {
    test::TempDir dir;
    const fs::path target = dir.path() / "settings.json";
    write_file_atomic(target, "one");
    EXPECT_EQ(read(target), "one");
    const fs::path stale = dir.path() / "settings.json.tmp-123456";
    const fs::path recent = dir.path() / "settings.json.tmp-777";
    const fs::path other = dir.path() / "other.json.tmp-123456";
    const fs::path not_ours = dir.path() / "settings.json.tmp-abc";
    touch(stale, std::chrono::minutes(10));
    touch(recent, std::chrono::minutes(0));
    touch(other, std::chrono::minutes(10));
    touch(not_ours, std::chrono::minutes(10));
#ifndef _WIN32
    // A live writer's file: old, but locked.
    const fs::path live = dir.path() / "settings.json.tmp-42";
    touch(live, std::chrono::minutes(10));
    const int fd = ::open(live.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
#endif
    write_file_atomic(target, "two");
    EXPECT_EQ(read(target), "two");
    EXPECT_FALSE(fs::exists(stale));
    EXPECT_TRUE(fs::exists(other));
    EXPECT_TRUE(fs::exists(not_ours));
#ifndef _WIN32
    EXPECT_TRUE(fs::exists(recent));  // might be a writer between its open and its lock
    EXPECT_TRUE(fs::exists(live));
    ::close(fd);
#endif
    // Nothing else of ours is left in the folder.
    int temps = 0;
    for (const auto& e : fs::directory_iterator(dir.path())) {
        const std::string n = e.path().filename().string();
        temps += n.rfind("settings.json.tmp-", 0) == 0 ? 1 : 0;
    }
#ifndef _WIN32
    EXPECT_EQ(temps, 3);  // recent, live, not_ours
#endif
}

}  // namespace
}  // namespace neural
