// Learned expert statistics (runtime/routing_stats.h): the decay, the per-call observer, the
// file round trip and where it lives, every kind of bad file (one warning, never an error), a
// corrupt-bytes loop, learning through Model::forward, the save at unload and the use at load.
#ifndef _WIN32
#include <sys/stat.h>
#endif

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <spdlog/spdlog.h>

#include "cuda/hybrid/residency.h"
#include "runtime/model.h"
#include "runtime/routing_stats.h"
#include "store/ranking.h"
#include "support/fixtures.h"

namespace neural {
namespace {

using ::testing::HasSubstr;

// Collects the log lines (warnings and up, or everything) while it lives.
class LogCapture {
public:
    LogCapture() : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256)) {
        previous_ = spdlog::default_logger();
        auto logger = std::make_shared<spdlog::logger>("capture", sink_);
        logger->set_level(spdlog::level::debug);
        spdlog::set_default_logger(logger);
    }
    ~LogCapture() { spdlog::set_default_logger(previous_); }
    std::vector<std::string> lines(spdlog::level::level_enum at_least) const {
        std::vector<std::string> out;
        for (const auto& m : sink_->last_raw()) {
            if (m.level >= at_least) out.emplace_back(m.payload.data(), m.payload.size());
        }
        return out;
    }

private:
    std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
    std::shared_ptr<spdlog::logger> previous_;
};

// The captured lines about the expert statistics (other parts of a load may warn too, e.g. a
// missing persistent team library on a machine of many CPUs).
std::vector<std::string> stats_lines(const LogCapture& log, spdlog::level::level_enum at_least) {
    std::vector<std::string> out;
    for (const std::string& l : log.lines(at_least)) {
        if (l.find("expert statistics") != std::string::npos) out.push_back(l);
    }
    return out;
}

RoutingStatsData sample_data(const std::string& model, int layers, int experts) {
    RoutingStatsData d;
    d.model = model;
    d.tokens = 1234;
    d.updated = 1796154191;
    d.source = "test";
    for (int l = 0; l < layers; ++l) {
        std::vector<double> row;
        for (int e = 0; e < experts; ++e) row.push_back(static_cast<double>((l * 7 + e * 3) % 11));
        d.layers.push_back(row);
    }
    return d;
}

