// The engine flags shared by every command that loads a model (chat, generate, logits, bench):
// --store, --kernel, --kernel-persistent, --kdll, --threads, the memory hints --ws-min,
// --prefetch (applied after loading) and the RAM residency levers --warmup-ram, --warmup-sync,
// --lock-ram, --release-resident (LoadOptions, applied by Model::load).
#pragma once

#include <cstdint>
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

// The memory hints, validated (bad values are errors naming the flag). They act on the loaded
// model's mappings through engine/platform, so the commands apply them after Model::load; they
// are to move into LoadOptions under these field names.
struct MemoryFlags {
    // --ws-min GIB: keep this much of the process resident (0: the OS default). Windows: the
    // working-set minimum; POSIX: mlock of the dense weights up to it (platform/memory.h
    // keep_resident).
    std::uint64_t ws_min_bytes = 0;
    // --prefetch none|dense|all: start reading the dense (non-expert) weights, or everything the
    // model reads (the expert store's records, else the checkpoint's expert tensors too), before
    // the first token needs them (platform/prefetch.h: madvise WILLNEED / PrefetchVirtualMemory).
    std::string prefetch = "none";
};
MemoryFlags memory_flags(const Args& args);

// The RAM residency flags into `o` (engine_load_options calls it; o.store must be set):
// --warmup-ram SECONDS, --warmup-sync 0|1, --lock-ram GIB, --release-resident 0|1. Bad values,
// and any of them without --store, are errors naming the flag. Model::load applies them.
void apply_ram_flags(const Args& args, LoadOptions& o);

// Applies the memory hints to `model`. Hints: what could not be done is a warning, not an error
// (the model runs either way); what was done is logged at info level (NEURAL_LOG=info).
void apply_memory_flags(const MemoryFlags& flags, const Model& model);

}  // namespace neural::cli
