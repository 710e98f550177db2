#include "support/run_neural.h"

#ifndef _WIN32
#include <sys/wait.h>

#include <atomic>
#include <cstdlib>

#include "support/fixtures.h"

namespace neural::test {

namespace {
// Single quotes for the shell ('\'' for a quote inside).
std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}
}  // namespace

Proc run_neural(const std::vector<std::string>& args, const std::filesystem::path& dir,
                int timeout_seconds) {
    static std::atomic<int> runs{0};
    const int n = runs++;
    const auto out = dir / ("out" + std::to_string(n));
    const auto err = dir / ("err" + std::to_string(n));
    Proc r;
    r.cmd = "timeout " + std::to_string(timeout_seconds) + " ";
    r.cmd += quote((bin_dir() / "neural").string());
    for (const auto& a : args) {
        r.cmd += ' ';  // (appending pieces: GCC 12 warns falsely about " " + string)
        r.cmd += quote(a);
    }
    r.cmd += " </dev/null >";
    r.cmd += quote(out.string());
    r.cmd += " 2>";
    r.cmd += quote(err.string());
    const int status = std::system(r.cmd.c_str());
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_file(out);
    r.err = read_file(err);
    return r;
}

}  // namespace neural::test
#endif
