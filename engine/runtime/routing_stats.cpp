#include "runtime/routing_stats.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/safetensors.h"
#include "neural/error.h"
#include "platform/atomic_file.h"
#include "platform/memory.h"
#include "store/hash.h"
#include "store/identity.h"

namespace neural {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kFormat = "neural-routing-stats";
constexpr int kVersion = 1;
// The file holds one weight per expert of every layer: gpt-oss-120b's 36 x 128 take ~100 KB.
constexpr std::uint64_t kMaxRoutingStatsBytes = 4 * 1024 * 1024;

// Whether a file can be created in `dir` (tried: permissions alone do not tell, e.g. for root or
// a read-only mount).
bool folder_writable(const fs::path& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return false;
    std::random_device rd;
    const fs::path probe = dir / fmt::format(".neural-write-probe-{}", rd());
    bool ok = false;
    {
        std::ofstream f(probe, std::ios::binary);
        ok = static_cast<bool>(f);
    }
    if (ok) fs::remove(probe, ec);
    return ok;
}

std::string data_dir_name(const fs::path& key) {
    std::error_code ec;
    fs::path abs = fs::absolute(key, ec);
    if (ec) abs = key;
    const std::string text = abs.lexically_normal().generic_string();
    std::string stem = abs.lexically_normal().filename().string();
    if (stem.empty()) stem = "model";
    return fmt::format("{}-{}.json", stem, store::hex64(store::xxh3_64(text.data(), text.size())));
}

}  // namespace

std::string routing_model_id(const Checkpoint& ckpt, const ModelConfig& config) {
    const store::CheckpointId id = store::describe_experts(ckpt, config);
    return fmt::format("{}-{}x{}", store::hex64(id.sample_hash), config.num_layers,
                       config.num_experts);
}

std::int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string format_utc(std::int64_t t) {
    if (t <= 0) return "unknown";
    // Days since 1970-01-01 -> civil date (proleptic Gregorian).
    std::int64_t z = t / 86400;
    const std::int64_t secs = t % 86400;
    z += 719468;
    const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const std::int64_t doe = z - era * 146097;
    const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    std::int64_t y = yoe + era * 400;
    const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const std::int64_t mp = (5 * doy + 2) / 153;
    const std::int64_t d = doy - (153 * mp + 2) / 5 + 1;
    const std::int64_t m = mp < 10 ? mp + 3 : mp - 9;
    if (m <= 2) ++y;
    return fmt::format("{:04}-{:02}-{:02} {:02}:{:02} UTC", y, m, d, secs / 3600, (secs / 60) % 60);
}

fs::path routing_stats_path(const std::string& setting, const fs::path& model,
                            const fs::path& store) {
    const char* dir = std::getenv("NEURAL_ROUTING_STATS_DIR");
    return routing_stats_path(setting, model, store, dir != nullptr ? fs::path(dir) : fs::path());
}

fs::path routing_stats_path(const std::string& setting, const fs::path& model,
                            const fs::path& store, const fs::path& auto_dir) {
    if (setting == "off") return {};
    if (setting != "auto" && !setting.empty()) return fs::path(setting);
    const fs::path key = store.empty() ? model : store;
    if (!auto_dir.empty()) return auto_dir / data_dir_name(key);
    std::error_code ec;
    fs::path beside;
    if (!store.empty()) {
        beside = fs::path(store.string() + ".routing-stats.json");
    } else if (fs::is_directory(model, ec)) {
        beside = model / "routing-stats.json";
    } else {
        beside = fs::path(model.string() + ".routing-stats.json");
    }
    fs::path folder = beside.parent_path();
    if (folder.empty()) folder = ".";
    if (folder_writable(folder)) return beside;
    const fs::path data = app_data_dir();
    if (data.empty()) return beside;  // nowhere better: saving it will warn
    return data / "routing-stats" / data_dir_name(key);
}

