// write_file_atomic (engine/platform/atomic_file.h): replaces the file whole, and the temporary
// files that killed writers left behind are removed by the next write of the same file — not a
// live writer's (locked), not a recent one, not other files. Output paths: a FIFO, socket,
// device or folder is refused, a link is written through to its regular target
// (checked_output_path); small files are read only when regular and bounded
// (read_regular_file). Mappings: a file changed or truncated under a MappedFile is reported,
// and a read of a truncated page does not kill the process.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#ifndef _WIN32
#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#endif

#include <cstring>
#include <thread>

#include "neural/error.h"
#include "platform/atomic_file.h"
#include "platform/mapped_file.h"
#include "platform/output_file.h"
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

#ifndef _WIN32
// Issue 44: every writer refuses what is not a regular file, and never blocks on a FIFO.
TEST(OutputPath, NonRegularFilesAreRefusedAndLinksWrittenThrough) {
    test::TempDir dir;
    const fs::path fifo = dir.path() / "fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const fs::path folder = dir.path() / "folder";
    fs::create_directory(folder);
    const fs::path sock = dir.path() / "sock";
    {
        const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, sock.c_str(), sizeof(addr.sun_path) - 1);
        ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
        ::close(fd);
    }
    const fs::path target = dir.path() / "target.json";
    write_file_atomic(target, "old");
    const fs::path link = dir.path() / "link.json";
    fs::create_symlink(target, link);
    const fs::path to_fifo = dir.path() / "to-fifo";
    fs::create_symlink(fifo, to_fifo);
    const fs::path dangling = dir.path() / "dangling";
    fs::create_symlink(dir.path() / "nowhere", dangling);

    for (const auto& [path, what] : std::vector<std::pair<fs::path, std::string>>{
             {fifo, "a FIFO"},
             {folder, "a folder"},
             {sock, "a socket"},
             {fs::path("/dev/null"), "a character device"},
             {to_fifo, "a symbolic link to a FIFO"},
             {dangling, "does not exist"}}) {
        try {
            write_file_atomic(path, "x");
            ADD_FAILURE() << path << " was written";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
        }
        EXPECT_THROW(OutputFile::create(path), Error) << path;
    }
    EXPECT_TRUE(fs::is_fifo(fs::symlink_status(fifo)));
    EXPECT_TRUE(fs::is_character_file(fs::status("/dev/null")));
    // Through the link: the target gets the bytes, the link stays a link.
    write_file_atomic(link, "new");
    EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
    EXPECT_EQ(read(target), "new");
    OutputFile f = OutputFile::create(link);
    f.write("abc", 3);
    f.close();
    EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
    EXPECT_EQ(read(target), "abc");
    EXPECT_EQ(checked_output_path(dir.path() / "new-file"), dir.path() / "new-file");
}

TEST(OutputPath, ReadRegularFileRefusesFifosFoldersAndLargeFiles) {
    test::TempDir dir;
    const fs::path fifo = dir.path() / "fifo";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_THROW(read_regular_file(fifo, 1024), Error);  // at once: no writer is waited for
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
    EXPECT_THROW(read_regular_file(dir.path(), 1024), Error);
    const fs::path big = dir.path() / "big";
    std::ofstream(big) << std::string(5000, 'x');
    try {
        read_regular_file(big, 4096);
        ADD_FAILURE() << "a file over the bound was read";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("5000 bytes"), std::string::npos) << e.what();
    }
    EXPECT_EQ(read_regular_file(big, 5000).size(), 5000u);
}

TEST(MappedFileGuard, ChangesAndTruncationUnderAMappingAreReported) {
    test::TempDir dir;
    const fs::path file = dir.path() / "data.bin";
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    std::ofstream(file, std::ios::binary) << std::string(4 * page, 'a');
    MappedFile m = MappedFile::open(file);
    EXPECT_EQ(m.changed_on_disk(), "");
    EXPECT_FALSE(m.faulted());
    // Rewritten in place (the same inode): the modification time tells.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    {
        std::fstream f(file, std::ios::binary | std::ios::in | std::ios::out);
        f.seekp(10);
        f << 'b';
    }
    EXPECT_NE(m.changed_on_disk().find("modification time"), std::string::npos)
        << m.changed_on_disk();
    // Truncated: a read past the new end sees zeros instead of SIGBUS, and is reported.
    fs::resize_file(file, page);
    EXPECT_NE(m.changed_on_disk().find("size changed"), std::string::npos);
    volatile const std::uint8_t* p = m.data();
    EXPECT_EQ(p[0], 'a');
    EXPECT_EQ(p[2 * page + 5], 0);
    EXPECT_TRUE(m.faulted());
    EXPECT_EQ(faulted_mapping(), file);
    // Replaced by another file: the identity at the path differs.
    const fs::path other = dir.path() / "other.bin";
    std::ofstream(other, std::ios::binary) << "x";
    MappedFile second = MappedFile::open(other);
    fs::rename(file, dir.path() / "gone.bin");
    std::ofstream(file, std::ios::binary) << "y";
    fs::rename(file, other);
    EXPECT_EQ(second.changed_on_disk(), "another file replaced it");
}
#endif

}  // namespace
}  // namespace neural
