// The settings schema: one row per engine / load setting (LoadOptions and its GpuOptions), with
// its key, command-line flag, type, limits, default, one line of help and the backends it acts
// on. Every surface is generated from these rows: the `neural` commands' engine flags,
// neural-server's engine options, `neural bench` profile files, the desktop app's profile knobs
// and the flags `neural fit` prints. So a setting has one name, one range, one help line and one
// error message everywhere (docs/USER_GUIDE.md "Engine settings").
//
// Conventions:
//   - key: the profile key ("pool_slots"); flag: "--" + the key with '-' for '_'
//     ("--pool-slots"); find() takes either spelling, and the flag without "--".
//   - A flag whose values include 1 (the 0|1 switches, and auto|0|1) may be given bare, before
//     another flag or at the end: it means 1. "--flag 0|1" and "--flag=0|1" name the value;
//     bool values are 0, 1, true, false.
//   - Rows with an auto value (pool, pool_slots, kv_ring) take "auto" (or its number, -1).
//   - A CUDA-only setting given with --backend cpu is refused (BackendError) with the same
//     message on every surface; "auto" may pick the GPU, so it takes them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/model.h"

namespace neural::options {

enum class Type { integer, real, boolean, choice, path };
// The backends a setting acts on.
enum class Applies { both, cpu, cuda };
// What a setting does to the model's answers (docs/USER_GUIDE.md "What each setting does to the
// answers", generated from the rows by arithmetic_table()):
//   exact        it does not enter the arithmetic (where the bytes live, memory, files, waits);
//   same_bits    another way to compute that gives the same bits (tested bit for bit);
//   device_class the same published arithmetic on another device, kernel or partition: the
//                answers differ only by fp32 rounding (e.g. an expert on the GPU or the CPU);
//   lossy        a value in `lossy_values` changes the model's arithmetic (re-quantized weights
//                or activations, a guessed RoPE): opt-in only, never set by `neural fit`, the
//                setup wizard or a built-in profile.
enum class Arithmetic { exact, same_bits, device_class, lossy };

using Value = std::variant<std::int64_t, double, bool, std::string>;

struct Setting {
    std::string key;   // profile key: "pool_slots"
    std::string flag;  // command-line flag: "--pool-slots"
    Type type = Type::integer;
    std::string metavar;               // "N", "GIB", "0|1", ...
    double min = 0, max = 0;           // integer / real: the allowed range
    std::optional<double> auto_value;  // integer / real: the number "auto" stands for
    std::vector<std::string> choices;  // choice: the values
    std::string unit;          // real: "GiB", "seconds", "a fraction" (error messages, GUI suffix)
    std::string label;         // a few words (the desktop's knob label)
    std::string help;          // one line: what it does
    std::string default_text;  // the default when it is not just the value ("0: all cores")
    Applies applies = Applies::both;
    Arithmetic arithmetic = Arithmetic::exact;  // the class of its values (lossy: see below)
    std::vector<std::string> lossy_values;      // the values that change the answers (as text)
    std::string arithmetic_note;                // why it is in its class, a few words
    std::function<Value(const LoadOptions&)> get;
    std::function<void(LoadOptions&, const Value&)> set;

    // "an integer in [1, 64]", "GiB in [0, 4096] or auto", "cpu, cuda or auto", "0 or 1".
    std::string allowed() const;
    // The value LoadOptions{} holds, as text ("8", "auto", "0.25").
    std::string default_value() const;
    // True when the flag may be given without a value (it then means "1").
    bool bare_means_one() const;
    // True when `text` (a value as parse() reads it) is one of the lossy values.
    bool is_lossy(std::string_view text) const;
};

// "exact", "same bits", "device-class", "lossy".
std::string arithmetic_name(Arithmetic a);

// Every row, in help order.
const std::vector<Setting>& settings();
// By key ("pool_slots"), flag ("--pool-slots") or the flag without "--" ("pool-slots").
const Setting* find(std::string_view name);

// Text -> value within the row's limits. Errors (neural::Error) name the flag and the allowed
// values: "--scratch: expected an integer in [1, 64], got "0"".
Value parse(const Setting& s, std::string_view text);
// Value -> the text parse() reads back ("auto" for the auto value, "1"/"0" for booleans).
std::string format(const Setting& s, const Value& v);
// The shortest text that reads back as exactly `d`.
std::string format_real(double d);

// Settings by key -> text, as the command line, a profile file or a knob gives them.
using Settings = std::map<std::string, std::string>;

// Parses and applies `values` over `base`, then checks the rules between settings: a CUDA-only
// setting with backend cpu, a fused kernel / RAM lever without a store, --warmup-sync without a
// lever. Unknown keys and bad values are errors naming the flag.
LoadOptions apply(const Settings& values, const LoadOptions& base);
LoadOptions apply(const Settings& values);  // over LoadOptions{}

// The message for a setting that does not act on `backend` (one text for every surface).
std::string backend_refusal(const Setting& s, std::string_view backend);

// The lossy settings among `values` (flag and value, "--dense int8-head"); empty when none.
std::vector<std::string> lossy_settings(const Settings& values);

// The markdown table of every setting's arithmetic class (docs/USER_GUIDE.md carries it verbatim;
// options_test checks that it does, so the page cannot go stale).
std::string arithmetic_table();

// The rows' help, one flag a line ("  --pool GIB  expert slot pool ... (default: auto)"),
// wrapped at `width` columns with the help starting at column `column`.
std::string help_text(int column = 27, int width = 100);

// `o` as flags: every setting whose value differs from LoadOptions{} ("--backend", "cuda",
// "--pool-slots", "412", ...), in row order; CUDA-only ones only when the backend is not cpu.
// apply(from_flags(to_flags(o))) == o for every o apply can produce.
std::vector<std::string> to_flags(const LoadOptions& o);
// `o` as settings: the keys to_flags would print, or with `all` every row.
Settings to_settings(const LoadOptions& o, bool all = false);

// Takes the schema's flags out of `args` (leaving the rest in order) into settings:
// "--flag VALUE", "--flag=VALUE", and a bare "--flag" for the rows that allow it. A later
// flag wins. Errors name the flag (missing value, bad value).
Settings take_flags(std::vector<std::string>& args);

// CPUs from which the CPU backend's kernels run on the persistent team by default.
inline constexpr int kPersistentTeamMinCpus = 4;

// Whether the fused kernels run on the persistent worker team (LoadOptions::kernel_persistent;
// unset: on the CUDA backend yes, on the CPU backend when the machine has at least
// kPersistentTeamMinCpus CPUs).
bool persistent_team(const LoadOptions& o, bool gpu_backend);

// Applies the memory hints (LoadOptions::ws_min_bytes, prefetch) to the loaded model's mappings
// (platform/memory.h, platform/prefetch.h). What could not be done is a warning, not an error.
void apply_memory_hints(const LoadOptions& o, const Model& model);

}  // namespace neural::options
