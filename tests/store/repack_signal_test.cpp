// `neural repack` stopped by SIGTERM or SIGHUP (docs/RELIABILITY.md): handled like Ctrl+C, it
// removes its temporary file (STORE.tmp-N) and exits non-zero (128 + signal) without creating
// the store. And a repack that finds a temporary file a killed repack left says, in one line,
// that it removed it. POSIX only (fork/exec/kill).

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/store_support.h"
#include "support/fixtures.h"
#include "support/run_neural.h"

namespace neural {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using ::testing::HasSubstr;

// `neural ARGS` with stdout and stderr into `out` and `err`; returns its pid.
pid_t spawn_neural(const std::vector<std::string>& args, const fs::path& out, const fs::path& err) {
    std::vector<std::string> all = {(test::bin_dir() / "neural").string()};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
        std::freopen("/dev/null", "r", stdin);
        std::freopen(out.c_str(), "w", stdout);
        std::freopen(err.c_str(), "w", stderr);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    return pid;
}

// The names of the "<store>.tmp-..." files in the store's folder.
std::vector<std::string> temp_files(const fs::path& store) {
    std::vector<std::string> out;
    const std::string prefix = store.filename().string() + ".tmp-";
    for (const auto& e : fs::directory_iterator(store.parent_path())) {
        const std::string name = e.path().filename().string();
        if (name.rfind(prefix, 0) == 0) out.push_back(name);
    }
    return out;
}

TEST(RepackSignal, SigtermAndSighupCancelLikeCtrlCAndLeaveNoTemporaryFile) {
    test::TempDir tmp;
    // The fixture repacks in well under a second; should every signal come too late, a larger
    // synthetic checkpoint (8 records of 13 MB) takes longer.
    const fs::path big = tmp / "big";
    for (const int sig : {SIGTERM, SIGHUP}) {
        SCOPED_TRACE(::strsignal(sig));
        bool hit = false;
        for (int attempt = 0; attempt < 6 && !hit; ++attempt) {
            std::string checkpoint = test::tiny_model_dir().string();
            if (attempt >= 3) {
                if (!fs::exists(big)) {
                    test::SynthSpec spec;
                    spec.layers = 2;
                    spec.experts = 4;
                    test::write_synthetic_checkpoint(big, spec);
                }
                checkpoint = big.string();
            }
            const fs::path dir =
                tmp / ("run" + std::to_string(sig) + "-" + std::to_string(attempt));
            fs::create_directories(dir);
            const fs::path store = dir / "s.nstore";
            const pid_t pid = spawn_neural({"repack", "--checkpoint", checkpoint, "--out",
                                            store.string(), "--format", "packed", "--threads", "1"},
                                           dir / "out", dir / "err");
            ASSERT_GT(pid, 0);
            // The signal goes as soon as the temporary file exists: the repack is writing.
            bool sent = false;
            int status = 0;
            bool ended = false;
            const auto deadline = Clock::now() + std::chrono::seconds(120);
            while (Clock::now() < deadline) {
                if (::waitpid(pid, &status, WNOHANG) == pid) {
                    ended = true;
                    break;
                }
                if (!temp_files(store).empty()) {
                    ::kill(pid, sig);
                    sent = true;
                    break;
                }
                std::this_thread::sleep_for(std::chrono::microseconds(200));
            }
            if (!ended) {
                if (!sent) ::kill(pid, SIGKILL);
                ::waitpid(pid, &status, 0);
            }
            ASSERT_TRUE(sent || ended) << "the repack neither started writing nor ended";
            // Whatever the outcome, no temporary file may stay behind.
            EXPECT_THAT(temp_files(store), ::testing::IsEmpty())
                << "exit " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1) << ", signal "
                << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << "\n"
                << test::read_file(dir / "err");
            if (sent && WIFEXITED(status) && WEXITSTATUS(status) == 128 + sig) {
                hit = true;
                EXPECT_FALSE(fs::exists(store)) << "a cancelled repack created the store";
                EXPECT_THAT(test::read_file(dir / "err"), HasSubstr("cancelled"));
            } else if (sent) {
                // The repack was past its last cancel check: it must have completed.
                EXPECT_TRUE(fs::exists(store)) << test::read_file(dir / "err");
                EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) != 0)
                    << test::read_file(dir / "err");
            }
        }
        if (!hit) GTEST_SKIP() << "every repack finished before the signal reached it";
    }
}

TEST(RepackSignal, ARepackSaysWhichStaleTemporaryFileItRemoved) {
    test::TempDir tmp;
    const fs::path store = tmp / "s.nstore";
    const fs::path stale = tmp / "s.nstore.tmp-1234";
    test::write_file(stale, "left behind by a killed repack");
    const test::Proc r =
        test::run_neural({"repack", "--checkpoint", test::tiny_model_dir().string(), "--out",
                          store.string(), "--format", "raw"},
                         tmp.path(), 120);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("removed " + fs::absolute(stale).string() +
                                 ", left behind by an interrupted repack\n"));
    EXPECT_FALSE(fs::exists(stale));
    EXPECT_THAT(temp_files(store), ::testing::IsEmpty());
}

}  // namespace
}  // namespace neural
