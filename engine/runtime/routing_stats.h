// Learned expert statistics (docs/ARCHITECTURE.md "Learned expert statistics"): per model, a
// decayed count of how often the router picked each (layer, expert) in real use. Model::forward
// feeds them from every front end; Model::load turns them into the Ranking that fills the GPU's
// static slots and orders the RAM warm-up when no --ranking is given; the file is saved beside the
// store (or checkpoint) at unload and every few minutes while tokens are being learned.
//
// Decay: every routed token multiplies the weights by 2^(-1/half_life) before its own choices
// add to them, so a token half_life tokens old weighs half of a new one (kHalfLifeTokens: a few
// days of chat; old habits fade, the last conversation does not dominate). The tokens of one
// forward call are added together (the same age): at a half-life of 250,000 tokens a prompt of
// 8,192 tokens shifts its own weights by at most 2%.
//
// Weight: a decode token's choices (a forward call of one new token) add 1 each, a prompt's (a
// call of more than one) kPromptRoutingWeight each. The GPU slots the statistics fill at the next
// load serve decode tokens: a prompt runs on the GPU as a whole, staging every expert it needs,
// so its routing says less about which experts should stay in VRAM (the residency's admission
// scores weigh it the same, GpuOptions::prefill_weight). "tokens" counts every token, weighed
// or not, and the decay goes by it.
//
// File (JSON, written atomically): {"format": "neural-routing-stats", "version": 1, "model":
// MODEL_ID, "layers": [[weight per expert], ...], "tokens": N, "updated": UNIX_SECONDS,
// "updated_utc": "...", "half_life_tokens": H, "source": "..."}. "layers" is the ranking file's
// key, so `--ranking` reads a statistics file, and a ranking file (no "model") is read as
// statistics of unknown model (its shape is still checked).
#pragma once

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/forward.h"
#include "store/ranking.h"

