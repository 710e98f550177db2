// The CUDA backend's option rules that need no GPU (runtime/backend.h): --pin-store's values and
// its auto policy, on the 64 GB target PC and the edges of the rule.
#include <gtest/gtest.h>

#include <cstdint>

#include "runtime/backend.h"

namespace neural {
namespace {

TEST(PinStore, ValuesAreAutoZeroOrOne) {
    EXPECT_EQ(GpuOptions{}.pin_store, "auto");
    for (const char* v : {"auto", "0", "1"}) EXPECT_TRUE(is_pin_store(v)) << v;
    for (const char* v : {"", "2", "yes", "on", "AUTO", "01"}) EXPECT_FALSE(is_pin_store(v)) << v;
}

TEST(PinStore, AutoPinsAStoreOfAtMostHalfTheRam) {
    // A 64 GiB PC (Linux reports a little less than the modules hold): the 20b raw store is
    // pinned, the 120b one is not.
    const std::uint64_t ram = 65'850'000'000;
    EXPECT_TRUE(pin_store_by_default(12'800'000'000, ram));
    EXPECT_FALSE(pin_store_by_default(61'000'000'000, ram));
    // Exactly half is pinned, a byte more is not; unknown RAM (0) never pins.
    EXPECT_TRUE(pin_store_by_default(ram / 2, ram));
    EXPECT_FALSE(pin_store_by_default(ram / 2 + 1, ram));
    EXPECT_FALSE(pin_store_by_default(1, 0));
}

}  // namespace
}  // namespace neural
