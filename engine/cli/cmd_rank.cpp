// neural rank --model DIR --out FILE [--text FILE]... [--decode N] [engine flags]
// Writes an expert ranking (runtime/ranking.h): the router's choices over warm-up chats.
#include <fstream>

#include <fmt/format.h>

#include "chat/render.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/engine_options.h"
#include "neural/error.h"
#include "runtime/model.h"
#include "runtime/ranking.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace neural::cli {

namespace {
constexpr const char* kHelp = R"(usage: neural rank --model DIR --out FILE [options]

Runs warm-up chats through the model and counts how often the router picks each expert of each
layer; FILE ({"layers": [[count per expert], ...]}) is what --ranking takes: the GPU backend's
static slots hold the hottest experts. Without --text a built-in mix (code, explanation, math,
writing, small talk) is used.
  --model DIR      checkpoint folder, or a gpt-oss GGUF file
  --out FILE       the ranking to write (atomically)
  --text FILE      warm-up user messages: each blank-line-separated paragraph is one chat
  --decode N       also generate N greedy tokens per chat and count their routing (default 32)
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

int cmd_rank(int argc, char** argv) {
    Args args(argc, argv, {"--model", "--out", "--text", "--decode"}, {"--help"}, true);
    if (args.has("--help")) {
        fmt::print("{}{}", kHelp, engine_flags_help());
        return 0;
    }
    const auto dir = args.get("--model");
    const auto out = args.get("--out");
    if (!dir || !out) fail("--model DIR and --out FILE are required\n{}", kHelp);
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

    auto model = Model::load(*dir, engine_load_options(args));
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
    save_ranking(
        *out, counter.counts(), counter.positions(),
        fmt::format("neural rank over {} chats, {} decode tokens each", texts.size(), decode));
    fmt::print("wrote {}: {} tokens x {} layers\n", *out, counter.positions(), c.num_layers);
    return 0;
}

}  // namespace neural::cli
