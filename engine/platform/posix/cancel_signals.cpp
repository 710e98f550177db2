// CancelOnSignals (cancel_signals.h) with sigaction: SIGINT, SIGTERM and SIGHUP.
#include "platform/cancel_signals.h"

#include <signal.h>
#include <unistd.h>

namespace neural {

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};

std::atomic<bool>* g_flag = nullptr;
std::atomic<int> g_signal{0};
struct sigaction g_previous[3];

extern "C" void on_cancel_signal(int sig) {
    // Only async-signal-safe calls: lock-free atomics and _exit.
    int expected = 0;
    if (!g_signal.compare_exchange_strong(expected, sig)) ::_exit(128 + sig);  // asked again
    if (g_flag != nullptr) g_flag->store(true);
}

}  // namespace

CancelOnSignals::CancelOnSignals(std::atomic<bool>& flag) {
    flag.store(false);
    g_signal.store(0);
    g_flag = &flag;
    struct sigaction sa {};
    sa.sa_handler = on_cancel_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;  // blocking reads and writes carry on; the flag is polled
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &sa, &g_previous[i]);
}

CancelOnSignals::~CancelOnSignals() {
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &g_previous[i], nullptr);
    g_flag = nullptr;
}

int CancelOnSignals::signal() const { return g_signal.load(); }

}  // namespace neural
