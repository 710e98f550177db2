// The engine flags shared by every command that loads a model (chat, generate, logits):
// --store, --kernel, --kernel-persistent, --kdll, --threads.
#pragma once

#include <set>
#include <string>

#include "cli/args.h"
#include "runtime/model.h"
#include "runtime/sampler.h"

namespace neural::cli {

// Help lines for the flags below, indented to match the commands' help texts.
extern const char* const kEngineFlagsHelp;

// `flags` plus the engine flags that take a value.
std::set<std::string> with_engine_flags(std::set<std::string> flags);

// The sampling flags shared by chat and generate: --temperature (default 1.0), --top-k, --top-p,
// --min-p, --seed. Validated (out-of-range values are errors naming the flag).
SamplingParams sampling_params(const Args& args);

// LoadOptions from the flags; also sets the reference path's thread count (--threads). With a
// store the fused kernels are the default (--kernel auto); --kernel reference keeps the plain path.
LoadOptions engine_load_options(const Args& args);

}  // namespace neural::cli