std::string routing_stats_json(const RoutingStatsData& d) {
    json j;
    j["format"] = kFormat;
    j["version"] = kVersion;
    j["model"] = d.model;
    j["tokens"] = d.tokens;
    j["updated"] = d.updated;
    j["updated_utc"] = format_utc(d.updated);
    j["half_life_tokens"] = d.half_life;
    j["source"] = d.source;
    j["layers"] = d.layers;
    return j.dump() + "\n";
}

void save_routing_stats(const fs::path& path, const RoutingStatsData& data) {
    std::error_code ec;
    if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
    write_file_atomic(path, routing_stats_json(data));
}

RoutingStatsData load_routing_stats(const fs::path& path) {
    // Regular files only, opened without waiting (a FIFO at the path never blocks the load) and
    // bounded in size (a huge file is refused before it is read).
    const std::string bytes = read_regular_file(path, kMaxRoutingStatsBytes);
    const std::string name = path.string();
    json j;
    try {
        j = json::parse(bytes);
    } catch (const json::exception& e) {
        fail("{}: invalid JSON: {}", name, e.what());
    }
    RoutingStatsData d;
    if (!j.is_object()) fail("{}: expected a JSON object", name);
    if (j.contains("format") && j["format"] != kFormat) {
        fail("{}: \"format\" is not \"{}\"", name, kFormat);
    }
    if (j.contains("version") && j["version"] != kVersion) {
        fail("{}: version {} is not {} (written by another version of Neural)", name,
             j["version"].dump(), kVersion);
    }
    auto text = [&](const char* key) {
        if (!j.contains(key)) return std::string();
        if (!j[key].is_string()) fail("{}: \"{}\" must be a string", name, key);
        return j[key].get<std::string>();
    };
    auto count = [&](const char* key) -> std::int64_t {
        if (!j.contains(key)) return 0;
        const json& v = j[key];
        if (v.is_number_unsigned() &&
            v.get<std::uint64_t>() <=
                static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
            return static_cast<std::int64_t>(v.get<std::uint64_t>());
        }
        if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return v.get<std::int64_t>();
        fail("{}: \"{}\" must be an integer >= 0", name, key);
    };
    d.model = text("model");
    d.source = text("source");
    d.tokens = count("tokens");
    d.updated = count("updated");
    if (j.contains("half_life_tokens")) {
        const json& h = j["half_life_tokens"];
        if (!h.is_number() || !std::isfinite(h.get<double>()) || !(h.get<double>() > 0)) {
            fail("{}: \"half_life_tokens\" must be a number > 0", name);
        }
        d.half_life = h.get<double>();
    }
    if (!j.contains("layers") || !j["layers"].is_array() || j["layers"].empty()) {
        fail("{}: expected \"layers\": [[weight per expert], ...]", name);
    }
    for (const json& row : j["layers"]) {
        if (!row.is_array() || row.empty()) {
            fail("{}: every layer must be a non-empty array of weights", name);
        }
        std::vector<double> r;
        r.reserve(row.size());
        for (const json& v : row) {
            if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0) {
                fail("{}: weights must be finite numbers >= 0", name);
            }
            r.push_back(v.get<double>());
        }
        if (!d.layers.empty() && r.size() != d.layers.front().size()) {
            fail("{}: the layers have different numbers of experts", name);
        }
        d.layers.push_back(std::move(r));
    }
    return d;
}

std::optional<RoutingStatsData> read_routing_stats(const fs::path& path, const std::string& model,
                                                   int layers, int experts, std::string* why) {
    std::error_code ec;
    if (why != nullptr) why->clear();
    if (!fs::exists(path, ec)) return std::nullopt;
    auto reject = [&](std::string reason) -> std::optional<RoutingStatsData> {
        if (why != nullptr) *why = std::move(reason);
        return std::nullopt;
    };
    RoutingStatsData d;
    try {
        d = load_routing_stats(path);
    } catch (const std::exception& e) {  // neural::Error, and bad_alloc for an absurd file
        return reject(e.what());
    }
    if (!d.model.empty() && d.model != model) {
        return reject(fmt::format("{}: learned on another model ({}; this one is {})",
                                  path.string(), d.model, model));
    }
    if (d.layers.size() != static_cast<std::size_t>(layers) ||
        d.layers.front().size() != static_cast<std::size_t>(experts)) {
        return reject(fmt::format("{}: {} layers x {} experts, the model has {} x {}",
                                  path.string(), d.layers.size(), d.layers.front().size(), layers,
                                  experts));
    }
    d.model = model;
    return d;
}

