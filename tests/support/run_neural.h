// Runs the built `neural` binary as a separate process, as a user would (POSIX shell; the CLI
// tests are not built for Windows).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace neural::test {

struct Proc {
    int code = -1;    // exit status; 124 = killed by the timeout
    std::string out;  // stdout
    std::string err;  // stderr
    std::string cmd;  // the shell command, for failure messages
};

// `neural ARGS` with stdin from /dev/null, stdout and stderr captured through files in `dir`,
// killed after `timeout_seconds`.
Proc run_neural(const std::vector<std::string>& args, const std::filesystem::path& dir,
                int timeout_seconds);

}  // namespace neural::test
