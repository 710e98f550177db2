// CancelOnSignals (cancel_signals.h) with a console control handler. Ctrl+C counts as SIGINT;
// Ctrl+Break, closing the console window, logoff and shutdown as SIGTERM. For the last three
// Windows ends the process as soon as the handler returns, so the handler waits (within the
// few seconds Windows grants) until the command has stopped and cleaned up.
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

#include <csignal>

#include "platform/cancel_signals.h"

namespace neural {

namespace {

std::atomic<bool>* g_flag = nullptr;
std::atomic<int> g_signal{0};
HANDLE g_stopped = nullptr;  // set when the CancelOnSignals is destroyed

BOOL WINAPI on_console_event(DWORD event) {
    const int sig = event == CTRL_C_EVENT ? SIGINT : SIGTERM;
    int expected = 0;
    if (!g_signal.compare_exchange_strong(expected, sig)) ExitProcess(128 + sig);  // asked again
    if (g_flag != nullptr) g_flag->store(true);
    if (event == CTRL_CLOSE_EVENT || event == CTRL_LOGOFF_EVENT || event == CTRL_SHUTDOWN_EVENT) {
        if (g_stopped != nullptr) WaitForSingleObject(g_stopped, 4500);
    }
    return TRUE;
}

}  // namespace

CancelOnSignals::CancelOnSignals(std::atomic<bool>& flag) {
    flag.store(false);
    g_signal.store(0);
    g_flag = &flag;
    g_stopped = CreateEventW(nullptr, TRUE, FALSE, nullptr);
    SetConsoleCtrlHandler(on_console_event, TRUE);
}

CancelOnSignals::~CancelOnSignals() {
    SetConsoleCtrlHandler(on_console_event, FALSE);
    g_flag = nullptr;
    if (g_stopped != nullptr) SetEvent(g_stopped);
    // The event stays: a handler may still be waiting on it (the process is ending anyway).
}

int CancelOnSignals::signal() const { return g_signal.load(); }

}  // namespace neural
