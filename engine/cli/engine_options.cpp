#include "cli/engine_options.h"

#include <cstdint>

#include "runtime/options.h"

namespace neural::cli {

std::string engine_flags_help() {
    return "Engine settings (the same for neural-server, `neural bench` profiles and the "
           "desktop's\n"
           "profiles; a 0|1 flag given bare means 1; [cuda]: needs --backend cuda or auto):\n" +
           options::help_text();
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

LoadOptions engine_load_options(const Args& args) { return options::apply(args.engine()); }

LoadOptions engine_load_options(const Args& args, const LoadOptions& base) {
    return options::apply(args.engine(), base);
}

}  // namespace neural::cli
