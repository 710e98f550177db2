// A small pool for the store's bulk jobs (repack, verify): tasks [0, n) handed out in order to
// `threads` workers. The first exception stops the rest and is rethrown; a set cancel flag
// stops them with neural::Cancelled.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "neural/error.h"

namespace neural::store {

// 0 -> all hardware threads; never more than there are tasks.
inline int resolve_threads(int threads, std::int64_t tasks) {
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(threads, tasks)));
}

template <typename Fn>
void run_tasks(std::int64_t n, int threads, const std::atomic<bool>* cancel, Fn&& fn) {
    std::atomic<std::int64_t> next{0};
    std::atomic<bool> stop{false};
    std::exception_ptr error;
    std::mutex error_mutex;
    auto worker = [&] {
        for (;;) {
            if (stop.load() || (cancel != nullptr && cancel->load())) return;
            const std::int64_t i = next.fetch_add(1);
            if (i >= n) return;
            try {
                fn(i);
            } catch (...) {
                std::lock_guard<std::mutex> lock(error_mutex);
                if (!error) error = std::current_exception();
                stop.store(true);
                return;
            }
        }
    };
    const int nt = resolve_threads(threads, n);
    std::vector<std::thread> pool;
    for (int t = 1; t < nt; ++t) pool.emplace_back(worker);
    worker();
    for (auto& t : pool) t.join();
    if (error) std::rethrow_exception(error);
    if (cancel != nullptr && cancel->load()) throw Cancelled();
}

}  // namespace neural::store
