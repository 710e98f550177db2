// A small command-line parser for the `neural` subcommands: --flag VALUE, --flag=VALUE, boolean
// switches and positionals. Unknown flags and bad numbers are errors with a clear message.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/options.h"

namespace neural::cli {

class Args {
public:
    // `value_flags` take a value, `switches` do not; anything else starting with "--" is an error.
    // With `engine_settings`, the settings schema's flags (runtime/options.h) are taken first, into
    // engine() (a command that loads a model).
    Args(int argc, char** argv, std::set<std::string> value_flags, std::set<std::string> switches,
         bool engine_settings = false);

    bool has(const std::string& flag) const;
    std::optional<std::string> get(const std::string& flag) const;
    std::string get_or(const std::string& flag, const std::string& fallback) const;
    std::int64_t get_int(const std::string& flag, std::int64_t fallback, std::int64_t min,
                         std::int64_t max) const;
    double get_double(const std::string& flag, double fallback) const;
    // The same, range-checked: a value outside [min, max] (or not finite) is an error
    // "FLAG: expected UNIT in [MIN, MAX], got "TEXT"".
    double get_double(const std::string& flag, double fallback, double min, double max,
                      const char* unit) const;
    const std::vector<std::string>& positional() const { return positional_; }
    // The engine settings given (key -> text), validated one by one.
    const options::Settings& engine() const { return engine_; }

private:
    options::Settings engine_;
    std::map<std::string, std::string> values_;
    std::set<std::string> switches_on_;
    std::vector<std::string> positional_;
};

std::int64_t parse_int(const std::string& text, const std::string& what);
double parse_double(const std::string& text, const std::string& what);
// "1,2,3" -> ids; throws on anything that is not a comma-separated list of non-negative integers.
std::vector<std::int32_t> parse_id_list(const std::string& text);

}  // namespace neural::cli
