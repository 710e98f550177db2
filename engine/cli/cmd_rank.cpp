// neural rank --model DIR [--out FILE] [--text FILE]... [--decode N] [engine flags]
// neural rank --show [FILE] [--model DIR] [--store FILE] [--top N]
// Seeds the learned expert statistics (runtime/routing_stats.h) from the router's choices over
// warm-up chats, or shows a statistics file.
#include <algorithm>
#include <fstream>
#include <numeric>

#include <fmt/format.h>

#include "chat/render.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/engine_options.h"
#include "model/gguf.h"
#include "model/weights.h"
#include "neural/error.h"
#include "runtime/model.h"
#include "runtime/routing_stats.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "store/ranking.h"

namespace neural::cli {

namespace {
constexpr const char* kHelp = R"(usage: neural rank --model DIR [--out FILE] [options]
       neural rank --show [FILE] [--model DIR] [--store FILE] [--top N]

Runs warm-up chats through the model and counts how often the router picks each expert of each
layer, and writes them as the model's expert statistics: by default the file the engine learns
in (--routing-stats auto: beside the store, else the checkpoint; it replaces what was learned),
so the next load fills the GPU's static slots and orders the RAM warm-up from them. FILE is
also what --ranking takes. Without --text a built-in mix (code, explanation, math, writing,
small talk) is used.
  --model DIR      checkpoint folder, or a gpt-oss GGUF file
  --out FILE       the statistics to write (atomically); default: where --routing-stats points
  --text FILE      warm-up user messages: each blank-line-separated paragraph is one chat
  --decode N       also generate N greedy tokens per chat and count their routing (default 32)
  --show [FILE]    print a statistics (or ranking) file: tokens, date, model identity and the
                   hottest experts per layer; without FILE the one of --model (and --store)
  --top N          with --show: experts per layer to print (default 8)
)";

const char* const kWarmup[] = {
    "Write a Python function that parses a CSV file and returns the average of each numeric "
    "column.",
    "Explain how a CPU cache hierarchy works, with an example of a cache miss.",
    "What is the derivative of x^3 * sin(x)? Show the steps.",
    "Draft a short, friendly email asking a colleague to review my pull request by Friday.",
    "Hi! What are some good books to read on a rainy weekend?",
};
}  // namespace

namespace {

// The identity routing_model_id gives the model at `dir`, without loading the model.
std::string model_id_of(const std::filesystem::path& dir) {
    const Checkpoint ckpt = Checkpoint::open(dir);
    const ModelConfig config =
        is_gguf_path(dir) ? checkpoint_config(ckpt) : ModelConfig::load(dir / "config.json");
    return routing_model_id(ckpt, config);
}

int show(const Args& args, const LoadOptions& lo) {
    const int top = static_cast<int>(args.get_int("--top", 8, 1, 1 << 16));
    const auto dir = args.get("--model");
    std::filesystem::path file;
    if (!args.positional().empty()) {
        file = args.positional().front();
    } else if (dir) {
        file = routing_stats_path(lo.routing_stats == "off" ? "auto" : lo.routing_stats, *dir,
                                  lo.store);
    } else {
        fail("--show needs a FILE or --model DIR\n{}", kHelp);
    }
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) {
        fmt::print("{}: no expert statistics yet (nothing learned)\n", file.string());
        return 0;
    }
    const RoutingStatsData d = load_routing_stats(file);
    fmt::print("file:      {}\n", file.string());
    fmt::print("model:     {}", d.model.empty() ? "unknown (a ranking file)" : d.model);
    if (dir) {
        const std::string id = model_id_of(*dir);
        if (d.model.empty() || d.model == id) {
            fmt::print(" (model {})\n", id);
        } else {
            fmt::print(" (NOT model {}: ignored at its load)\n", id);
        }
    } else {
        fmt::print("\n");
    }
    fmt::print("tokens:    {} learned\n", d.tokens);
    fmt::print("updated:   {}\n", format_utc(d.updated));
    fmt::print("half-life: {} tokens\n", options::format_real(d.half_life));
    if (!d.source.empty()) fmt::print("source:    {}\n", d.source);
    fmt::print("hottest experts per layer (expert:share of the layer's weight):\n");
    for (std::size_t l = 0; l < d.layers.size(); ++l) {
        const std::vector<double>& row = d.layers[l];
        std::vector<int> order(row.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
            return row[static_cast<std::size_t>(a)] > row[static_cast<std::size_t>(b)];
        });
        const double sum = std::accumulate(row.begin(), row.end(), 0.0);
        std::string line;
        for (int i = 0; i < std::min<int>(top, static_cast<int>(order.size())); ++i) {
            const double w = row[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])];
            line += fmt::format(" {}:{:.1f}%", order[static_cast<std::size_t>(i)],
                                sum > 0 ? 100.0 * w / sum : 0.0);
        }
        fmt::print("  layer {:2}:{}\n", l, line);
    }
    return 0;
}

}  // namespace

