// The server-side queue-wait bookkeeping behind /metrics' neural_queue_wait_seconds and /health's
// queue_wait: nearest-rank percentiles over a ring of the most recent waits, count and sum over
// all of them.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "queuewait.h"

namespace neural::host {
namespace {

TEST(QueueWaitStats, EmptyIsZero) {
    QueueWaitStats s;
    EXPECT_EQ(s.count(), 0u);
    EXPECT_EQ(s.sum(), 0.0);
    EXPECT_EQ(s.quantile(0.5), 0.0);
    EXPECT_EQ(s.quantile(0.99), 0.0);
}

TEST(QueueWaitStats, NearestRankPercentiles) {
    QueueWaitStats s;
    // 1..100 ms, recorded out of order.
    for (int i = 0; i < 100; ++i) s.record(double((i * 37) % 100 + 1) / 1000.0);
    EXPECT_EQ(s.count(), 100u);
    EXPECT_NEAR(s.sum(), 5.050, 1e-9);
    EXPECT_DOUBLE_EQ(s.quantile(0.5), 0.050);   // rank ceil(50) = 50th smallest
    EXPECT_DOUBLE_EQ(s.quantile(0.99), 0.099);  // rank 99
    EXPECT_DOUBLE_EQ(s.quantile(1.0), 0.100);
    EXPECT_DOUBLE_EQ(s.quantile(0.0), 0.001);
    EXPECT_DOUBLE_EQ(s.quantile(0.001), 0.001);

    QueueWaitStats one;
    one.record(0.25);
    EXPECT_DOUBLE_EQ(one.quantile(0.5), 0.25);
    EXPECT_DOUBLE_EQ(one.quantile(0.99), 0.25);

    QueueWaitStats three;  // p50 of 3 = 2nd, p99 of 3 = 3rd
    for (double v : {0.3, 0.1, 0.2}) three.record(v);
    EXPECT_DOUBLE_EQ(three.quantile(0.5), 0.2);
    EXPECT_DOUBLE_EQ(three.quantile(0.99), 0.3);
}

TEST(QueueWaitStats, WindowKeepsTheRecentWaitsCountKeepsAll) {
    QueueWaitStats s;
    const auto n = QueueWaitStats::kWindow;
    for (std::size_t i = 0; i < n; ++i) s.record(10.0);   // an old burst of long waits...
    for (std::size_t i = 0; i < n; ++i) s.record(0.001);  // ...replaced by short ones
    EXPECT_EQ(s.count(), 2 * n);
    EXPECT_EQ(s.windowSize(), n);
    EXPECT_DOUBLE_EQ(s.quantile(0.99), 0.001);
    EXPECT_NEAR(s.sum(), double(n) * 10.001, 1e-6);
    s.record(5.0);  // one long wait in the window shows at p100, not at p50
    EXPECT_DOUBLE_EQ(s.quantile(1.0), 5.0);
    EXPECT_DOUBLE_EQ(s.quantile(0.5), 0.001);
}

TEST(QueueWaitStats, NegativeOrNanCountsAsZero) {
    QueueWaitStats s;
    s.record(-1.0);
    s.record(std::numeric_limits<double>::quiet_NaN());
    EXPECT_EQ(s.count(), 2u);
    EXPECT_EQ(s.sum(), 0.0);
    EXPECT_EQ(s.quantile(0.99), 0.0);
}

}  // namespace
}  // namespace neural::host
