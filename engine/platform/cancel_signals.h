// Stop requests from outside for long commands (neural repack, verify-store): while a
// CancelOnSignals lives, Ctrl+C, SIGTERM and SIGHUP (POSIX) or the console's Ctrl+C, Ctrl+Break,
// close, logoff and shutdown events (Windows) set a flag the command polls, so that it stops at
// its next check and removes what it has half written. A second request while the first is
// being handled ends the process at once (exit status 128 + signal).
// POSIX: engine/platform/posix/cancel_signals.cpp; Windows: engine/platform/windows/cancel_signals.cpp.
#pragma once

#include <atomic>

namespace neural {

class CancelOnSignals {
public:
    // Clears `flag` and installs the handlers; the previous handlers come back on destruction.
    // One instance at a time.
    explicit CancelOnSignals(std::atomic<bool>& flag);
    ~CancelOnSignals();
    CancelOnSignals(const CancelOnSignals&) = delete;
    CancelOnSignals& operator=(const CancelOnSignals&) = delete;

    // The signal that set the flag (SIGINT, SIGTERM, SIGHUP; on Windows SIGINT for Ctrl+C and
    // SIGTERM for the other console events); 0 when none came.
    int signal() const;
    // The exit status a command stopped this way returns: 128 + signal() (130 for Ctrl+C).
    int exit_status() const { return 128 + (signal() != 0 ? signal() : 2); }
};

}  // namespace neural