std::string read_text(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

LoadOptions with_stats(const std::filesystem::path& file) {
    LoadOptions o;
    o.routing_stats = file.string();
    return o;
}

TEST(RoutingStats, EveryTokenDecaysTheWeightsByItsHalfLife) {
    RoutingStats s("m", 1, 2, 100);
    const std::vector<std::uint32_t> one = {1, 0}, none = {0, 0};
    s.add(one, 1);
    EXPECT_EQ(s.snapshot().layers[0][0], 1.0);
    s.add(none, 100);  // one half-life later
    EXPECT_DOUBLE_EQ(s.snapshot().layers[0][0], 0.5);
    s.add(none, 200);
    EXPECT_DOUBLE_EQ(s.snapshot().layers[0][0], 0.125);
    const std::vector<std::uint32_t> both = {2, 3};
    s.add(both, 100);
    EXPECT_DOUBLE_EQ(s.snapshot().layers[0][0], 0.0625 + 2);
    EXPECT_DOUBLE_EQ(s.snapshot().layers[0][1], 3);
    EXPECT_EQ(s.snapshot().tokens, 401);
    EXPECT_EQ(s.unsaved_tokens(), 401);
    s.add(none, 0);  // a call that routed nothing changes nothing
    EXPECT_EQ(s.snapshot().tokens, 401);
}

// A prompt's routings add kPromptRoutingWeight each, a decode token's 1; both decay alike and
// "tokens" counts every token.
TEST(RoutingStats, APromptsRoutingsWeighLessThanDecodes) {
    EXPECT_EQ(kPromptRoutingWeight, 0.25);
    EXPECT_EQ(kPromptRoutingWeight, GpuOptions{}.prefill_weight);  // the residency's weighing
    RoutingStats s("m", 1, 2, 100);
    s.add(std::vector<std::uint32_t>{4, 0}, 2, kPromptRoutingWeight);  // a prompt of 2 tokens
    EXPECT_EQ(s.snapshot().layers[0], (std::vector<double>{1, 0}));
    s.add(std::vector<std::uint32_t>{0, 1}, 1);  // a decode token
    EXPECT_DOUBLE_EQ(s.snapshot().layers[0][0], std::exp2(-1.0 / 100));
    EXPECT_DOUBLE_EQ(s.snapshot().layers[0][1], 1.0);
    s.add(std::vector<std::uint32_t>{8, 0}, 100, kPromptRoutingWeight);  // one half-life later
    EXPECT_DOUBLE_EQ(s.snapshot().layers[0][0], std::exp2(-1.0 / 100) / 2 + 2);
    EXPECT_DOUBLE_EQ(s.snapshot().layers[0][1], 0.5);
    EXPECT_EQ(s.snapshot().tokens, 103);
    EXPECT_EQ(s.unsaved_tokens(), 103);
}

// The observer weighs its call's routings by the call's size: one new token is decode.
TEST(RoutingStats, TheObserverWeighsAPromptCallLess) {
    RoutingStats s("m", 1, 4, 100);
    const std::vector<float> w = {0.5f, 0.5f};
    {
        RoutingStatsObserver prompt(s, nullptr, 3);
        EXPECT_EQ(prompt.weight(), kPromptRoutingWeight);
        for (std::int64_t p = 0; p < 3; ++p) prompt.on_route(0, p, std::vector<int>{1, 2}, w);
    }
    RoutingStatsData d = s.snapshot();
    EXPECT_EQ(d.tokens, 3);
    EXPECT_EQ(d.layers[0], (std::vector<double>{0, 0.75, 0.75, 0}));
    {
        RoutingStatsObserver decode(s, nullptr, 1);
        EXPECT_EQ(decode.weight(), 1.0);
        decode.on_route(0, 3, std::vector<int>{2, 3}, w);
    }
    d = s.snapshot();
    EXPECT_EQ(d.tokens, 4);
    const double decay = std::exp2(-1.0 / 100);
    EXPECT_DOUBLE_EQ(d.layers[0][1], 0.75 * decay);
    EXPECT_DOUBLE_EQ(d.layers[0][2], 0.75 * decay + 1);
    EXPECT_DOUBLE_EQ(d.layers[0][3], 1.0);
}

TEST(RoutingStats, TheObserverAddsOnceAndForwardsEveryRouting) {
    RoutingStats s("m", 2, 4);
    RoutingCounter caller(2, 4);
    {
        RoutingStatsObserver obs(s, &caller, 1);  // weight 1: the counts as they are
        EXPECT_TRUE(obs.needs_every_route());     // the caller's counter wants them all
        const std::vector<int> a = {1, 2}, b = {3, 1};
        const std::vector<float> w = {0.5f, 0.5f};
        for (std::int64_t p = 0; p < 3; ++p) {
            obs.on_route(0, p, a, w);
            obs.on_route(1, p, b, w);
        }
        EXPECT_EQ(s.snapshot().tokens, 0);  // nothing until the call ends
    }
    const RoutingStatsData d = s.snapshot();
    EXPECT_EQ(d.tokens, 3);
    EXPECT_EQ(d.layers[0], (std::vector<double>{0, 3, 3, 0}));
    EXPECT_EQ(d.layers[1], (std::vector<double>{0, 3, 0, 3}));
    EXPECT_EQ(caller.positions(), 3);
    EXPECT_EQ(caller.counts()[1][3], 3);
    {
        RoutingStatsObserver alone(s, nullptr, 1);
        EXPECT_FALSE(alone.needs_every_route());  // learning may skip reused positions
        const std::vector<int> bad = {-1, 9};
        const std::vector<float> w = {0.5f, 0.5f};
        alone.on_route(7, 0, bad, w);  // a layer and experts the model does not have: ignored
        alone.on_route(0, 0, bad, w);
    }
    EXPECT_EQ(s.snapshot().tokens, 4);
    EXPECT_EQ(s.snapshot().layers[0][1], 3 * std::exp2(-1.0 / kHalfLifeTokens));
}

TEST(RoutingStats, AddsFromOneThreadWhileAnotherSaves) {
    test::TempDir tmp;
    RoutingStats s("m", 2, 3);
    std::atomic<bool> done{false};
    std::thread saver([&] {
        while (!done.load()) {
            s.save_if_changed(tmp / "s.json");
            (void)s.snapshot();
        }
    });
    const std::vector<std::uint32_t> c = {1, 0, 1, 0, 2, 0};
    for (int i = 0; i < 20000; ++i) s.add(c, 1);
    done = true;
    saver.join();
    s.save_if_changed(tmp / "s.json");
    EXPECT_EQ(s.unsaved_tokens(), 0);
    EXPECT_EQ(load_routing_stats(tmp / "s.json").tokens, 20000);
}

TEST(RoutingStats, RoundTripsThroughItsFileWhichRankingReadsToo) {
    test::TempDir tmp;
    const RoutingStatsData d = sample_data("abc-2x3", 2, 3);
    save_routing_stats(tmp / "sub" / "s.json", d);  // the folder is created
    const RoutingStatsData back = load_routing_stats(tmp / "sub" / "s.json");
    EXPECT_EQ(back.model, d.model);
    EXPECT_EQ(back.layers, d.layers);
    EXPECT_EQ(back.tokens, d.tokens);
    EXPECT_EQ(back.updated, d.updated);
    EXPECT_EQ(back.source, d.source);
    EXPECT_EQ(back.half_life, kHalfLifeTokens);
    EXPECT_THAT(read_text(tmp / "sub" / "s.json"), HasSubstr("2026-12-01 19:43 UTC"));
    // --ranking FILE takes a statistics file.
    EXPECT_EQ(load_ranking(tmp / "sub" / "s.json"), d.layers);
    // And a ranking file (`neural rank` before statistics) reads as statistics of no model.
    save_ranking(tmp / "r.json", d.layers, 77, "old rank");
    std::string why;
    const auto r = read_routing_stats(tmp / "r.json", "this-model", 2, 3, &why);
    ASSERT_TRUE(r.has_value()) << why;
    EXPECT_EQ(r->layers, d.layers);
    EXPECT_EQ(r->tokens, 77);
    EXPECT_EQ(r->model, "this-model");
}

TEST(RoutingStats, FormatsDatesInUtc) {
    EXPECT_EQ(format_utc(0), "unknown");
    EXPECT_EQ(format_utc(1796154191), "2026-12-01 19:43 UTC");
    EXPECT_EQ(format_utc(951868740), "2000-02-29 23:59 UTC");
    EXPECT_EQ(format_utc(86400 * 365), "1971-01-01 00:00 UTC");
}

TEST(RoutingStats, TheFileLivesBesideTheStoreElseTheCheckpoint) {
    test::TempDir tmp;
    std::filesystem::create_directories(tmp / "model");
    const auto model = tmp / "model";
    EXPECT_TRUE(routing_stats_path("off", model, {}, {}).empty());
    EXPECT_EQ(routing_stats_path("/x/y.json", model, {}, {}), std::filesystem::path("/x/y.json"));
    EXPECT_EQ(routing_stats_path("auto", model, {}, {}), model / "routing-stats.json");
    EXPECT_EQ(routing_stats_path("auto", model, tmp / "e.nstore", {}),
              tmp / "e.nstore.routing-stats.json");
    EXPECT_EQ(routing_stats_path("auto", tmp / "m.gguf", {}, {}),
              tmp / "m.gguf.routing-stats.json");
    // The override folder: one file per model path, named after it.
    const auto a = routing_stats_path("auto", model, {}, tmp / "d");
    const auto b = routing_stats_path("auto", tmp / "other" / "model", {}, tmp / "d");
    EXPECT_EQ(a.parent_path(), tmp / "d");
    EXPECT_THAT(a.filename().string(), ::testing::StartsWith("model-"));
    EXPECT_NE(a, b);
    EXPECT_EQ(a, routing_stats_path("auto", model, {}, tmp / "d"));
}

// Every kind of unusable file: read_routing_stats says why (the caller's one warning) and
// returns nothing; Model::load runs without them, logging exactly one warning.
TEST(RoutingStats, BadFilesAreIgnoredWithOneWarning) {
    test::TempDir tmp;
    const auto dir = test::tiny_model_dir();
    std::string id;
    int L = 0, E = 0;
    {
        auto m = Model::load(dir, with_stats(tmp / "probe.json"));
        id = m->routing_stats()->snapshot().model;
        L = m->config().num_layers;
        E = m->config().num_experts;
    }
    ASSERT_FALSE(id.empty());
    const std::string good = routing_stats_json(sample_data(id, L, E));
    auto with_layers = [&](const std::string& layers) {
        nlohmann::json j = nlohmann::json::parse(good);
        j["layers"] = nlohmann::json::parse(layers);
        return j.dump();
    };
    // Layers as raw text (what JSON cannot hold, or what a parser turns into inf).
    auto raw_layers = [&](const std::string& text) {
        std::string s = with_layers("[[1]]");
        return s.replace(s.find("[[1]]"), 5, text);
    };
    std::vector<std::pair<std::string, std::string>> cases = {
        {"another model", routing_stats_json(sample_data("0123456789abcdef-2x4", L, E))},
        {"truncated", good.substr(0, good.size() / 2)},
        {"empty", ""},
        {"corrupt JSON", "{\"layers\": [[1, 2], [3, }"},
        {"NaN", raw_layers("[[NaN]]")},
        {"inf", raw_layers("[[1e999]]")},
        {"negative weight", routing_stats_json([&] {
             auto d = sample_data(id, L, E);
             d.layers[0][1] = -1;
             return d;
         }())},
        {"too few layers", routing_stats_json(sample_data(id, L - 1, E))},
        {"too few experts", routing_stats_json(sample_data(id, L, E - 1))},
        {"ragged", with_layers("[[1, 2], [3]]")},
        {"not numbers", with_layers("[[\"1\", 2]]")},
        {"no layers", "{\"tokens\": 3}"},
        {"not an object", "[1, 2, 3]"},
        {"negative tokens",
         [&] {
             nlohmann::json j = nlohmann::json::parse(good);
             j["tokens"] = -5;
             return j.dump();
         }()},
        {"newer version",
         [&] {
             nlohmann::json j = nlohmann::json::parse(good);
             j["version"] = 2;
             return j.dump();
         }()},
        {"model not a string",
         [&] {
             nlohmann::json j = nlohmann::json::parse(good);
             j["model"] = 3;
             return j.dump();
         }()},
    };
    for (const auto& [what, text] : cases) {
        SCOPED_TRACE(what);
        const auto file = tmp / "bad.json";
        test::write_file(file, text);
        std::string why;
        EXPECT_FALSE(read_routing_stats(file, id, L, E, &why).has_value());
        EXPECT_THAT(why, HasSubstr("bad.json"));
        // Loading with it (a few kinds: each load takes a while).
        if (what != "another model" && what != "truncated" && what != "NaN" && what != "ragged")
            continue;
        LogCapture log;
        std::unique_ptr<Model> m;
        EXPECT_NO_THROW(m = Model::load(dir, with_stats(file)));
        ASSERT_TRUE(m);
        EXPECT_TRUE(m->learned_ranking().empty());
        const auto warnings = stats_lines(log, spdlog::level::warn);
        ASSERT_EQ(warnings.size(), 1u);
        EXPECT_THAT(warnings[0], HasSubstr("expert statistics ignored"));
        EXPECT_THAT(warnings[0], HasSubstr("bad.json"));
        EXPECT_EQ(m->routing_stats()->snapshot().tokens, 0);  // starts afresh
    }
    // A missing file is no warning: nothing was learned yet.
    LogCapture log;
    auto m = Model::load(dir, with_stats(tmp / "none-yet.json"));
    EXPECT_TRUE(stats_lines(log, spdlog::level::warn).empty());
}

// Corrupt bytes: random flips, cuts and insertions of a good file never throw or crash, and
// whatever is accepted is a usable ranking (right shape, finite weights >= 0).
TEST(RoutingStats, CorruptBytesNeverCrashTheReader) {
    test::TempDir tmp;
    const int L = 3, E = 5;
    const std::string good = routing_stats_json(sample_data("id-3x5", L, E));
    std::mt19937 rng(12345);
    int accepted = 0;
    for (int i = 0; i < 800; ++i) {
        std::string bytes = good;
        const int edits = 1 + static_cast<int>(rng() % 4);
        for (int k = 0; k < edits && !bytes.empty(); ++k) {
            const std::size_t at = rng() % bytes.size();
            switch (rng() % 4) {
                case 0:
                    bytes[at] = static_cast<char>(rng() % 256);
                    break;
                case 1:
                    bytes.resize(at);
                    break;
                case 2:
                    bytes.insert(at, 1, "-0123456789e.,[]{}\"nN"[rng() % 21]);
                    break;
                default:
                    bytes.erase(at, 1 + rng() % 8);
                    break;
            }
        }
        const auto file = tmp / "f.json";
        test::write_file(file, bytes);
        std::string why;
        std::optional<RoutingStatsData> d;
        ASSERT_NO_THROW(d = read_routing_stats(file, "id-3x5", L, E, &why)) << bytes;
        if (!d) {
            EXPECT_FALSE(why.empty());
            continue;
        }
        ++accepted;
        ASSERT_EQ(d->layers.size(), static_cast<std::size_t>(L));
        for (const auto& row : d->layers) {
            ASSERT_EQ(row.size(), static_cast<std::size_t>(E));
            for (double w : row) EXPECT_TRUE(std::isfinite(w) && w >= 0) << bytes;
        }
        EXPECT_GE(d->tokens, 0);
        EXPECT_NO_THROW(hot_first(&d->layers, L, E));
    }
    EXPECT_GT(accepted, 0);  // some edits (inside a number) leave a valid file
}

// Model::forward learns every call's routing (with or without the caller's observer), the file
// is written at unload, and the next load reads it, says so, and ranks from it.
TEST(RoutingStats, TheModelLearnsSavesAtUnloadAndRanksFromItAtTheNextLoad) {
    test::TempDir tmp;
    const auto file = tmp / "learned.json";
    const std::vector<TokenId> ids = {200006, 17360, 200008, 1, 2, 3, 4};
    Ranking counted;
    {
        auto m = Model::load(test::tiny_model_dir(), with_stats(file));
        ASSERT_NE(m->routing_stats(), nullptr);
        EXPECT_EQ(m->routing_stats_file(), file);
        const ModelConfig& c = m->config();
        RoutingCounter counter(c.num_layers, c.num_experts);
        KvCache cache = m->new_cache();
        ForwardOptions fo;
        fo.observer = &counter;
        m->forward(ids, cache, fo);
        EXPECT_EQ(counter.positions(), 7);  // the caller still sees every routing
        const RoutingStatsData after_prompt = m->routing_stats()->snapshot();
        EXPECT_EQ(after_prompt.tokens, 7);
        // One call: no decay inside it; a prompt's routings weigh kPromptRoutingWeight.
        Ranking weighed = counter.counts();
        for (auto& layer : weighed) {
            for (double& w : layer) w *= kPromptRoutingWeight;
        }
        EXPECT_EQ(after_prompt.layers, weighed);
        EXPECT_GT(after_prompt.updated, 0);
        const TokenId next = 5;
        m->forward(std::span<const TokenId>(&next, 1), cache);  // no observer of its own
        const RoutingStatsData d = m->routing_stats()->snapshot();
        EXPECT_EQ(d.tokens, 8);
        // The prompt's 7 tokens at kPromptRoutingWeight, decayed by one token, and one decode
        // token at 1.
        const double want = (7.0 * kPromptRoutingWeight + 1.0) * c.experts_per_token;
        for (const auto& layer : d.layers) {
            const double sum = std::accumulate(layer.begin(), layer.end(), 0.0);
            EXPECT_NEAR(sum, want, 1e-3);
            EXPECT_LT(sum, want);
        }
        counted = d.layers;
        EXPECT_FALSE(std::filesystem::exists(file));  // saved at unload
    }
    ASSERT_TRUE(std::filesystem::exists(file));
    EXPECT_EQ(load_routing_stats(file).tokens, 8);
    LogCapture log;
    auto m = Model::load(test::tiny_model_dir(), with_stats(file));
    EXPECT_EQ(m->routing_stats()->snapshot().tokens, 8);  // learning goes on from there
    EXPECT_EQ(m->learned_ranking(), counted);
    bool said = false;
    for (const auto& line : log.lines(spdlog::level::info)) {
        if (line.find("expert statistics: 8 tokens learned, last updated ") != std::string::npos &&
            line.find("learned.json") != std::string::npos)
            said = true;
    }
    EXPECT_TRUE(said);
    EXPECT_TRUE(stats_lines(log, spdlog::level::warn).empty());
    // An explicit --ranking overrides the learned order.
    save_ranking(tmp / "r.json", counted, 1, "explicit");
    LoadOptions o = with_stats(file);
    o.gpu.ranking = tmp / "r.json";
    m.reset();
    m = Model::load(test::tiny_model_dir(), o);
    EXPECT_TRUE(m->learned_ranking().empty());
    // Off: nothing learned, nothing written.
    LoadOptions off;
    off.routing_stats = "off";
    m = Model::load(test::tiny_model_dir(), off);
    EXPECT_EQ(m->routing_stats(), nullptr);
    EXPECT_TRUE(m->routing_stats_file().empty());
    m->save_routing_stats();  // a no-op
}

// Removing the file (the desktop's Reset, or by hand) resets a loaded model's statistics too:
// its next save forgets what it learned instead of writing it back.
TEST(RoutingStats, RemovingTheFileResetsTheLoadedModel) {
    test::TempDir tmp;
    const auto file = tmp / "s.json";
    const std::vector<TokenId> ids = {200006, 17360, 200008, 1, 2};
    {
        auto m = Model::load(test::tiny_model_dir(), with_stats(file));
        KvCache cache = m->new_cache();
        m->forward(ids, cache);
    }
    auto m = Model::load(test::tiny_model_dir(), with_stats(file));
    EXPECT_EQ(m->routing_stats()->snapshot().tokens, 5);
    KvCache cache = m->new_cache();
    m->forward(ids, cache);
    std::filesystem::remove(file);
    m->save_routing_stats();
    EXPECT_FALSE(std::filesystem::exists(file));
    EXPECT_EQ(m->routing_stats()->snapshot().tokens, 0);
    KvCache again = m->new_cache();
    m->forward(std::span<const TokenId>(ids.data(), 2), again);
    m.reset();
    EXPECT_EQ(load_routing_stats(file).tokens, 2);  // only what came after the reset
}

TEST(RoutingStats, AWriteErrorIsOneWarningNotAnError) {
    test::TempDir tmp;
    test::write_file(tmp / "file", "x");
    // The statistics' folder is a file: every save fails.
    auto m = Model::load(test::tiny_model_dir(), with_stats(tmp / "file" / "s.json"));
    KvCache cache = m->new_cache();
    const std::vector<TokenId> ids = {1, 2, 3};
    m->forward(ids, cache);
    LogCapture log;
    m->save_routing_stats();
    m->forward(std::span<const TokenId>(ids.data(), 1), cache);
    m->save_routing_stats();
    m.reset();  // and at unload
    const auto warnings = stats_lines(log, spdlog::level::warn);
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_THAT(warnings[0], HasSubstr("expert statistics not saved"));
}

#ifndef _WIN32
// Issue 44: a FIFO, a folder or a huge file at the statistics path never blocks or stalls the
// load (the file type and size are checked before a byte is read), and saving over them fails
// with one warning naming the reason, never replacing them.
TEST(RoutingStats, FifosFoldersAndHugeFilesAreRefusedWithoutBlocking) {
    namespace fs = std::filesystem;
    test::TempDir tmp;
    const fs::path fifo = tmp / "fifo.json";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    const fs::path folder = tmp / "folder.json";
    fs::create_directory(folder);
    const fs::path huge = tmp / "huge.json";
    {
        std::ofstream f(huge, std::ios::binary);
        f << "{\"layers\": [[";
        f << std::string(5 * 1024 * 1024, ' ');
        f << "1]]}";
    }
    for (const auto& [file, what] : std::vector<std::pair<fs::path, std::string>>{
             {fifo, "FIFO"}, {folder, "folder"}, {huge, "bytes, more than"}}) {
        SCOPED_TRACE(file.string());
        const auto t0 = std::chrono::steady_clock::now();
        std::string why;
        EXPECT_FALSE(read_routing_stats(file, "m", 4, 8, &why).has_value());
        EXPECT_THAT(why, HasSubstr(what));
        EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
    }
    // A model with its statistics at the FIFO loads, runs and saves without hanging.
    {
        LogCapture log;
        auto m = Model::load(test::tiny_model_dir(), with_stats(fifo));
        KvCache cache = m->new_cache();
        const std::vector<TokenId> ids = {1, 2, 3};
        m->forward(ids, cache);
        m->save_routing_stats();
        const auto warnings = stats_lines(log, spdlog::level::warn);
        ASSERT_EQ(warnings.size(), 2u);
        EXPECT_THAT(warnings[0], HasSubstr("expert statistics ignored"));
        EXPECT_THAT(warnings[1], HasSubstr("expert statistics not saved"));
        EXPECT_THAT(warnings[1], HasSubstr("FIFO"));
    }
    EXPECT_TRUE(fs::is_fifo(fs::symlink_status(fifo)));  // never replaced
}
#endif

// The same statistics file gives the same static slots at every load (the CPU side of frozen
// residency): the learned weights -> Ranking -> Residency::initial is deterministic and
// hottest-first.
TEST(RoutingStats, TheSameFileGivesTheSameStaticSlotsAtEveryLoad) {
    test::TempDir tmp;
    const auto file = tmp / "s.json";
    {
        auto m = Model::load(test::tiny_model_dir(), with_stats(file));
        KvCache cache = m->new_cache();
        const std::vector<TokenId> ids = {200006, 17360, 200008, 9, 8, 7, 6, 5, 4, 3};
        m->forward(ids, cache);
    }
    auto slots_of_a_load = [&] {
        auto m = Model::load(test::tiny_model_dir(), with_stats(file));
        const Ranking r = m->learned_ranking();
        EXPECT_FALSE(r.empty());
        const int L = m->config().num_layers, E = m->config().num_experts;
        ResidencyOptions ro;
        ro.static_fraction = 1.0;
        Residency res(L, E, L * 2, ro);
        res.initial(r);
        std::vector<int> table;
        for (int l = 0; l < L; ++l) {
            for (int e = 0; e < E; ++e) table.push_back(res.slot_of(l, e));
        }
        return std::make_pair(table, r);
    };
    const auto [first, ranking] = slots_of_a_load();
    const auto [second, ranking2] = slots_of_a_load();
    EXPECT_EQ(first, second);
    EXPECT_EQ(ranking, ranking2);
    // The hottest (layer, expert) of all holds slot 0.
    const auto order =
        hot_first(&ranking, static_cast<int>(ranking.size()), static_cast<int>(ranking[0].size()));
    const int E = static_cast<int>(ranking[0].size());
    EXPECT_EQ(first[static_cast<std::size_t>(order[0].layer * E + order[0].expert)], 0);
}

}  // namespace
}  // namespace neural
