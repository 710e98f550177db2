// Runs the built `neural` binary as a separate process, as a user would. POSIX: through the
// shell (timeout, redirections); Windows (and the cross build under Wine): CreateProcessW with
// the output redirected to files and the process terminated after the timeout.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace neural::test {

struct Proc {
    int code = -1;    // exit status; 124 = killed by the timeout
    std::string out;  // stdout (Windows: CRLF line ends turned into LF, as on POSIX)
    std::string err;  // stderr (likewise)
    std::string cmd;  // the command line, for failure messages
};

// `neural ARGS` (neural.exe on Windows, from bin_dir()) with stdin from the null device, stdout
// and stderr captured through files in `dir`, killed after `timeout_seconds`.
Proc run_neural(const std::vector<std::string>& args, const std::filesystem::path& dir,
                int timeout_seconds);

}  // namespace neural::test
