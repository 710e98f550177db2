// neural bench --model DIR [--workload decode,prompt,replay] [--repeat N] [--ab A.json B.json]
#include <cstdio>

#include <fmt/format.h>

#include "bench/bench.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/engine_options.h"
#include "neural/error.h"
#include "platform/atomic_file.h"

namespace neural::cli {

namespace {
constexpr const char* kHelp = R"(usage: neural bench --model DIR [options]

Runs workloads through the real chat path and prints a table (and JSON with --json FILE).
See docs/BENCHMARKS.md for what every number means.
  --model DIR          checkpoint folder, or a gpt-oss GGUF file
  --workload LIST      comma-separated: decode, prompt, replay (default decode)
  --tokens N           decode: tokens to generate (default 128)
  --temperature T      decode: sampling temperature, seed 0 (default 0: greedy, as llama-bench
                       measures; 1 is the desktop's default, Balanced)
  --prompt-sizes LIST  prompt: rendered prompt sizes in tokens (default 3000,13000)
  --workload-dir DIR   replay: folder of OpenAI chat request bodies (default bench/workloads)
  --max-tokens N       replay: cap the answers below the requests' max_tokens
  --repeat N           runs (with --ab: pairs) (default 1)
  --profile FILE       engine flags as JSON, e.g. {"kernel": "auto", "threads": 8}
  --ab FILE_A FILE_B   two profiles in mirrored order A B B A ..., with per-pair ratios
  --json FILE          also write the report as JSON
  --no-probes          skip the RAM / host-to-device bandwidth probes
  --probe-mb N         RAM probe buffer (default 512 MiB)
  --telemetry 0|1      per-token records (default 1; 0 measures the telemetry overhead)
)";

std::vector<std::string> split(const std::string& text) {
    std::vector<std::string> out;
    std::size_t at = 0;
    while (at <= text.size()) {
        const std::size_t comma = std::min(text.find(',', at), text.size());
        if (comma > at) out.push_back(text.substr(at, comma - at));
        at = comma + 1;
    }
    return out;
}
}  // namespace

int cmd_bench(int argc, char** argv) {
    // --ab takes two values: the first through the flag, the second as the next positional.
    Args args(
        argc, argv,
        {"--model", "--workload", "--tokens", "--temperature", "--prompt-sizes", "--workload-dir",
         "--max-tokens", "--repeat", "--profile", "--ab", "--json", "--probe-mb", "--telemetry"},
        {"--help", "--no-probes"}, true);
    if (args.has("--help")) {
        fmt::print("{}{}", kHelp, engine_flags_help());
        return 0;
    }
    auto dir = args.get("--model");
    if (!dir) fail("--model DIR is required\n{}", kHelp);
    bench::BenchOptions o;
    o.model = *dir;
    o.workloads = split(args.get_or("--workload", "decode"));
    if (o.workloads.empty()) fail("--workload needs at least one of decode, prompt, replay");
    o.decode_tokens = static_cast<int>(args.get_int("--tokens", 128, 1, 1 << 20));
    if (auto t = args.get("--temperature")) {
        o.decode_temperature = static_cast<float>(parse_double(*t, "--temperature"));
        SamplingParams check;
        check.temperature = o.decode_temperature;
        check.validate();
    }
    if (auto sizes = args.get("--prompt-sizes")) {
        o.prompt_sizes.clear();
        for (const auto& s : split(*sizes)) {
            o.prompt_sizes.push_back(static_cast<int>(parse_int(s, "--prompt-sizes")));
            if (o.prompt_sizes.back() < 1) fail("--prompt-sizes: sizes must be at least 1");
        }
    }
    o.workload_dir = args.get_or("--workload-dir", "bench/workloads");
    o.max_tokens = static_cast<int>(args.get_int("--max-tokens", 0, 0, 1 << 20));
    o.repeat = static_cast<int>(args.get_int("--repeat", 1, 1, 10000));
    o.probes = !args.has("--no-probes");
    o.probe_bytes = static_cast<std::size_t>(args.get_int("--probe-mb", 512, 1, 1 << 20)) << 20;
    const bool telemetry_on = args.get_int("--telemetry", 1, 0, 1) == 1;

    const LoadOptions base = engine_load_options(args);
    std::size_t positional_used = 0;
    if (args.has("--ab")) {
        if (args.has("--profile")) fail("give either --profile or --ab, not both");
        if (args.positional().empty()) fail("--ab needs two profile files: --ab A.json B.json");
        o.ab = true;
        o.profiles.push_back(bench::load_profile(*args.get("--ab"), base));
        o.profiles.push_back(bench::load_profile(args.positional()[0], base));
        if (o.profiles[0].name == o.profiles[1].name) {
            o.profiles[0].name += "(A)";
            o.profiles[1].name += "(B)";
        }
        positional_used = 1;
    } else if (auto p = args.get("--profile")) {
        o.profiles.push_back(bench::load_profile(*p, base));
    } else {
        o.profiles.push_back(bench::Profile{"default", bench::Json::object(), base});
    }
    if (args.positional().size() > positional_used) {
        fail("unexpected argument \"{}\"", args.positional()[positional_used]);
    }
    o.telemetry = telemetry_on;
    bench::Json report =
        bench::run_bench(o, [](const std::string& line) { fmt::print(stderr, "{}\n", line); });
    fmt::print("{}", bench::format_report(report));
    if (auto path = args.get("--json")) write_file_atomic(*path, report.dump(2) + "\n");
    return 0;
}

}  // namespace neural::cli
