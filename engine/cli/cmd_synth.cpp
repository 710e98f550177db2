// neural synth --shape NAME OUT_DIR [--seed N] [--router-skew S] [--tokenizer FILE] [--threads N]
//              [--force] [--dry-run]
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "neural/error.h"
#include "platform/output_file.h"
#include "synth/synth.h"

namespace neural::cli {

namespace {
constexpr const char* kHelp =
    R"(usage: neural synth --shape tiny|gpt-oss-20b|gpt-oss-120b OUT_DIR [options]

Writes a gpt-oss checkpoint with random weights in the real Hugging Face layout: config.json,
generation_config.json, BF16 dense tensors and MXFP4 experts under the Hub's tensor names
(model.safetensors for tiny; 4.8 GB shards + model.safetensors.index.json for 20b/120b) and the
tokenizer files. For tests and speed measurements: the text such a model writes is nonsense.
  --shape NAME        tiny (hidden 32, 4 layers, 8 experts), gpt-oss-20b (13.8 GB) or
                      gpt-oss-120b (65.2 GB)
  --seed N            weight seed (default 0); the same seed gives the same bytes
  --router-skew S     expert popularity Zipf-like with exponent ~S (default 0 = uniform)
  --tokenizer FILE    tokenizer.json to copy, with tokenizer_config.json beside it
                      (default: $NEURAL_TOKENIZER)
  --threads N         generator threads (default: all cores); the output does not depend on it
  --force             replace OUT_DIR even if it is not empty
  --dry-run           print the files and sizes, write nothing
)";

std::string gb(std::uint64_t n) { return fmt::format("{:.2f} GB", n / 1e9); }

void print_plan(const synth::Plan& plan) {
    const auto& s = plan.options.shape;
    fmt::print(
        "shape {}: hidden {}, intermediate {}, {} layers, {} experts (top {}), {} heads / "
        "{} kv heads x {}, vocab {}\n",
        s.name, s.hidden_size, s.intermediate_size, s.num_layers, s.num_experts,
        s.experts_per_token, s.num_heads, s.num_kv_heads, s.head_dim, s.vocab_size);
    fmt::print("{} tensors, {} bytes of tensor data ({}), {} bytes in all files\n",
               plan.tensors.size(), plan.tensor_bytes, gb(plan.tensor_bytes), plan.file_bytes);
    for (const auto& shard : plan.shards) {
        fmt::print("  {}  {:>14} bytes  {} tensors\n", shard.file_name, shard.file_bytes(),
                   shard.tensors.size());
    }
    if (plan.indexed) fmt::print("  model.safetensors.index.json\n");
    fmt::print("  config.json\n  generation_config.json\n");
    fmt::print("  tokenizer.json (+ tokenizer_config.json, chat_template.jinja if present)\n");
}
}  // namespace

int cmd_synth(int argc, char** argv) {
    Args args(argc, argv, {"--shape", "--seed", "--router-skew", "--tokenizer", "--threads"},
              {"--help", "--force", "--dry-run"});
    if (args.has("--help")) {
        fmt::print("{}", kHelp);
        return 0;
    }
    auto shape = args.get("--shape");
    if (!shape) fail("--shape NAME is required\n{}", kHelp);
    if (args.positional().size() != 1) fail("expected exactly one OUT_DIR argument\n{}", kHelp);

    synth::Options opt;
    opt.shape = synth::shape_named(*shape);
    opt.seed = static_cast<std::uint64_t>(args.get_int("--seed", 0, 0, INT64_MAX));
    opt.router_skew = args.get_double("--router-skew", 0.0);
    const synth::Plan plan = synth::make_plan(opt);
    if (args.has("--dry-run")) {
        print_plan(plan);
        return 0;
    }

    synth::WriteOptions wopt;
    wopt.threads = static_cast<int>(args.get_int("--threads", 0, 0, 256));
    wopt.force = args.has("--force");
    if (auto tok = args.get("--tokenizer")) {
        wopt.tokenizer = *tok;
    } else if (const char* env = std::getenv("NEURAL_TOKENIZER"); env != nullptr && *env != 0) {
        wopt.tokenizer = env;
    } else {
        fail(
            "a tokenizer is required: pass --tokenizer FILE (a tokenizer.json, e.g. from the "
            "Hub repo) or set NEURAL_TOKENIZER to one");
    }
    // A terminal gets one line rewritten in place; a log gets a line per report.
    const bool tty = stderr_is_terminal();
    bool progress_shown = false;
    wopt.on_progress = [&](const synth::Progress& p) {
        const double rate = p.seconds > 0 ? p.bytes_done / p.seconds : 0.0;
        const double eta = rate > 0 ? (p.bytes_total - p.bytes_done) / rate : 0.0;
        const std::string line =
            fmt::format("synth: {} / {} ({:.0f}%), {:.0f} MB/s, ETA {:.0f} s", gb(p.bytes_done),
                        gb(p.bytes_total), 100.0 * p.bytes_done / p.bytes_total, rate / 1e6, eta);
        if (tty) {
            fmt::print(stderr, "\r{:<72}", line);
        } else {
            fmt::print(stderr, "{}\n", line);
        }
        std::fflush(stderr);
        progress_shown = true;
    };

    const synth::WriteResult r = synth::write_checkpoint(plan, args.positional()[0], wopt);
    if (progress_shown && tty) fmt::print(stderr, "\n");
    fmt::print(
        "wrote {} (seed {}, router skew {}) to {}: {} in {} shard file(s), {:.1f} s, "
        "{:.2f} GB/s\n",
        opt.shape.name, opt.seed, opt.router_skew, r.dir.string(), gb(r.bytes), plan.shards.size(),
        r.seconds, r.seconds > 0 ? r.bytes / r.seconds / 1e9 : 0.0);
    return 0;
}

}  // namespace neural::cli
