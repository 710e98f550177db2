// Per-thread scratch freed at thread exit (platform/thread_scratch.h): every thread that used it
// gets its own object, and each object is destroyed exactly once when its thread ends. Under
// Wine this is also the regression test for mingw's thread_local destructors, which ran on
// freed storage and corrupted the heap when threads that had used a kernel ended.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "platform/thread_scratch.h"

namespace neural {
namespace {

std::atomic<int> g_made{0};
std::atomic<int> g_destroyed{0};

struct Counted {
    std::vector<float> data = std::vector<float>(4096, 1.0f);  // real heap memory to free
    Counted() { g_made.fetch_add(1); }
    ~Counted() { g_destroyed.fetch_add(1); }
};

TEST(ThreadScratch, EachThreadGetsItsOwnObjectDestroyedOnceWhenItEnds) {
    g_made = 0;
    g_destroyed = 0;
    constexpr int kRounds = 20, kThreads = 8;
    for (int round = 0; round < kRounds; ++round) {
        std::vector<Counted*> seen(kThreads, nullptr);
        // Every thread holds its object until all have theirs: then no address can be reused.
        std::mutex m;
        std::condition_variable cv;
        int holding = 0;
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t)
            threads.emplace_back([&, t] {
                Counted& a = thread_scratch<Counted>();
                Counted& b = thread_scratch<Counted>();
                EXPECT_EQ(&a, &b) << "a thread gets the same object every call";
                a.data[static_cast<std::size_t>(t)] = static_cast<float>(t);
                seen[static_cast<std::size_t>(t)] = &a;
                std::unique_lock<std::mutex> lock(m);
                if (++holding == kThreads) cv.notify_all();
                cv.wait(lock, [&] { return holding == kThreads; });
            });
        for (auto& th : threads) th.join();
        const std::set<Counted*> distinct(seen.begin(), seen.end());
        EXPECT_EQ(distinct.size(), static_cast<std::size_t>(kThreads))
            << "threads alive at the same time never share an object";
    }
    EXPECT_EQ(g_made.load(), kRounds * kThreads);
    EXPECT_EQ(g_destroyed.load(), kRounds * kThreads)
        << "every ended thread's object is destroyed exactly once";
}

TEST(ThreadScratch, TagsTellApartObjectsOfTheSameType) {
    std::thread([] {
        auto& a = thread_scratch<std::vector<int>, struct TagA>();
        auto& b = thread_scratch<std::vector<int>, struct TagB>();
        EXPECT_NE(&a, &b);
        a.assign(3, 1);
        b.assign(5, 2);
        EXPECT_EQ((thread_scratch<std::vector<int>, TagA>().size()), 3u);
        EXPECT_EQ((thread_scratch<std::vector<int>, TagB>().size()), 5u);
    }).join();
}

}  // namespace
}  // namespace neural
