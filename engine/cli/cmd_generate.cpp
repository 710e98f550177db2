// neural generate --model DIR (--prompt TEXT | --ids 1,2,3) [--max-tokens N] [sampling flags]
#include <cstdio>

#include <fmt/format.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cpu/parallel.h"
#include "neural/error.h"
#include "runtime/generate.h"
#include "runtime/model.h"
#include "chat/utf8_stream.h"

namespace neural::cli {

namespace {
constexpr const char* kHelp =
    R"(usage: neural generate --model DIR (--prompt TEXT | --ids ID,ID,...) [options]

Continues a raw prompt (no chat template) and streams the decoded text to stdout.
  --model DIR         checkpoint folder (config.json, tokenizer.json, *.safetensors), or a
                      gpt-oss GGUF file
  --prompt TEXT       prompt text (special-token text is plain text unless --special)
  --ids LIST          prompt as comma-separated token ids
  --special           let --prompt contain special tokens such as <|start|>
  --max-tokens N      tokens to generate (default 128)
  --temperature T     0 = greedy (default 1.0)
  --top-k K           keep the K most likely tokens (0 = off)
  --top-p P           nucleus sampling (1 = off)
  --min-p P           drop tokens below P x the top probability (0 = off)
  --seed S            random seed (default 0); the same seed gives the same tokens
  --ignore-eos        do not stop on the model's end tokens
  --show-ids          print the generated ids to stderr at the end
)";
}

int cmd_generate(int argc, char** argv) {
    Args args(argc, argv,
              {"--model", "--prompt", "--ids", "--max-tokens", "--temperature", "--top-k",
               "--top-p", "--min-p", "--seed"},
              {"--help", "--special", "--ignore-eos", "--show-ids"}, true);
    if (args.has("--help")) {
        fmt::print("{}{}", kHelp, engine_flags_help());
        return 0;
    }
    if (!args.positional().empty()) fail("unexpected argument \"{}\"", args.positional()[0]);
    auto dir = args.get("--model");
    if (!dir) fail("--model DIR is required\n{}", kHelp);
    if (args.has("--prompt") == args.has("--ids")) fail("give exactly one of --prompt and --ids");

    GenerateOptions opt;
    opt.max_tokens = static_cast<int>(args.get_int("--max-tokens", 128, 0, 1 << 24));
    opt.sampling = sampling_params(args);

    auto model = Model::load(*dir, engine_load_options(args));
    const Tokenizer& tok = model->tokenizer();
    std::vector<TokenId> prompt = args.has("--ids")
                                      ? parse_id_list(*args.get("--ids"))
                                      : tok.encode(*args.get("--prompt"), args.has("--special"));
    if (prompt.empty()) fail("the prompt is empty");
    for (TokenId id : prompt) {
        if (!tok.is_valid(id)) fail("token id {} is not in the tokenizer's vocabulary", id);
    }
    if (!args.has("--ignore-eos")) opt.stop_tokens = model->stop_tokens();

    KvCache cache = model->new_cache();
    chat::Utf8Stream stream;
    auto result = generate(*model, cache, prompt, opt, [&](TokenId id) {
        std::string text = stream.push(tok.token_bytes(id));
        std::fwrite(text.data(), 1, text.size(), stdout);
        std::fflush(stdout);
        return true;
    });
    std::string tail = stream.flush();
    std::fwrite(tail.data(), 1, tail.size(), stdout);
    std::fputc('\n', stdout);
    if (args.has("--show-ids")) {
        fmt::print(stderr, "ids: {}\nfinish: {}\n", fmt::join(result.tokens, ","),
                   finish_reason_name(result.finish));
    }
    return 0;
}

}  // namespace neural::cli
