#include <gtest/gtest.h>

#include "cuda/device.h"

namespace neural {
namespace {

TEST(CudaDevice, ListsDevicesAndRunsAKernel) {
    std::string why;
    auto devices = cuda::list_devices(&why);
    if (devices.empty()) GTEST_SKIP() << "no GPU: " << why;
    for (const auto& d : devices) {
        EXPECT_FALSE(d.name.empty());
        EXPECT_GT(d.total_bytes, 0u);
        EXPECT_LE(d.free_bytes, d.total_bytes);
        EXPECT_GE(d.compute_major, 7) << d.name << " is older than the oldest architecture built";
        EXPECT_EQ(cuda::self_test(d.index), "") << d.name;
    }
}

}  // namespace
}  // namespace neural
