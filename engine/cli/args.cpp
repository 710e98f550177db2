#include "cli/args.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "neural/error.h"

namespace neural::cli {

Args::Args(int argc, char** argv, std::set<std::string> value_flags, std::set<std::string> switches,
           bool engine_settings) {
    std::vector<std::string> all(argv, argv + argc);
    if (engine_settings) engine_ = options::take_flags(all);
    const int n = static_cast<int>(all.size());
    for (int i = 0; i < n; ++i) {
        std::string a = all[i];
        if (a.size() > 2 && a.rfind("--", 0) == 0) {
            std::string name = a, value;
            bool inline_value = false;
            if (auto eq = a.find('='); eq != std::string::npos) {
                name = a.substr(0, eq);
                value = a.substr(eq + 1);
                inline_value = true;
            }
            if (value_flags.count(name)) {
                if (!inline_value) {
                    if (i + 1 >= n) fail("option {} needs a value", name);
                    value = all[++i];
                }
                values_[name] = value;
            } else if (switches.count(name)) {
                if (inline_value) fail("option {} takes no value", name);
                switches_on_.insert(name);
            } else {
                fail("unknown option {} (see --help)", name);
            }
        } else {
            positional_.push_back(a);
        }
    }
}

bool Args::has(const std::string& flag) const {
    return values_.count(flag) > 0 || switches_on_.count(flag) > 0;
}

std::optional<std::string> Args::get(const std::string& flag) const {
    auto it = values_.find(flag);
    if (it == values_.end()) return std::nullopt;
    return it->second;
}

std::string Args::get_or(const std::string& flag, const std::string& fallback) const {
    return get(flag).value_or(fallback);
}

std::int64_t Args::get_int(const std::string& flag, std::int64_t fallback, std::int64_t min,
                           std::int64_t max) const {
    auto v = get(flag);
    if (!v) return fallback;
    std::int64_t n = parse_int(*v, flag);
    if (n < min || n > max) fail("{} must be between {} and {}, got {}", flag, min, max, n);
    return n;
}

double Args::get_double(const std::string& flag, double fallback) const {
    auto v = get(flag);
    return v ? parse_double(*v, flag) : fallback;
}

double Args::get_double(const std::string& flag, double fallback, double min, double max,
                        const char* unit) const {
    const double v = get_double(flag, fallback);
    if (!(v >= min && v <= max)) {  // NaN fails too
        fail("{}: expected {} in [{}, {}], got \"{}\"", flag, unit, min, max, get_or(flag, ""));
    }
    return v;
}

std::int64_t parse_int(const std::string& text, const std::string& what) {
    std::int64_t n = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || p != text.data() + text.size() || text.empty()) {
        fail("{}: \"{}\" is not an integer", what, text);
    }
    return n;
}

double parse_double(const std::string& text, const std::string& what) {
    try {
        size_t used = 0;
        double d = std::stod(text, &used);
        if (used != text.size() || !std::isfinite(d)) throw std::invalid_argument(text);
        return d;
    } catch (const std::exception&) {
        fail("{}: \"{}\" is not a number", what, text);
    }
}

std::vector<std::int32_t> parse_id_list(const std::string& text) {
    std::vector<std::int32_t> ids;
    size_t start = 0;
    while (start <= text.size()) {
        size_t comma = text.find(',', start);
        std::string part =
            text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        std::int64_t v = parse_int(part, "token id list");
        if (v < 0 || v > std::numeric_limits<std::int32_t>::max())
            fail("token id {} is out of range", v);
        ids.push_back(static_cast<std::int32_t>(v));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return ids;
}

}  // namespace neural::cli
