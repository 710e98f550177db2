// `neural`: the command-line front end of the engine.
#include <cstdio>
#include <cstring>
#include <exception>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/commands.h"
#include "neural/error.h"
#include "neural/version.h"

namespace {

using neural::cli::Command;

const Command kCommands[] = {
    {"bench", neural::cli::cmd_bench, "measure decode, prompt and replay speed (BENCHMARKS.md)"},
    {"chat", neural::cli::cmd_chat, "chat with a model in the terminal (harmony format)"},
    {"fit", neural::cli::cmd_fit, "plan the engine flags for this PC (VRAM, RAM, cores)"},
    {"generate", neural::cli::cmd_generate, "generate text from a prompt (streams to stdout)"},
    {"logits", neural::cli::cmd_logits, "write reference logits/router data for token prompts"},
    {"rank", neural::cli::cmd_rank, "count expert routing over warm-up chats (--ranking FILE)"},
    {"repack", neural::cli::cmd_repack, "repack a checkpoint's experts into an expert store"},
    {"synth", neural::cli::cmd_synth, "write a random-weight checkpoint (tests, speed runs)"},
    {"tokenize", neural::cli::cmd_tokenize, "encode text to token ids, or decode ids"},
    {"verify-store", neural::cli::cmd_verify_store,
     "check an expert store (and against its checkpoint)"},
};

void usage(std::FILE* out) {
    fmt::print(out, "usage: neural COMMAND [options]   (neural COMMAND --help for details)\n\n");
    fmt::print(out, "commands:\n");
    for (const auto& c : kCommands) fmt::print(out, "  {:<13} {}\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
    spdlog::set_default_logger(spdlog::stderr_color_mt("neural"));
    spdlog::set_level(spdlog::level::warn);
    if (const char* lvl = std::getenv("NEURAL_LOG"))
        spdlog::set_level(spdlog::level::from_str(lvl));
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
        !std::strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!std::strcmp(argv[1], "--version")) {
        fmt::print("neural {}\n", NEURAL_VERSION);
        return 0;
    }
    for (const auto& c : kCommands) {
        if (!std::strcmp(argv[1], c.name)) {
            try {
                return c.run(argc - 2, argv + 2);
            } catch (const neural::Error& e) {
                fmt::print(stderr, "neural {}: error: {}\n", c.name, e.what());
                return 1;
            } catch (const std::exception& e) {
                fmt::print(stderr, "neural {}: internal error: {}\n", c.name, e.what());
                return 3;
            }
        }
    }
    fmt::print(stderr, "neural: unknown command \"{}\"\n\n", argv[1]);
    usage(stderr);
    return 2;
}
