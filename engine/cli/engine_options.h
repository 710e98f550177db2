// The engine settings of every command that loads a model (chat, generate, logits, bench, rank):
// the settings schema's flags (runtime/options.h: --store, --kernel, --threads, --backend, the
// CUDA backend's knobs, the memory hints and the RAM residency levers), and the sampling flags
// of chat and generate.
#pragma once

#include <string>

#include "cli/args.h"
#include "runtime/model.h"
#include "runtime/sampler.h"

namespace neural::cli {

// Help lines for the engine flags, indented to match the commands' help texts.
std::string engine_flags_help();

// The sampling flags shared by chat and generate: --temperature (default 1.0), --top-k, --top-p,
// --min-p, --seed. Validated (out-of-range values are errors naming the flag).
SamplingParams sampling_params(const Args& args);

// LoadOptions from the engine flags (Args built with engine_settings), through the schema's
// options::apply: with a store the fused kernels are the default (--kernel auto); a setting that
// does not act on the backend is an error naming the flag. Model::load applies everything,
// the thread count and the memory hints included.
LoadOptions engine_load_options(const Args& args);
// The same over `base` (a command whose defaults differ: `neural logits` learns no expert
// statistics unless --routing-stats is given).
LoadOptions engine_load_options(const Args& args, const LoadOptions& base);

}  // namespace neural::cli
