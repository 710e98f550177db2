// Page residency of read-only file mappings (platform/page_residency.h): releasing a range drops
// its pages (mincore / the working set, checked before and after), touching faults them back,
// the fault counters see it (platform/process_stats.h), the lock allowance says what it did.
#include "platform/page_residency.h"

#include <gtest/gtest.h>

#ifdef _WIN32
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#endif

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <fstream>
#include <string>
#include <vector>

#include "platform/atomic_file.h"
#include "platform/mapped_file.h"
#include "platform/memory.h"
#include "platform/process_stats.h"
#include "support/fixtures.h"

namespace neural {
namespace {

// A file of `pages` pages on the temp folder's file system (a real disk on the dev VM and CI:
// on tmpfs nothing can leave the page cache, so the Linux checks skip there).
std::filesystem::path write_pages(const std::filesystem::path& path, std::size_t pages) {
    std::string bytes(pages * page_size(), '\0');
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7 + 1);
    // One write per page, unbuffered: the page cache then holds single-page folios, as for a
    // store that repack wrote record by record. (One big write may give large folios, which
    // the kernel drops only whole: a range that splits one keeps it.)
    std::FILE* f = std::fopen(path.string().c_str(), "wb");
    if (f == nullptr) throw std::runtime_error("cannot create " + path.string());
    std::setvbuf(f, nullptr, _IONBF, 0);
    for (std::size_t off = 0; off < bytes.size(); off += page_size()) {
        std::fwrite(bytes.data() + off, 1, page_size(), f);
    }
    std::fclose(f);
    sync_file(path);  // dirty pages cannot leave the page cache until written back
    return path;
}

// Wine (scripts/test-windows.sh) runs the Windows code but does not model the memory manager:
// its working set never shrinks and its PageFaultCount stays 0. What these tests check of
// Windows needs Windows itself.
bool under_wine() {
#ifdef _WIN32
    const HMODULE ntdll = GetModuleHandleA("ntdll.dll");
    return ntdll != nullptr && GetProcAddress(ntdll, "wine_get_version") != nullptr;
#else
    return false;
#endif
}

bool on_tmpfs(const std::filesystem::path& path) {
#ifdef _WIN32
    (void)path;
    return false;
#else
    std::ifstream mounts("/proc/mounts");
    std::string dev, dir, type, rest;
    std::string best_dir, best_type;
    const std::string p = std::filesystem::canonical(path).string();
    while (mounts >> dev >> dir >> type && std::getline(mounts, rest)) {
        if (p.rfind(dir, 0) == 0 && dir.size() >= best_dir.size()) {
            best_dir = dir;
            best_type = type;
        }
    }
    return best_type == "tmpfs" || best_type == "ramfs";
#endif
}

TEST(PageResidency, ReleaseDropsTheRangesPagesAndTouchBringsThemBack) {
    test::TempDir tmp;
    const std::size_t n = 64;
    const MappedFile file = MappedFile::open(write_pages(tmp / "pages.bin", n));
    if (on_tmpfs(file.path()))
        GTEST_SKIP() << "the temp folder is tmpfs: its pages cannot be dropped";
    if (under_wine()) GTEST_SKIP() << "Wine does not model the working set";
    const std::size_t ps = page_size();
    touch_pages(file.data(), file.size());
    const auto before = resident_pages(file.data(), file.size());
    if (!before) GTEST_SKIP() << "this OS cannot say which pages are resident";
    ASSERT_EQ(*before, n);

    // Pages [8, 24) go; the rest stay.
    const PageRelease r = release_mapped_pages(file, 8 * ps, 16 * ps);
    ASSERT_TRUE(r.ok) << r.message;
    EXPECT_TRUE(r.mapping_released) << r.message;
    EXPECT_EQ(r.pages_left, 0u);
    EXPECT_EQ(resident_pages(file.data() + 8 * ps, 16 * ps).value(), 0u);
    EXPECT_EQ(resident_pages(file.data(), 8 * ps).value(), 8u);
    EXPECT_EQ(resident_pages(file.data() + 24 * ps, 40 * ps).value(), 40u);
#ifndef _WIN32
    // Linux: gone from the page cache too (mincore reports the cache: another mapping of the
    // same file sees them missing), so a cgroup memory limit no longer counts them.
    EXPECT_TRUE(r.cache_released) << r.message;
    const MappedFile other = MappedFile::open(file.path());
    EXPECT_EQ(resident_pages(other.data() + 8 * ps, 16 * ps).value(), 0u);
#endif

    // Still readable, the same bytes: touching faults them back in (major faults on Linux).
    const PageFaultCounts f0 = process_page_fault_counts();
    touch_pages(file.data() + 8 * ps, 16 * ps);
    const PageFaultCounts f1 = process_page_fault_counts();
    EXPECT_EQ(resident_pages(file.data() + 8 * ps, 16 * ps).value(), 16u);
    EXPECT_EQ(file.data()[8 * ps + 5], static_cast<std::uint8_t>((8 * ps + 5) * 7 + 1));
    EXPECT_GT(f1.total, f0.total);
#ifndef _WIN32
    EXPECT_TRUE(f1.major_known);
    EXPECT_GT(f1.major, f0.major);  // read from disk again: hard faults
#endif
}

TEST(PageResidency, ReleaseUnlocksALockedRangeFirst) {
    test::TempDir tmp;
    const MappedFile file = MappedFile::open(write_pages(tmp / "locked.bin", 4));
    if (on_tmpfs(file.path())) GTEST_SKIP() << "the temp folder is tmpfs";
    if (under_wine()) GTEST_SKIP() << "Wine does not model the working set";
    std::string error;
    if (!lock_memory(file.data(), file.size(), &error))
        GTEST_SKIP() << "cannot lock here: " << error;
    const PageRelease r = release_mapped_pages(file, 0, file.size());
    EXPECT_TRUE(r.ok) << r.message;
    if (auto res = resident_pages(file.data(), file.size())) {
        EXPECT_EQ(*res, 0u);
    }
}

TEST(PageResidency, EdgeCases) {
    test::TempDir tmp;
    const MappedFile file = MappedFile::open(write_pages(tmp / "edge.bin", 2));
    EXPECT_TRUE(release_mapped_pages(file, 0, 0).ok);
    EXPECT_TRUE(release_mapped_pages(file, file.size(), 100).ok);      // past the end: nothing
    EXPECT_TRUE(release_mapped_pages(file, page_size(), 1 << 30).ok);  // clamped to the file
    EXPECT_EQ(resident_pages(nullptr, 0).value_or(0), 0u);
    EXPECT_EQ(touch_pages(nullptr, 0), 0u);
    // A range inside one page counts that page; a range straddling two counts both.
    touch_pages(file.data(), file.size());
    if (auto one = resident_pages(file.data() + 10, 20)) {
        EXPECT_EQ(*one, 1u);
    }
    if (auto two = resident_pages(file.data() + page_size() - 1, 2)) {
        EXPECT_EQ(*two, 2u);
    }
    const MappedFile empty = MappedFile::open(write_pages(tmp / "empty.bin", 0));
    EXPECT_TRUE(release_mapped_pages(empty, 0, 10).ok);
}

TEST(PageResidency, LockAllowanceSaysWhatItDid) {
    const LockAllowance small = grow_lock_allowance(64 * 1024);
    EXPECT_FALSE(small.message.empty());
    const LockAllowance huge = grow_lock_allowance(UINT64_C(1) << 62);
    EXPECT_FALSE(huge.message.empty());
#ifndef _WIN32
    if (!huge.ok) {
        EXPECT_NE(huge.message.find("RLIMIT_MEMLOCK"), std::string::npos) << huge.message;
    }
#endif
}

TEST(ProcessStats, FaultCountsAgreeWithTheTotal) {
    if (under_wine()) GTEST_SKIP() << "Wine counts no page faults (PageFaultCount is 0)";
    const PageFaultCounts c = process_page_fault_counts();
    const std::uint64_t total = process_page_faults();
    EXPECT_GE(total, c.total);
    EXPECT_LE(c.major, c.total);
    // Fresh anonymous pages are (soft) faults.
    std::vector<std::uint8_t> big(32u << 20);
    for (std::size_t i = 0; i < big.size(); i += 4096) big[i] = 1;
    EXPECT_GT(process_page_fault_counts().total, c.total);
}

}  // namespace
}  // namespace neural
