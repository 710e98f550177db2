// `neural bench`: workloads through the real chat path (ChatSession, so the numbers include
// rendering, sampling and the parser like a served request), measured with the engine's own
// telemetry, plus in-process probes (RAM read bandwidth, pinned host-to-device bandwidth).
//
// Decode rates are weighted: timed tokens / timed seconds over all answers, where an answer of
// n tokens contributes n - 1 timed tokens (the first token belongs to the prompt pass) and its
// first -> last token time. Never a median of per-answer rates.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/model.h"

namespace neural::bench {

using Json = nlohmann::ordered_json;

// A named set of engine flags: {"kernel": "auto", "threads": 8, "store": "...",
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
  // Called once per profile right after its model is loaded (the CLI's --ws-min / --prefetch).
  std::function<void(const Model&)> after_load;
};

// The runs in order: without ab, repeat x profile 0; with ab, pair p runs A B (p even) or B A
// (p odd), so the order is A B B A A B ... Returns {pair, profile index} per run.
std::vector<std::pair<int, int>> run_order(int repeat, bool ab);

// Runs everything and returns the report (schema "neural-bench" version 1, see BENCHMARKS.md).
// `progress` gets one line per run. Throws neural::Error for bad options or workload files.
Json run_bench(const BenchOptions& options,
               const std::function<void(const std::string&)>& progress = {});

// The human-readable table of a report.
std::string format_report(const Json& report);

// The replay workload: the *.json files of `dir` in name order, each an OpenAI chat request body.
std::vector<std::filesystem::path> replay_files(const std::filesystem::path& dir);

}  // namespace neural::bench
