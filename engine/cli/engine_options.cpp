#include "cli/engine_options.h"

#include <cstdint>

#include "cli/gpu_options.h"
#include "cpu/parallel.h"
#include "neural/error.h"

namespace neural::cli {

const char* const kEngineFlagsHelp =
    R"(  --store FILE             read the experts from this expert store (`neural repack`)
  --kernel NAME            with --store: auto (default), reference, scalar, avx2, avx512
  --kernel-persistent 0|1  run the expert kernels on the persistent worker team DLL
  --kdll PATH              the persistent team library (default: beside the executable)
  --threads N              worker threads (default: all cores; kernels: min(cores, 8))
)";

std::set<std::string> with_engine_flags(std::set<std::string> flags) {
    flags.insert({"--store", "--kernel", "--kernel-persistent", "--kdll", "--threads"});
    add_gpu_flags(flags);
    return flags;
}

SamplingParams sampling_params(const Args& args) {
    SamplingParams p;
    p.temperature = static_cast<float>(args.get_double("--temperature", 1.0));
    p.top_k = static_cast<int>(args.get_int("--top-k", 0, 0, 1 << 24));
    p.top_p = static_cast<float>(args.get_double("--top-p", 1.0));
    p.min_p = static_cast<float>(args.get_double("--min-p", 0.0));
    p.seed = static_cast<std::uint64_t>(args.get_int("--seed", 0, 0, INT64_MAX));
    p.validate();
    return p;
}

LoadOptions engine_load_options(const Args& args) {
    LoadOptions o;
    o.store = args.get_or("--store", "");
    o.kernel = args.get_or("--kernel", o.store.empty() ? "reference" : "auto");
    o.kernel_persistent = args.get_int("--kernel-persistent", 0, 0, 1) == 1;
    o.kdll = args.get_or("--kdll", "");
    o.threads = static_cast<int>(args.get_int("--threads", 0, 0, 4096));
    cpu::set_threads(o.threads);
    apply_gpu_flags(args, o);
    if (o.store.empty() && args.has("--kernel") && o.kernel != "reference") {
        fail("--kernel {} needs --store: the fused kernels read expert-store records", o.kernel);
    }
    return o;
}

}  // namespace neural::cli
