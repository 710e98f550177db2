// The backend flags shared by every command that loads a model: --backend and the CUDA
// backend's knobs (--vram-budget, --pool, --pool-slots, --static-fraction, --ranking,
// --refresh-every, --refresh-m, --prefill-weight, --context, --device). engine_options.cpp adds
// them to the engine flags, so chat, generate, logits and bench all accept them.
#pragma once

#include <set>
#include <string>

#include "cli/args.h"
#include "runtime/model.h"

namespace neural::cli {

extern const char* const kGpuFlagsHelp;

void add_gpu_flags(std::set<std::string>& flags);

// Sets options.backend and options.gpu from the flags (validated; errors name the flag).
void apply_gpu_flags(const Args& args, LoadOptions& options);

}  // namespace neural::cli
