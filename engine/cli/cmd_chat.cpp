// neural chat --model DIR [--reasoning low|medium|high] [--system TEXT] [--once QUESTION]
// An interactive harmony chat in the terminal (the desktop app's engine, without the window).
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/engine_options.h"
#include "cpu/parallel.h"
#include "neural/error.h"
#include "runtime/model.h"
#include "runtime/session.h"
#include "synth/synth.h"

#ifdef _WIN32
#include <io.h>
#define NEURAL_ISATTY _isatty
#define NEURAL_FILENO _fileno
#else
#include <unistd.h>
#define NEURAL_ISATTY isatty
#define NEURAL_FILENO fileno
#endif

namespace neural::cli {

namespace {

constexpr const char* kHelp = R"(usage: neural chat --model DIR [options]

Chats with a gpt-oss model in the harmony format. Without --once it is an interactive REPL:
type a message and press Enter; Ctrl+C stops a reply that is being generated.
  --model DIR              checkpoint folder, or a gpt-oss GGUF file
  --reasoning LEVEL        low, medium (default) or high
  --system TEXT            instructions for the assistant (the developer message)
  --once QUESTION          answer one question, print the answer, exit (for scripts)
  --show-reasoning         print the reasoning too (always shown, dimmed, in the REPL on a TTY)
  --max-tokens N           reply limit (default 2048)
  --temperature T          default 1.0 (0 = greedy); also --top-p, --top-k, --min-p, --seed

REPL commands: /reset  /save FILE  /load FILE  /effort low|medium|high  /system TEXT  /help  /quit
)";

ChatSession* g_session = nullptr;
volatile std::sig_atomic_t g_generating = 0;

extern "C" void on_sigint(int) {
    if (g_generating && g_session != nullptr) {
        g_session->cancel();  // only sets an atomic flag: async-signal-safe
    } else {
        std::_Exit(130);
    }
}

bool is_demo_model(const std::filesystem::path& dir) {
    std::error_code ec;
    return std::filesystem::exists(dir / synth::kSynthMarkerFile, ec);
}

}  // namespace

int cmd_chat(int argc, char** argv) {
    Args args(argc, argv,
              {"--model", "--reasoning", "--system", "--once", "--max-tokens", "--temperature",
               "--top-k", "--top-p", "--min-p", "--seed"},
              {"--help", "--show-reasoning"}, true);
    if (args.has("--help")) {
        fmt::print("{}{}", kHelp, engine_flags_help());
        return 0;
    }
    if (!args.positional().empty()) fail("unexpected argument \"{}\"", args.positional()[0]);
    auto dir = args.get("--model");
    if (!dir) fail("--model DIR is required\n{}", kHelp);
    TurnOptions turn;
    turn.max_tokens = static_cast<int>(args.get_int("--max-tokens", 2048, 1, 1 << 24));
    turn.sampling = sampling_params(args);
    const auto effort = chat::reasoning_effort_from_name(args.get_or("--reasoning", "medium"));

    auto model = Model::load(*dir, engine_load_options(args));
    ChatSession session(*model);
    session.set_reasoning(effort);
    if (auto sys = args.get("--system")) session.set_instructions(*sys);
    const bool tty = NEURAL_ISATTY(NEURAL_FILENO(stdout)) != 0;
    const bool demo = is_demo_model(*dir);

    // Streams one reply: reasoning dimmed (or hidden), the answer as it arrives.
    auto reply = [&](bool show_reasoning) {
        bool in_reasoning = false;
        auto on_event = [&](const chat::ParserEvent& e) {
            if (e.type == chat::EventType::reasoning && show_reasoning) {
                if (!in_reasoning) fmt::print("{}", tty ? "\x1b[2m" : "[reasoning] ");
                in_reasoning = true;
                fmt::print("{}", e.text);
            } else if (e.type == chat::EventType::content || e.type == chat::EventType::preamble) {
                if (in_reasoning) fmt::print("{}\n", tty ? "\x1b[0m" : "");
                in_reasoning = false;
                fmt::print("{}", e.text);
            } else if (e.type == chat::EventType::tool_call_start) {
                fmt::print("\n[tool call: {}] ", e.recipient);
            } else if (e.type == chat::EventType::tool_call_arguments) {
                fmt::print("{}", e.text);
            }
            std::fflush(stdout);
        };
        g_generating = 1;
        TurnResult r = session.respond(turn, on_event);
        g_generating = 0;
        if (in_reasoning && tty) fmt::print("\x1b[0m");
        fmt::print("\n");
        return r;
    };

    if (auto q = args.get("--once")) {
        session.add_user(*q);
        TurnResult r = reply(args.has("--show-reasoning"));
        return r.finish == chat::FinishReason::length && !r.cancelled && r.content.empty() ? 4 : 0;
    }

    g_session = &session;
    std::signal(SIGINT, on_sigint);
    fmt::print("Neural chat — {} ({} layers, {} experts). /help for commands, /quit to leave.\n",
               *dir, model->config().num_layers, model->config().num_experts);
    if (demo) {
        fmt::print(
            "Note: this is the built-in demo model. Its weights are random, so its replies "
            "are nonsense; point --model at a real gpt-oss checkpoint for real answers.\n");
    }
    std::string line;
    while (true) {
        fmt::print("{}", tty ? "\x1b[1m> \x1b[0m" : "> ");
        std::fflush(stdout);
        if (!std::getline(std::cin, line)) break;
        if (line.empty()) continue;
        try {
            if (line == "/quit" || line == "/exit") break;
            if (line == "/help") {
                fmt::print("{}", kHelp);
            } else if (line == "/reset") {
                session.reset();
                fmt::print("(conversation cleared)\n");
            } else if (line.rfind("/save ", 0) == 0) {
                session.save(line.substr(6), true);
                fmt::print("(saved to {})\n", line.substr(6));
            } else if (line.rfind("/load ", 0) == 0) {
                session.load(line.substr(6));
                fmt::print("(loaded {} messages)\n", session.history().size());
            } else if (line.rfind("/effort ", 0) == 0) {
                session.set_reasoning(chat::reasoning_effort_from_name(line.substr(8)));
                fmt::print("(reasoning effort {})\n", line.substr(8));
            } else if (line.rfind("/system ", 0) == 0) {
                session.set_instructions(line.substr(8));
                fmt::print("(instructions set)\n");
            } else if (line[0] == '/') {
                fmt::print("unknown command {} (/help lists them)\n", line);
            } else {
                session.add_user(line);
                TurnResult r = reply(true);
                fmt::print(
                    "{}[{} tokens, {:.1f} tok/s, first token {:.2f} s, {} of {} prompt tokens "
                    "cached{}]{}\n",
                    tty ? "\x1b[2m" : "", r.stats.generated_tokens,
                    r.stats.decode_seconds > 0
                        ? (r.stats.generated_tokens - 1) / r.stats.decode_seconds
                        : 0.0,
                    r.stats.first_token_seconds, r.stats.cached_tokens, r.stats.prompt_tokens,
                    r.cancelled ? ", stopped" : "", tty ? "\x1b[0m" : "");
            }
        } catch (const Error& e) {
            fmt::print(stderr, "error: {}\n", e.what());
        }
    }
    g_session = nullptr;
    return 0;
}

}  // namespace neural::cli
