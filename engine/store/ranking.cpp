#include "store/ranking.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "neural/error.h"
#include "platform/atomic_file.h"

namespace neural {

RoutingCounter::RoutingCounter(int layers, int experts)
    : counts_(static_cast<std::size_t>(layers),
              std::vector<double>(static_cast<std::size_t>(experts), 0.0)) {}

void RoutingCounter::on_route(int layer, std::int64_t, std::span<const int> experts,
                              std::span<const float>) {
    auto& row = counts_[static_cast<std::size_t>(layer)];
    for (int e : experts) {
        if (e >= 0 && static_cast<std::size_t>(e) < row.size())
            row[static_cast<std::size_t>(e)] += 1.0;
    }
    if (layer == 0) ++positions_;
}

void save_ranking(const std::filesystem::path& path, const Ranking& counts, std::int64_t tokens,
                  const std::string& source) {
    nlohmann::json j;
    j["layers"] = counts;
    j["tokens"] = tokens;
    j["source"] = source;
    write_file_atomic(path, j.dump() + "\n");
}

Ranking load_ranking(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot read ranking file {}", path.string());
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        fail("{}: invalid JSON: {}", path.string(), e.what());
    }
    if (!j.is_object() || !j.contains("layers") || !j["layers"].is_array()) {
        fail("{}: expected {{\"layers\": [[count per expert], ...]}}", path.string());
    }
    Ranking out;
    for (const auto& row : j["layers"]) {
        if (!row.is_array()) fail("{}: every layer must be an array of counts", path.string());
        std::vector<double> r;
        for (const auto& v : row) {
            if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
                fail("{}: counts must be non-negative numbers", path.string());
            }
            r.push_back(v.get<double>());
        }
        out.push_back(std::move(r));
    }
    return out;
}

std::vector<store::ExpertKey> hot_first(const Ranking* ranking, int layers, int experts) {
    if (ranking != nullptr) {
        if (ranking->size() != static_cast<std::size_t>(layers)) {
            fail("the ranking has {} layers, the model {}", ranking->size(), layers);
        }
        for (const auto& row : *ranking) {
            if (row.size() != static_cast<std::size_t>(experts)) {
                fail("the ranking has {} experts in a layer, the model {}", row.size(), experts);
            }
        }
    }
    std::vector<store::ExpertKey> order;
    order.reserve(static_cast<std::size_t>(layers) * static_cast<std::size_t>(experts));
    for (int l = 0; l < layers; ++l) {
        for (int e = 0; e < experts; ++e) order.push_back({l, e});
    }
    if (ranking != nullptr) {
        const auto count = [&](const store::ExpertKey& k) {
            return (
                *ranking)[static_cast<std::size_t>(k.layer)][static_cast<std::size_t>(k.expert)];
        };
        std::stable_sort(order.begin(), order.end(),
                         [&](const auto& a, const auto& b) { return count(a) > count(b); });
    }
    return order;
}

}  // namespace neural