RoutingStats::RoutingStats(std::string model, int layers, int experts, double half_life)
    : layers_(layers), experts_(experts), half_life_(half_life) {
    data_.model = std::move(model);
    data_.half_life = half_life;
    data_.source = "learned in use";
    data_.layers.assign(static_cast<std::size_t>(layers),
                        std::vector<double>(static_cast<std::size_t>(experts), 0.0));
}

void RoutingStats::seed(const RoutingStatsData& data) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (data.layers.size() != static_cast<std::size_t>(layers_)) return;
    for (const auto& row : data.layers) {
        if (row.size() != static_cast<std::size_t>(experts_)) return;
    }
    const std::string model = data_.model;
    data_ = data;
    data_.model = model;
    data_.half_life = half_life_;  // this build's decay from now on
    if (data_.source.empty()) data_.source = "learned in use";
    unsaved_ = 0;
}

void RoutingStats::add(std::span<const std::uint32_t> counts, std::int64_t tokens, double weight) {
    if (tokens <= 0) return;
    const auto E = static_cast<std::size_t>(experts_);
    const double decay = std::exp2(-static_cast<double>(tokens) / half_life_);
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::size_t l = 0; l < data_.layers.size(); ++l) {
        std::vector<double>& row = data_.layers[l];
        for (std::size_t e = 0; e < E; ++e) {
            const std::size_t i = l * E + e;
            row[e] = row[e] * decay + (i < counts.size() ? weight * counts[i] : 0.0);
        }
    }
    data_.tokens += tokens;
    data_.updated = unix_now();
    unsaved_ += tokens;
}

void RoutingStats::clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& row : data_.layers) std::fill(row.begin(), row.end(), 0.0);
    data_.tokens = 0;
    data_.updated = 0;
    data_.source = "learned in use";
    unsaved_ = 0;
}

RoutingStatsData RoutingStats::snapshot() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return data_;
}

std::int64_t RoutingStats::unsaved_tokens() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return unsaved_;
}

bool RoutingStats::save_if_changed(const fs::path& path) {
    RoutingStatsData copy;
    std::int64_t pending = 0;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (unsaved_ == 0) return false;
        copy = data_;
        pending = unsaved_;
    }
    save_routing_stats(path, copy);
    std::lock_guard<std::mutex> lock(mutex_);
    unsaved_ -= pending;
    return true;
}

RoutingStatsObserver::RoutingStatsObserver(RoutingStats& stats, RouterObserver* next,
                                           std::int64_t new_tokens)
    : stats_(stats),
      next_(next),
      weight_(new_tokens > 1 ? kPromptRoutingWeight : 1.0),
      counts_(static_cast<std::size_t>(stats.layers()) * static_cast<std::size_t>(stats.experts()),
              0) {}

RoutingStatsObserver::~RoutingStatsObserver() { flush(); }

void RoutingStatsObserver::on_route(int layer, std::int64_t position, std::span<const int> experts,
                                    std::span<const float> weights) {
    if (layer >= 0 && layer < stats_.layers()) {
        const std::size_t base =
            static_cast<std::size_t>(layer) * static_cast<std::size_t>(stats_.experts());
        for (int e : experts) {
            if (e >= 0 && e < stats_.experts()) ++counts_[base + static_cast<std::size_t>(e)];
        }
        if (layer == 0) ++tokens_;
    }
    if (next_ != nullptr) next_->on_route(layer, position, experts, weights);
}

void RoutingStatsObserver::flush() {
    if (tokens_ == 0) return;
    stats_.add(counts_, tokens_, weight_);
    std::fill(counts_.begin(), counts_.end(), 0u);
    tokens_ = 0;
}

}  // namespace neural
