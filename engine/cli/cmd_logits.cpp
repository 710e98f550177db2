// neural logits MODEL_DIR PROMPTS.json OUT.json [--steps N] [--backend cpu|cuda] [--threads N]
//               [--store FILE]
// Writes exactly the schema of shared/fixtures/tiny-gptoss-a/golden.json so the engine can be
// compared with independent references (docs/MODEL.md "What the tests check",
// docs/VERIFICATION.md).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cpu/parallel.h"
#include "neural/error.h"
#include "platform/atomic_file.h"
#include "runtime/model.h"
#include "runtime/sampler.h"
#include "neural/version.h"

namespace neural::cli {

namespace {

constexpr const char* kHelp =
    R"(usage: neural logits MODEL_DIR PROMPTS.json OUT.json [--steps N] [--backend cpu|cuda] [--threads N]
                     [--store FILE]

MODEL_DIR is a checkpoint folder or a gpt-oss GGUF file. PROMPTS.json is an object
{name: [token ids]}. For every prompt and position OUT.json holds the
argmax, the top-8 ids and logits, the logsumexp, the logits at the fixed probe ids, the router's
top-k experts and weights per layer, and with --steps N a greedy continuation of N tokens.
  --steps N       greedy continuation length (default 0)
)";

// The probe ids of golden.json: ordinary tokens, the specials and the last lm_head row.
const std::int32_t kProbeIds[] = {0,      1,      13,     220,    1000,   12345,  50000,
                                  100000, 150000, 199997, 199998, 199999, 200002, 200005,
                                  200006, 200007, 200008, 200012, 200018, 201087};

struct RouterLog : RouterObserver {
    // [layer][position] -> experts / weights
    std::vector<std::vector<std::vector<int>>> experts;
    std::vector<std::vector<std::vector<float>>> weights;
    std::int64_t base = 0;
    explicit RouterLog(int layers)
        : experts(static_cast<size_t>(layers)), weights(static_cast<size_t>(layers)) {}
    void on_route(int layer, std::int64_t pos, std::span<const int> e,
                  std::span<const float> w) override {
        auto& el = experts[static_cast<size_t>(layer)];
        auto& wl = weights[static_cast<size_t>(layer)];
        const auto i = static_cast<size_t>(pos - base);
        if (el.size() <= i) {
            el.resize(i + 1);
            wl.resize(i + 1);
        }
        el[i].assign(e.begin(), e.end());
        wl[i].assign(w.begin(), w.end());
    }
};

nlohmann::json position_record(std::span<const float> logits,
                               std::span<const std::int32_t> probes) {
    const auto V = static_cast<std::int64_t>(logits.size());
    std::vector<std::int32_t> idx(static_cast<size_t>(V));
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + 8, idx.end(), [&](std::int32_t a, std::int32_t b) {
        return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
               (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
    });
    double m = logits[static_cast<size_t>(idx[0])], s = 0.0;
    for (float v : logits) s += std::exp(static_cast<double>(v) - m);
    nlohmann::json r;
    r["argmax"] = idx[0];
    r["top8_ids"] = std::vector<std::int32_t>(idx.begin(), idx.begin() + 8);
    std::vector<double> top;
    for (int i = 0; i < 8; ++i)
        top.push_back(logits[static_cast<size_t>(idx[static_cast<size_t>(i)])]);
    r["top8_logits"] = top;
    r["logsumexp"] = m + std::log(s);
    std::vector<double> pl;
    for (auto p : probes)
        pl.push_back(p < V ? static_cast<double>(logits[static_cast<size_t>(p)]) : NAN);
    r["probe_logits"] = pl;
    return r;
}

}  // namespace

