// Crash safety of `neural repack` (docs/RELIABILITY.md): the repack process is SIGKILLed at 20
// seeded random moments spread over the duration of a repack (measured first). After every kill
// the destination holds the store that was there before, byte for byte, and it verifies -- or,
// when the kill came after the rename that publishes the new store, the complete new store,
// which verifies against the checkpoint. No leftover file passes for a valid store unless it
// verifies completely (a partial store must never look valid). A final rerun succeeds and removes
// the temporary files the killed runs left (STORE.tmp-N), and nothing else.
// Linux only (fork/exec/kill).

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "neural/error.h"
#include "store/repack.h"
#include "store/store.h"
#include "store/verify.h"
#include "support/fixtures.h"
#include "support/run_neural.h"

namespace neural {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Starts `neural ARGS` with stdout/stderr to /dev/null; returns its pid.
pid_t spawn_neural(const std::vector<std::string>& args) {
    const std::string bin = (test::bin_dir() / "neural").string();
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(bin.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
        std::freopen("/dev/null", "r", stdin);
        std::freopen("/dev/null", "w", stdout);
        std::freopen("/dev/null", "w", stderr);
        ::execv(bin.c_str(), argv.data());
        ::_exit(127);
    }
    return pid;
}

// Waits for `pid`; true when it exited with status 0.
int wait_status(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
    }
    return status;
}

// True when `path` opens as a store and every record checksum and escape is right.
bool verifies(const fs::path& path) {
    try {
        store::VerifyOptions o;
        o.threads = 1;
        return store::verify_store(path, o).ok();
    } catch (const Error&) {
        return false;
    }
}

// "<store>.tmp-<digits>": the temporary files a repack to `store` writes.
bool is_temp_of(const std::string& name, const fs::path& store) {
    const std::string prefix = store.filename().string() + ".tmp-";
    return name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
           name.find_first_not_of("0123456789", prefix.size()) == std::string::npos;
}

bool opens_as_store(const fs::path& path) {
    try {
        (void)store::ExpertStore::open(path);
        return true;
    } catch (const Error&) {
        return false;
    }
}

