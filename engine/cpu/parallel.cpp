#include "cpu/parallel.h"

#include <atomic>
#include <thread>

namespace neural::cpu {

namespace {
std::atomic<int> g_threads{0};
}

void set_threads(int n) { g_threads.store(n < 0 ? 0 : n); }

int threads() {
    int n = g_threads.load();
    if (n > 0) return n;
    unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : static_cast<int>(hw);
}

}  // namespace neural::cpu