int cmd_logits(int argc, char** argv) {
    Args args(argc, argv, {"--steps"}, {"--help"}, true);
    if (args.has("--help")) {
        fmt::print("{}{}", kHelp, engine_flags_help());
        return 0;
    }
    if (args.positional().size() != 3) fail("expected MODEL_DIR PROMPTS.json OUT.json\n{}", kHelp);
    const int steps = static_cast<int>(args.get_int("--steps", 0, 0, 1 << 20));

    const auto& pos = args.positional();
    std::ifstream in(pos[1], std::ios::binary);
    if (!in) fail("cannot read prompts file {}", pos[1]);
    std::ostringstream ss;
    ss << in.rdbuf();
    nlohmann::ordered_json prompts;
    try {
        prompts = nlohmann::ordered_json::parse(ss.str());
    } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
        fail("{}: invalid JSON: {}", pos[1], e.what());
    }
    if (!prompts.is_object()) fail("{}: expected an object {{name: [token ids]}}", pos[1]);

    // Probes, not use: nothing is learned unless --routing-stats names where.
    LoadOptions base;
    base.routing_stats = "off";
    auto model = Model::load(pos[0], engine_load_options(args, base));
    const ModelConfig& c = model->config();
    std::vector<std::int32_t> probes(std::begin(kProbeIds), std::end(kProbeIds));

    nlohmann::ordered_json out;
    out["source"] = fmt::format("neural {} {}", NEURAL_VERSION, model->describe_backend());
    out["probe_ids"] = probes;
    out["prompts"] = nlohmann::ordered_json::object();
    for (auto it = prompts.begin(); it != prompts.end(); ++it) {
        std::vector<TokenId> ids;
        if (!it.value().is_array() || it.value().empty()) {
            fail("{}: prompt \"{}\" must be a non-empty array of token ids", pos[1], it.key());
        }
        for (const auto& v : it.value()) {
            if (!v.is_number_integer())
                fail("{}: prompt \"{}\" holds a non-integer id", pos[1], it.key());
            // Read wide, then range-check: a narrowing get<int32_t> would wrap 2^32 + 5 to 5.
            const auto wide = v.is_number_unsigned()
                                  ? (v.get<std::uint64_t>() > INT64_MAX
                                         ? INT64_MAX
                                         : static_cast<std::int64_t>(v.get<std::uint64_t>()))
                                  : v.get<std::int64_t>();
            if (wide < 0 || wide >= c.vocab_size) {
                fail("{}: prompt \"{}\": token id {} is outside the model's vocabulary (0..{})",
                     pos[1], it.key(), v.dump(), c.vocab_size - 1);
            }
            ids.push_back(static_cast<TokenId>(wide));
        }
        KvCache cache = model->new_cache();
        RouterLog router(c.num_layers);
        ForwardOptions fo;
        fo.all_logits = true;
        fo.observer = &router;
        std::vector<float> logits = model->forward(ids, cache, fo);

        nlohmann::ordered_json rec;
        rec["ids"] = ids;
        std::vector<nlohmann::json> per_pos;
        const auto V = static_cast<size_t>(c.vocab_size);
        for (size_t t = 0; t < ids.size(); ++t) {
            per_pos.push_back(
                position_record(std::span<const float>(logits.data() + t * V, V), probes));
        }
        for (const char* key : {"argmax", "top8_ids", "top8_logits", "logsumexp", "probe_logits"}) {
            nlohmann::json col = nlohmann::json::array();
            for (const auto& p : per_pos) col.push_back(p[key]);
            rec[key] = col;
        }
        nlohmann::json layers = nlohmann::json::array();
        for (int l = 0; l < c.num_layers; ++l) {
            layers.push_back({{"experts", router.experts[static_cast<size_t>(l)]},
                              {"weights", router.weights[static_cast<size_t>(l)]}});
        }
        rec["router"] = layers;
        if (steps > 0) {
            // Greedy over the full lm_head, like the reference (no vocabulary mask here).
            std::vector<TokenId> greedy;
            std::vector<double> margins;
            std::vector<float> last(logits.end() - static_cast<std::ptrdiff_t>(V), logits.end());
            fo = ForwardOptions{};
            for (int s = 0; s < steps; ++s) {
                const TokenId next = argmax(last);
                float second = -INFINITY;
                for (size_t i = 0; i < V; ++i) {
                    if (static_cast<TokenId>(i) != next) second = std::max(second, last[i]);
                }
                greedy.push_back(next);
                margins.push_back(static_cast<double>(last[static_cast<size_t>(next)]) - second);
                if (s + 1 < steps)
                    last = model->forward(std::span<const TokenId>(&next, 1), cache, fo);
            }
            rec["greedy"] = greedy;
            rec["greedy_margins"] = margins;
        }
        out["prompts"][it.key()] = rec;
    }
    // Temp file, fsync, rename: a killed run or a full disk leaves the previous OUT.json (or
    // none), never a truncated one (write_file_atomic throws neural::Error naming the file).
    write_file_atomic(pos[2], out.dump());
    return 0;
}

}  // namespace neural::cli
