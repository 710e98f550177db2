// KvCache bookkeeping: reserve/commit, truncate, clear, and data surviving growth.
#include <gtest/gtest.h>

#include "backend/kv_cache.h"
#include "model/config.h"
#include "support/fixtures.h"

namespace neural {
namespace {

ModelConfig fixture_config() { return ModelConfig::load(test::tiny_model_dir() / "config.json"); }

TEST(KvCache, StartsEmptyWithTheModelShape) {
    KvCache c(fixture_config());
    EXPECT_EQ(c.size(), 0);
    EXPECT_EQ(c.layers(), 4);
    EXPECT_EQ(c.kv_dim(), 128);  // 2 kv heads x head_dim 64
}

TEST(KvCache, ReserveCommitTruncate) {
    KvCache c(fixture_config());
    EXPECT_EQ(c.reserve_more(5), 0);
    EXPECT_EQ(c.size(), 0);  // nothing is committed by reserving
    c.commit(5);
    EXPECT_EQ(c.size(), 5);
    EXPECT_EQ(c.reserve_more(3), 5);
    c.commit(8);
    EXPECT_EQ(c.size(), 8);

    c.truncate(3);
    EXPECT_EQ(c.size(), 3);
    c.truncate(10);  // never grows
    EXPECT_EQ(c.size(), 3);
    c.truncate(3);
    EXPECT_EQ(c.size(), 3);
    c.truncate(-4);
    EXPECT_EQ(c.size(), 0);

    c.reserve_more(2);
    c.commit(2);
    c.clear();
    EXPECT_EQ(c.size(), 0);
}

TEST(KvCache, ReservedMemoryCoversThePositions) {
    KvCache c(fixture_config());
    c.reserve_more(5);
    // K and V of 4 layers, at least 5 positions of 128 floats each.
    EXPECT_GE(c.bytes(), 4u * 2u * 5u * 128u * sizeof(float));
}

TEST(KvCache, DataSurvivesGrowth) {
    KvCache c(fixture_config());
    c.reserve_more(2);
    for (int l = 0; l < c.layers(); ++l) {
        for (int p = 0; p < 2; ++p) {
            for (int i = 0; i < c.kv_dim(); ++i) {
                c.k(l, p)[i] = static_cast<float>(1000 * l + 100 * p + i);
                c.v(l, p)[i] = -static_cast<float>(1000 * l + 100 * p + i);
            }
        }
    }
    c.commit(2);
    c.reserve_more(5000);  // forces reallocation well past the initial capacity
    c.commit(5002);
    EXPECT_GE(c.bytes(), 4u * 2u * 5002u * 128u * sizeof(float));
    const KvCache& cc = c;
    for (int l = 0; l < c.layers(); ++l) {
        for (int p = 0; p < 2; ++p) {
            for (int i = 0; i < c.kv_dim(); i += 17) {
                EXPECT_EQ(cc.k(l, p)[i], static_cast<float>(1000 * l + 100 * p + i));
                EXPECT_EQ(cc.v(l, p)[i], -static_cast<float>(1000 * l + 100 * p + i));
            }
        }
    }
    // The last reserved position is writable.
    c.k(3, 5001)[127] = 1.0f;
    EXPECT_EQ(cc.k(3, 5001)[127], 1.0f);
}

}  // namespace
}  // namespace neural
