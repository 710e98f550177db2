// Expert rankings: how often the router chose each (layer, expert) over a warm-up text. The hybrid
// backend fills its static slots hottest-first from one (`--ranking FILE`); `neural rank` writes
// one. File format: {"layers": [[count per expert], ...], "tokens": N, "source": "..."}.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "backend/forward.h"
#include "store/store.h"

namespace neural {

using Ranking = std::vector<std::vector<double>>;  // [layer][expert] counts

// Counts the router's choices of a forward pass (ForwardOptions::observer).
class RoutingCounter final : public RouterObserver {
public:
    RoutingCounter(int layers, int experts);
    void on_route(int layer, std::int64_t position, std::span<const int> experts,
                  std::span<const float> weights) override;
    const Ranking& counts() const { return counts_; }
    std::int64_t positions() const { return positions_; }

private:
    Ranking counts_;
    std::int64_t positions_ = 0;  // routings seen at layer 0 = tokens processed
};

// Writes a ranking file atomically.
void save_ranking(const std::filesystem::path& path, const Ranking& counts, std::int64_t tokens,
                  const std::string& source);
// Reads and checks a ranking file (shape is checked against the model by Residency::initial).
// Throws neural::Error naming the file for anything malformed.
Ranking load_ranking(const std::filesystem::path& path);

// Every (layer, expert) of a `layers` x `experts` model, hottest first: by count, descending;
// equal counts (and the experts a ranking never saw) in layer order, then expert order. Without
// a ranking (nullptr): layer order. The RAM warm-up and --lock-ram go through this order.
// Throws neural::Error when the ranking's shape is not the model's.
std::vector<store::ExpertKey> hot_first(const Ranking* ranking, int layers, int experts);

}  // namespace neural
