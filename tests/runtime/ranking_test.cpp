// Expert rankings (store/ranking.h): counting the router over a forward pass, the file round
// trip, malformed files, and the ranking driving the slot placement.
#include <gtest/gtest.h>

#include <numeric>

#include "cuda/hybrid/residency.h"
#include "neural/error.h"
#include "runtime/model.h"
#include "store/ranking.h"
#include "support/fixtures.h"

namespace neural {
namespace {

TEST(Ranking, CountsEveryRoutingOfAForwardPass) {
    auto m = Model::load(test::tiny_model_dir());
    const ModelConfig& c = m->config();
    RoutingCounter counter(c.num_layers, c.num_experts);
    KvCache cache = m->new_cache();
    ForwardOptions fo;
    fo.observer = &counter;
    const std::vector<TokenId> ids = {200006, 17360, 200008, 1, 2, 3, 4};
    m->forward(ids, cache, fo);
    const TokenId next = 5;
    m->forward(std::span<const TokenId>(&next, 1), cache, fo);
    EXPECT_EQ(counter.positions(), 8);
    for (const auto& layer : counter.counts()) {
        EXPECT_DOUBLE_EQ(std::accumulate(layer.begin(), layer.end(), 0.0),
                         8.0 * c.experts_per_token);
    }
}

TEST(Ranking, RoundTripsThroughItsFileAndPlacesTheHottestExpertsFirst) {
    test::TempDir tmp;
    const Ranking counts = {{1, 9, 3}, {7, 0, 2}};
    save_ranking(tmp / "r.json", counts, 5, "test");
    const Ranking back = load_ranking(tmp / "r.json");
    EXPECT_EQ(back, counts);
    Residency r(2, 3, 2, ResidencyOptions{});
    r.initial(back);
    EXPECT_EQ(r.slot_of(0, 1), 0);  // 9: hottest
    EXPECT_EQ(r.slot_of(1, 0), 1);  // 7
}

TEST(Ranking, MalformedFilesAreErrorsNamingTheFile) {
    test::TempDir tmp;
    EXPECT_NE(test::error_of([&] { load_ranking(tmp / "missing.json"); }).find("cannot read"),
              std::string::npos);
    for (const char* bad : {"{", "[]", R"({"layers": 3})", R"({"layers": [[1, "x"]]})",
                            R"({"layers": [[1, -2]]})", R"({"layers": [3]})"}) {
        SCOPED_TRACE(bad);
        test::write_file(tmp / "bad.json", bad);
        EXPECT_NE(test::error_of([&] { load_ranking(tmp / "bad.json"); }).find("bad.json"),
                  std::string::npos);
    }
}

}  // namespace
}  // namespace neural