TEST(RepackKill, KilledRepackLeavesTheEarlierStoreIntactAndNoValidLookingPartialStore) {
    test::TempDir tmp;
    const std::string model = test::tiny_model_dir().string();
    const fs::path dst = tmp / "experts.nstore";
    const std::vector<std::string> repack = {"repack", "--checkpoint", model,
                                             "--out",  dst.string(),   "--format",
                                             "packed", "--threads",    "1"};

    // The earlier store: raw, so the interrupted packed repack writes different bytes.
    test::Proc r = test::run_neural(
        {"repack", "--checkpoint", model, "--out", dst.string(), "--format", "raw"}, tmp.path(),
        120);
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string before = test::read_file(dst);
    ASSERT_TRUE(verifies(dst));

    // Duration of one full repack (same arguments, another destination): the fastest of 5, so
    // that on a busy machine (slower runs) the kill moments still fall inside the run.
    const fs::path probe = tmp / "probe.nstore";
    std::vector<std::string> probe_args = repack;
    probe_args[4] = probe.string();
    std::vector<double> runs;
    for (int i = 0; i < 5; ++i) {
        const auto t0 = Clock::now();
        const int st = wait_status(spawn_neural(probe_args));
        ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        runs.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    std::sort(runs.begin(), runs.end());
    const double seconds = runs[0];
    fs::remove(probe);
    ASSERT_TRUE(verifies(dst)) << "the probe repack touched the destination";

    // 20 kill moments, one in each twentieth of the run (seeded, so a failure reproduces).
    constexpr int kKills = 20;
    const unsigned seed = 20261130;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> jitter(0.0, 1.0);
    int killed = 0, finished = 0, committed = 0, leftovers_seen = 0;
    for (int i = 0; i < kKills; ++i) {
        const double at = seconds * (i + jitter(rng)) / kKills;
        SCOPED_TRACE("kill " + std::to_string(i) + " at " + std::to_string(at * 1e3) + " ms of " +
                     std::to_string(seconds * 1e3) + " ms (seed " + std::to_string(seed) + ")");
        const pid_t pid = spawn_neural(repack);
        ASSERT_GT(pid, 0);
        std::this_thread::sleep_for(std::chrono::duration<double>(at));
        ::kill(pid, SIGKILL);
        const int st = wait_status(pid);
        if (WIFSIGNALED(st))
            ++killed;
        else
            ++finished;
        // The rename is the commit point: the destination is the earlier store, byte for byte,
        // or (killed after the rename, or finished) the complete new one. Never anything else.
        ASSERT_TRUE(fs::exists(dst)) << "the destination vanished";
        if (test::read_file(dst) == before) {
            const test::Proc v = test::run_neural({"verify-store", dst.string()}, tmp.path(), 120);
            EXPECT_EQ(v.code, 0) << v.out << v.err;
        } else {
            ++committed;
            EXPECT_TRUE(!WIFSIGNALED(st) || verifies(dst))
                << "a partial store replaced the earlier one";
            const test::Proc v = test::run_neural(
                {"verify-store", dst.string(), "--checkpoint", model}, tmp.path(), 120);
            EXPECT_EQ(v.code, 0) << v.out << v.err;
            test::write_file(dst, before);  // the next round starts from the earlier store again
        }
        // Whatever the killed run left behind must not pass for a store unless it is complete.
        // Its temporary file stays: the next repack to this destination removes it.
        for (const auto& e : fs::directory_iterator(tmp.path())) {
            const std::string name = e.path().filename().string();
            if (e.path() == dst || name.rfind("out", 0) == 0 || name.rfind("err", 0) == 0) continue;
            ++leftovers_seen;
            if (opens_as_store(e.path())) {
                EXPECT_TRUE(verifies(e.path())) << name << " looks like a store but is damaged";
            }
            if (!is_temp_of(name, dst)) fs::remove(e.path());
        }
    }
    std::printf(
        "repack %.1f ms (fastest of 5); %d of %d runs killed, %d finished first; %d "
        "destinations replaced by a complete new store; %d leftover files seen (temporary "
        "ones stay for the next repack to remove)\n",
        seconds * 1e3, killed, kKills, finished, committed, leftovers_seen);
    // The moments lie inside the run; if most runs finished first, the timing above is wrong
    // (run times vary on a shared machine, so not every moment hits a running process).
    EXPECT_GE(killed, kKills / 4);

    // A rerun after all this succeeds, gives a complete store and removes the temporary files
    // killed runs left -- only those: files of other names, of another store, and one a running
    // repack holds (its lock, taken here) stay.
    test::write_file(tmp / "experts.nstore.tmp-1234", "stale, as a killed repack leaves it");
    const std::vector<std::string> keep = {"experts.nstore.tmp-12x4",    "experts.nstore.tmp-",
                                           "experts.nstore.tmp-99.keep", "other.nstore.tmp-77",
                                           "experts.nstore.bak",         "experts.nstore.tmp-4242"};
    for (const auto& name : keep) test::write_file(tmp / name, "not a stale temporary file");
    const int held = ::open((tmp / "experts.nstore.tmp-4242").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(held, 0);
    ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);  // as a running repack holds its file
    int stale_before = 0;
    for (const auto& e : fs::directory_iterator(tmp.path())) {
        const std::string name = e.path().filename().string();
        if (is_temp_of(name, dst) && name != "experts.nstore.tmp-4242") ++stale_before;
    }
    EXPECT_GE(stale_before, 1);
    r = test::run_neural(repack, tmp.path(), 120);
    ASSERT_EQ(r.code, 0) << r.err;
    ::close(held);
    r = test::run_neural({"verify-store", dst.string(), "--checkpoint", model}, tmp.path(), 120);
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator(tmp.path())) {
        const std::string name = e.path().filename().string();
        if (e.path() == dst || name.rfind("out", 0) == 0 || name.rfind("err", 0) == 0) continue;
        left.push_back(name);
    }
    std::sort(left.begin(), left.end());
    std::vector<std::string> expected = keep;
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(left, expected) << stale_before << " stale temporary files before the rerun";
    std::printf("rerun removed %d stale temporary files, kept the %zu others\n", stale_before,
                keep.size());
}

TEST(RepackKill, StaleTempFileRemovalTouchesOnlyUnlockedFilesOfItsOwnName) {
    test::TempDir tmp;
    const fs::path dst = tmp / "s.nstore";
    for (const char* name :
         {"s.nstore.tmp-1", "s.nstore.tmp-18446744073709551615", "s.nstore.tmp-2", "s.nstore.tmp-x",
          "s.nstore.tmp-1.part", "t.nstore.tmp-1", "s.nstore"}) {
        test::write_file(tmp / name, "x");
    }
    fs::create_directory(tmp / "s.nstore.tmp-3");  // a folder of that name: not a file we wrote
    fs::create_symlink(tmp / "s.nstore", tmp / "s.nstore.tmp-4");  // a link: left alone
    const int held = ::open((tmp / "s.nstore.tmp-2").c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(held, 0);
    ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
    std::vector<fs::path> removed = store::remove_stale_temp_files(dst);
    ::close(held);
    std::vector<std::string> names;
    for (const auto& p : removed) names.push_back(p.filename().string());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names,
              (std::vector<std::string>{"s.nstore.tmp-1", "s.nstore.tmp-18446744073709551615"}));
    for (const char* name : {"s.nstore.tmp-2", "s.nstore.tmp-x", "s.nstore.tmp-1.part",
                             "t.nstore.tmp-1", "s.nstore", "s.nstore.tmp-3"}) {
        EXPECT_TRUE(fs::exists(tmp / name)) << name;
    }
    EXPECT_TRUE(fs::is_symlink(tmp / "s.nstore.tmp-4"));
    // Unlocked now: the next call takes it.
    removed = store::remove_stale_temp_files(dst);
    ASSERT_EQ(removed.size(), 1u);
    EXPECT_EQ(removed[0].filename(), "s.nstore.tmp-2");
}

}  // namespace
}  // namespace neural
