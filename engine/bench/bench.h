// `neural bench`: workloads through the real chat path (ChatSession, so the numbers include
// rendering, sampling and the parser like a served request), measured with the engine's own
// telemetry, plus in-process probes (RAM read bandwidth, pinned host-to-device bandwidth).
//
// Decode rates are weighted: timed tokens / timed seconds over all answers, where an answer of
// n tokens contributes n - 1 timed tokens (the first token belongs to the prompt pass) and its
// first -> last token time. Never a median of per-answer rates.
#pragma once

#include <atomic>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "neural/error.h"
#include "runtime/model.h"

namespace neural::bench {

using Json = nlohmann::ordered_json;

// A named set of engine settings, keyed as the settings schema (runtime/options.h) names them:
// {"kernel": "auto", "threads": 8, "store": "...",
// "kernel_persistent": true, "kdll": "..."}; missing keys keep the command line's values.
struct Profile {
    std::string name;  // file stem, or "default"
    Json flags = Json::object();
    LoadOptions load;
};

// Reads a profile file over `base`. Throws neural::Error for unreadable files, invalid JSON,
// unknown keys and wrong types.
Profile load_profile(const std::filesystem::path& path, const LoadOptions& base);
// Applies profile flags (a JSON object) to `base`; `what` names the source in errors.
LoadOptions apply_profile_flags(const Json& flags, const LoadOptions& base,
                                const std::string& what);

struct BenchOptions {
    std::filesystem::path model;
    std::vector<std::string> workloads = {"decode"};  // decode, prompt, replay
    int decode_tokens = 128;
    float decode_temperature = 0;  // 0: greedy; else sampled at it (top-p 1, seed 0)
    std::string decode_prompt =
        "Write a detailed, step-by-step explanation of how a CPU cache hierarchy works.";
    std::vector<int> prompt_sizes = {3000, 13000};  // tokens of the rendered prompt
    std::filesystem::path workload_dir = "bench/workloads";
    int max_tokens = 0;  // > 0: caps replay answers below the requests' max_tokens
    int repeat = 1;
    std::vector<Profile> profiles;  // one (plain run) or two (--ab A B); empty = engine defaults
    bool ab = false;
    // false: no per-token records (TurnStats only), to measure what telemetry costs.
    bool telemetry = true;
    bool probes = true;
    std::size_t probe_bytes = std::size_t{512} << 20;
    // Called once per model load right after it (the CLI's --ws-min / --prefetch).
    std::function<void(const Model&)> after_load;
    // Cancel: polled before each run, before each workload and each answer, and on every
    // streamed token (a true then stops the answer in flight through ChatSession::cancel; a
    // prompt pass in progress finishes first). When it returns true, run_bench releases its models
    // and throws bench::Cancelled (a neural::Cancelled, so a neural::Error). Called on the thread
    // that runs run_bench.
    std::function<bool()> cancel;
    // Optional flag the forward pass itself watches (TurnOptions::cancel), so a cancel during a
    // long prompt pass stops it promptly instead of after it; set it together with `cancel`.
    const std::atomic<bool>* cancel_flag = nullptr;
    // Fine progress for a progress bar: (fraction done 0..1, what is running), called after every
    // model load and every answer on run_bench's thread; the fraction counts answers (a prompt size
    // or a replay file is one answer) of all runs, so it reaches 1 after the last one.
    std::function<void(double, const std::string&)> on_progress;
    // Keep at most one model loaded: the other profile's model is released before the next one
    // loads (so an A/B pair reloads whenever the profile changes). Always on when a profile's
    // backend is not "cpu", so two GPU models (core + slot pool each) never hold VRAM together;
    // see one_model_at_a_time(). The desktop app sets it to keep RAM for one model too.
    bool one_model_at_a_time = false;
};

// Thrown by run_bench when BenchOptions::cancel returned true.
class Cancelled : public neural::Cancelled {
public:
    Cancelled() = default;
};

// Whether run_bench releases one profile's model before loading the other: the option, or any
// profile with a backend other than "cpu" ("cuda", "auto").
bool one_model_at_a_time(const BenchOptions& options);

// The runs in order: without ab, repeat x profile 0; with ab, pair p runs A B (p even) or B A
// (p odd), so the order is A B B A A B ... Returns {pair, profile index} per run.
std::vector<std::pair<int, int>> run_order(int repeat, bool ab);

// Runs everything and returns the report (schema "neural-bench" version 1, see BENCHMARKS.md).
// `progress` gets one line per run. Throws neural::Error for bad options or workload files, and
// bench::Cancelled when options.cancel asked for it (no report then; every model released).
Json run_bench(const BenchOptions& options,
               const std::function<void(const std::string&)>& progress = {});

// Median, quartiles (linear interpolation), min and max of per-pair ratios: {"n", "median",
// "q1", "q3", "min", "max"}; {"n": 0} for none.
Json ratio_stats(std::vector<double> values);
// Per workload and ratio key of report["pairs"]: ratio_stats over the pairs whose ratio is a
// number (the report's "ratio_summary").
Json ratio_summary(const Json& pairs);

// Bounds of a decode workload's time per token (null without GPU times, decode tokens or a
// RAM probe of ram_gb_s): cpu_ms = the CPU-miss bytes per token read at the probe's bandwidth;
// gpu_ms = the GPU's own time (dense + resident experts + tail); overlap_ms = max(cpu, gpu),
// the bound reachable only if the CPU's and the GPU's work overlapped completely;
// chain_ms = dense + tail + the experts of layers that left the CPU idle + max(cpu, the other
// layers' experts), a lower bound of any schedule in which a layer's misses start after its
// router and the next layer starts after them; wall_over_overlap, wall_over_chain.
Json decode_bounds(const Json& decode_workload, double ram_gb_s);

// The human-readable table of a report.
std::string format_report(const Json& report);

// The replay workload: the *.json files of `dir` in name order, each an OpenAI chat request body.
std::vector<std::filesystem::path> replay_files(const std::filesystem::path& dir);

}  // namespace neural::bench