namespace neural {

class Checkpoint;
struct ModelConfig;
namespace store {
class ExpertStore;
}

inline constexpr double kHalfLifeTokens = 250000;
// What one routing of a prompt token adds to the weights; a decode token's adds 1 (file comment:
// "Weight"). GpuOptions::prefill_weight's default.
inline constexpr double kPromptRoutingWeight = 0.25;

struct RoutingStatsData {
    std::string model;  // the model identity (routing_model_id); empty: unknown (a ranking file)
    Ranking layers;     // [layer][expert] decayed weights, finite and >= 0
    std::int64_t tokens = 0;   // tokens learned in all (not decayed)
    std::int64_t updated = 0;  // unix seconds of the last update; 0: unknown
    double half_life = kHalfLifeTokens;
    std::string source;  // what wrote it ("learned in use", "neural rank ...")
};

// The identity of a model for its statistics: the expert tensors' sample hash (store/identity.h:
// the first and last 4 KiB of every expert tensor, the hash the store checks at every load) and
// the shape, "HASH16-LxE". Throws neural::Error when an expert tensor is missing.
std::string routing_model_id(const Checkpoint& ckpt, const ModelConfig& config);

// "2026-12-01 19:43 UTC" (no OS call: civil date from the day count); "unknown" for 0.
std::string format_utc(std::int64_t unix_seconds);
std::int64_t unix_now();

// The statistics file for the `routing_stats` setting: "off" -> empty; a path -> that path;
// "auto" (or "", as an emptied desktop field gives it) -> beside the store ("STORE.routing-stats.json"), else in the checkpoint folder
// ("routing-stats.json"; a GGUF file: "FILE.routing-stats.json"), unless that folder cannot be
// written: then app_data_dir()/routing-stats/NAME-HASH.json (HASH of the absolute model path).
// $NEURAL_ROUTING_STATS_DIR, when set, is used for "auto" instead of all of these (tests,
// portable installs).
std::filesystem::path routing_stats_path(const std::string& setting,
                                         const std::filesystem::path& model,
                                         const std::filesystem::path& store);
// The same with `auto_dir` in the place of $NEURAL_ROUTING_STATS_DIR (empty: the beside /
// data-folder rule).
std::filesystem::path routing_stats_path(const std::string& setting,
                                         const std::filesystem::path& model,
                                         const std::filesystem::path& store,
                                         const std::filesystem::path& auto_dir);

std::string routing_stats_json(const RoutingStatsData& data);
// Writes the file atomically (platform/atomic_file.h); throws neural::Error on failure.
void save_routing_stats(const std::filesystem::path& path, const RoutingStatsData& data);
// Reads and checks a statistics (or ranking) file: JSON object, "layers" a non-empty array of
// equally long arrays of finite weights >= 0, tokens >= 0, ... Throws neural::Error naming the
// file for anything malformed. Does not check the model (read_routing_stats does).
RoutingStatsData load_routing_stats(const std::filesystem::path& path);
// The file's statistics when they are this model's: nullopt when the file is missing (quietly:
// nothing learned yet) or unusable (malformed, another model's identity, another shape); then
// `why` says why and the caller logs it as one warning.
std::optional<RoutingStatsData> read_routing_stats(const std::filesystem::path& path,
                                                   const std::string& model, int layers,
                                                   int experts, std::string* why);

// The accumulated statistics of one loaded model. add() is called by the thread that runs the
// forward pass (once per call, with that call's counts), snapshot() / save() from any thread
// (the model's save timer): one mutex, never taken per routing.
class RoutingStats {
public:
    RoutingStats(std::string model, int layers, int experts, double half_life = kHalfLifeTokens);
    // Starts from a file's statistics (same shape; the identity is this model's).
    void seed(const RoutingStatsData& data);
    // Decays the weights by `tokens` tokens, then adds `counts` ([layer * experts + expert])
    // times `weight` (what one routing adds: 1 for decode, kPromptRoutingWeight for a prompt).
    void add(std::span<const std::uint32_t> counts, std::int64_t tokens, double weight = 1.0);
    RoutingStatsData snapshot() const;
    // Forgets everything (weights, tokens, date): a reset.
    void clear();
    // Tokens added since the last save / seed.
    std::int64_t unsaved_tokens() const;
    // Saves when something was added since the last save; true when it wrote. Throws on a write
    // error (the tokens stay unsaved).
    bool save_if_changed(const std::filesystem::path& path);
    int layers() const { return layers_; }
    int experts() const { return experts_; }

private:
    const int layers_, experts_;
    const double half_life_;
    mutable std::mutex mutex_;
    RoutingStatsData data_;
    std::int64_t unsaved_ = 0;
};

// The observer Model::forward installs for one call of `new_tokens` tokens: counts into a plain
// array (no lock, no allocation per routing), forwards each routing to the caller's observer
// when there is one, and adds its counts to the statistics once, when it is destroyed or
// flushed, each routing weighing 1 for a one-token call (decode) and kPromptRoutingWeight for a
// longer one (a prompt).
class RoutingStatsObserver final : public RouterObserver {
public:
    RoutingStatsObserver(RoutingStats& stats, RouterObserver* next, std::int64_t new_tokens);
    ~RoutingStatsObserver() override;
    RoutingStatsObserver(const RoutingStatsObserver&) = delete;
    RoutingStatsObserver& operator=(const RoutingStatsObserver&) = delete;
    void on_route(int layer, std::int64_t position, std::span<const int> experts,
                  std::span<const float> weights) override;
    // Only the caller's observer may need every route (it decides); learning does not.
    bool needs_every_route() const override {
        return next_ != nullptr && next_->needs_every_route();
    }
    void flush();
    // What each routing of this call adds (1 or kPromptRoutingWeight).
    double weight() const { return weight_; }

private:
    RoutingStats& stats_;
    RouterObserver* next_;
    double weight_;
    std::vector<std::uint32_t> counts_;
    std::int64_t tokens_ = 0;
};

}  // namespace neural