int cmd_rank(int argc, char** argv) {
    Args args(argc, argv, {"--model", "--out", "--text", "--decode", "--top"}, {"--help", "--show"},
              true);
    if (args.has("--help")) {
        fmt::print("{}{}", kHelp, engine_flags_help());
        return 0;
    }
    LoadOptions lo = engine_load_options(args);
    if (args.has("--show")) return show(args, lo);
    if (!args.positional().empty())
        fail("unexpected argument \"{}\"\n{}", args.positional()[0], kHelp);
    const auto dir = args.get("--model");
    if (!dir) fail("--model DIR is required\n{}", kHelp);
    const std::filesystem::path out = args.get("--out")
                                          ? std::filesystem::path(*args.get("--out"))
                                          : routing_stats_path(lo.routing_stats, *dir, lo.store);
    if (out.empty()) fail("--routing-stats off: give --out FILE for the statistics to write");
    // The warm-up chats are counted here; the model itself neither learns nor reads them.
    lo.routing_stats = "off";
    const int decode = static_cast<int>(args.get_int("--decode", 32, 0, 1 << 16));
    std::vector<std::string> texts;
    if (const auto path = args.get("--text")) {
        std::ifstream in(*path, std::ios::binary);
        if (!in) fail("cannot read --text {}", *path);
        std::string line, para;
        auto flush = [&] {
            if (para.find_first_not_of(" \t\r\n") != std::string::npos) texts.push_back(para);
            para.clear();
        };
        while (std::getline(in, line)) {
            if (line.find_first_not_of(" \t\r") == std::string::npos)
                flush();
            else
                para += (para.empty() ? "" : "\n") + line;
        }
        flush();
        if (texts.empty()) fail("--text {} holds no message", *path);
    }
    if (texts.empty()) texts.assign(std::begin(kWarmup), std::end(kWarmup));

    auto model = Model::load(*dir, lo);
    const ModelConfig& c = model->config();
    RoutingCounter counter(c.num_layers, c.num_experts);
    ForwardOptions fo;
    fo.observer = &counter;
    const std::size_t vocab = model->sampleable_vocab();
    Sampler greedy(SamplingParams{.temperature = 0.0f});
    for (std::size_t i = 0; i < texts.size(); ++i) {
        ChatSession s(*model);
        s.add_user(texts[i]);
        const std::vector<TokenId> prompt =
            chat::render_for_completion(s.conversation()).tokens(model->tokenizer());
        KvCache cache = model->new_cache();
        std::vector<float> logits = model->forward(prompt, cache, fo);
        for (int t = 0; t < decode; ++t) {
            const TokenId next = greedy.sample(logits, vocab);
            logits = model->forward(std::span<const TokenId>(&next, 1), cache, fo);
        }
        fmt::print(stderr, "chat {}/{}: {} prompt + {} decode tokens\n", i + 1, texts.size(),
                   prompt.size(), decode);
    }
    RoutingStatsData d;
    d.model = routing_model_id(model->checkpoint(), c);
    d.layers = counter.counts();
    d.tokens = counter.positions();
    d.updated = unix_now();
    d.source =
        fmt::format("neural rank over {} chats, {} decode tokens each", texts.size(), decode);
    save_routing_stats(out, d);
    fmt::print("wrote {}: {} tokens x {} layers\n", out.string(), counter.positions(),
               c.num_layers);
    return 0;
}

}  // namespace neural::cli
