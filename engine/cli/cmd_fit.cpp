// neural fit --model DIR [--store FILE] [--vram-budget GIB] [--ram-budget GIB] [--json FILE]
// Plans the engine's knobs for this PC (runtime/fit.h) and explains every choice.
#include <fstream>
#include <variant>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "model/config.h"
#include "model/gguf.h"
#include "model/weights.h"
#include "neural/error.h"
#include "platform/atomic_file.h"
#include "runtime/fit.h"
#include "runtime/options.h"
#include "store/store.h"

namespace neural::cli {

namespace {
// {vram}: the settings schema's --vram-budget row (runtime/options.h), which `neural fit` parses
// with the engine's range and messages.
constexpr const char* kHelp = R"(usage: neural fit --model DIR [--store FILE] [options]

Detects free VRAM, RAM, CPU cores and SIMD, measures RAM read and PCIe copy bandwidth (about
half a second), and plans the engine flags for this model on this PC:
backend, VRAM budget, expert slots, context, threads, kernel, store format, and what the GPU
backend's load-time choices (pinned store, streamed misses) will be. Every choice comes
with one line of explanation; what does not fit is a warning with the closest workable plan.
  --model DIR          checkpoint folder (only config.json is read) or GGUF file
  --store FILE         an existing expert store (its format and size are used)
{vram}
  --ram-budget GIB     plan for at most this much RAM (emulate a smaller PC)
  --json FILE          also write the plan as JSON (the desktop app's default profile)
Exit status 0 when the plan fits, 3 when it does not (see the warnings).
)";

const options::Setting& vram_budget_setting() { return *options::find("vram_budget"); }

std::string help() {
    const options::Setting& v = vram_budget_setting();
    return fmt::format(
        kHelp, fmt::arg("vram", fmt::format("  {:<20} {} ({}; 0: what is free)",
                                            v.flag + " " + v.metavar, v.help, v.allowed())));
}

std::string gib(std::uint64_t b) {
    return fmt::format("{:.1f} GiB", static_cast<double>(b) / (1024.0 * 1024 * 1024));
}
}  // namespace

int cmd_fit(int argc, char** argv) {
    Args args(argc, argv, {"--model", "--store", "--vram-budget", "--ram-budget", "--json"},
              {"--help"});
    if (args.has("--help")) {
        fmt::print("{}", help());
        return 0;
    }
    if (!args.has("--model")) fail("--model DIR is required\n{}", help());
    const std::filesystem::path dir = args.get_or("--model", "");
    FitRequest req;
    req.config = is_gguf_path(dir) ? checkpoint_config(Checkpoint::open(dir))
                                   : ModelConfig::load(dir / "config.json");
    if (const auto text = args.get("--vram-budget"))
        req.vram_budget_gib = std::get<double>(options::parse(vram_budget_setting(), *text));
    req.ram_budget_gib = args.get_double("--ram-budget", 0.0, 0, 65536, "GiB");
    if (args.has("--store")) {
        const auto s = store::ExpertStore::open(args.get_or("--store", ""));
        req.store_kind = store::kind_name(s.kind());
        req.store_bytes = s.file_bytes();
    }
    MachineInfo m = detect_machine();
    probe_bandwidth(m);
    fmt::print("machine: {} logical CPUs ({}), RAM {} total / {} available, GPU: {}\n", m.cpus,
               m.avx512 ? "AVX-512"
               : m.avx2 ? "AVX2"
                        : "no AVX2",
               gib(m.ram_total), gib(m.ram_available),
               m.gpu ? fmt::format("{} ({} free of {})", m.gpu->name, gib(m.gpu->free_bytes),
                                   gib(m.gpu->total_bytes))
                     : "none (" + m.gpu_why + ")");
    std::string ram_read;
    for (const autotune::RamPoint& pt : m.ram_read)
        ram_read += fmt::format("{}{:.1f} GB/s at {} threads", ram_read.empty() ? "" : ", ",
                                pt.gb_s, pt.threads);
    fmt::print("probes: RAM read {}; copies to the GPU {}\n",
               ram_read.empty() ? std::string("not measured") : ram_read,
               m.pinned_h2d_gb_s > 0 ? fmt::format("{:.1f} GB/s pinned, {:.1f} GB/s pageable",
                                                   m.pinned_h2d_gb_s, m.pageable_h2d_gb_s)
                                     : std::string("not measured"));
    FitPlan plan = plan_fit(req, m);
    plan.store = args.get_or("--store", "");
    fmt::print("model: {} layers x {} experts, hidden {}\n\nplan:\n", req.config.num_layers,
               req.config.num_experts, req.config.hidden_size);
    for (const auto& line : plan.reasons) fmt::print("  - {}\n", line);
    for (const auto& line : plan.warnings) fmt::print("  ! {}\n", line);
    std::string flags;
    for (const auto& f : plan.flags()) flags += " " + f;
    // The engine settings (runtime/options.h): neural, neural-server and a desktop profile take
    // them as they are.
    fmt::print("\nflags:{}{}\n", flags,
               args.has("--store") ? ""
                                   : fmt::format("  (with a {} store: --store FILE --kernel {})",
                                                 plan.store_format, plan.kernel));
    if (args.has("--json")) {
        nlohmann::json j = plan.to_json();
        j["machine"] = {{"cpus", m.cpus},
                        {"avx512", m.avx512},
                        {"avx2", m.avx2},
                        {"ram_total", m.ram_total},
                        {"ram_available", m.ram_available},
                        {"gpu", m.gpu ? nlohmann::json{{"name", m.gpu->name},
                                                       {"total_bytes", m.gpu->total_bytes},
                                                       {"free_bytes", m.gpu->free_bytes}}
                                      : nlohmann::json(nullptr)},
                        {"pinned_h2d_gb_s", m.pinned_h2d_gb_s},
                        {"pageable_h2d_gb_s", m.pageable_h2d_gb_s}};
        nlohmann::json ram = nlohmann::json::array();
        for (const autotune::RamPoint& pt : m.ram_read)
            ram.push_back({{"threads", pt.threads}, {"gb_s", pt.gb_s}});
        j["machine"]["ram_read"] = ram;
        write_file_atomic(args.get_or("--json", ""), j.dump(2) + "\n");
    }
    return plan.fits ? 0 : 3;
}

}  // namespace neural::cli
