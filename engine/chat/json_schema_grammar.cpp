#include "chat/json_schema_grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "chat/utf8_stream.h"

namespace neural::chat {

using Json = nlohmann::ordered_json;

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

constexpr int kMaxExponentDigits = 2;

// ---- bounded numbers ------------------------------------------------------------------------
// A number node with bounds accepts the text of a number (no exponent) only while some
// continuation of it lies within the bounds, so a constrained answer never runs into a dead end.
// Values are compared as long double (exact for integers up to 2^64 on x86).

using Real = long double;

// Syntax of a bounded number's prefix: -?(0|[1-9][0-9]*)(\.[0-9]*)? (no fraction for integers).
bool bounded_syntax(std::string_view t, bool integer) {
    std::size_t i = 0;
    if (i < t.size() && t[i] == '-') ++i;
    if (i == t.size()) return true;
    if (t[i] == '0') {
        ++i;
    } else if (t[i] >= '1' && t[i] <= '9') {
        while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
    } else {
        return false;
    }
    if (i == t.size()) return true;
    if (integer || t[i] != '.') return false;
    ++i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
    return i == t.size();
}

// Closed integer bounds of an integer node.
JsonSchemaGrammar::Bounds integer_bounds(const JsonSchemaGrammar::Bounds& b) {
    JsonSchemaGrammar::Bounds out = b;
    if (b.has_min) out.min = b.min_exclusive ? std::floor(b.min) + 1 : std::ceil(b.min);
    if (b.has_max) out.max = b.max_exclusive ? std::ceil(b.max) - 1 : std::floor(b.max);
    out.min_exclusive = out.max_exclusive = false;
    return out;
}

// Whether some value in the interval from lo to hi (each end closed or open) meets `b`.
bool interval_meets(Real lo, bool lo_closed, Real hi, bool hi_closed,
                    const JsonSchemaGrammar::Bounds& b) {
    if (b.has_max) {
        const Real max = b.max;
        if (lo > max || (lo == max && (!lo_closed || b.max_exclusive))) return false;
    }
    if (b.has_min) {
        const Real min = b.min;
        if (hi < min || (hi == min && (!hi_closed || b.min_exclusive))) return false;
    }
    return true;
}

Real power_of_ten(int k) {
    Real p = 1;
    for (int i = 0; i < k; ++i) p *= 10;
    return p;
}

// Some continuation of `t` (at most `max_length` characters in all) meets the node's bounds.
bool bounded_prefix_ok(const JsonSchemaGrammar::Node& n, std::string_view t,
                       std::size_t max_length) {
    const bool integer = n.kind == JsonSchemaGrammar::Kind::integer;
    const JsonSchemaGrammar::Bounds b = integer ? integer_bounds(n.bounds) : n.bounds;
    const bool neg = !t.empty() && t[0] == '-';
    const std::string_view body = t.substr(neg ? 1 : 0);
    if (body.empty()) {
        if (!neg) return true;
        // Any value <= 0 can still come.
        return interval_meets(-std::numeric_limits<Real>::infinity(), false, 0, true, b);
    }
    const std::size_t dot = body.find('.');
    const std::string_view whole = body.substr(0, dot);
    Real m = 0;
    for (char c : whole) m = m * 10 + (c - '0');
    auto meets = [&](Real a, Real width, bool closed_width) {
        // magnitudes [a, a + width) (or [a, a + width] for closed_width)
        return neg ? interval_meets(-(a + width), closed_width, -a, true, b)
                   : interval_meets(a, true, a + width, closed_width, b);
    };
    if (dot != std::string_view::npos) {
        Real scale = 1, v = m;
        for (char c : body.substr(dot + 1)) {
            scale /= 10;
            v += (c - '0') * scale;
        }
        return meets(v, scale, false);
    }
    if (whole == "0") return integer ? meets(0, 0, true) : meets(0, 1, false);
    const std::size_t room = max_length > t.size() ? max_length - t.size() : 0;
    for (std::size_t k = 0; k <= room; ++k) {
        const Real a = m * power_of_ten(static_cast<int>(k));
        const Real width = power_of_ten(static_cast<int>(k));
        if (integer ? meets(a, width - 1, true) : meets(a, width, false)) return true;
        if (!neg && b.has_max && a > static_cast<Real>(b.max)) return false;
        if (neg && b.has_min && -a < static_cast<Real>(b.min)) return false;
    }
    return false;
}

// A complete bounded number's value meets the bounds.
bool bounded_value_ok(const JsonSchemaGrammar::Node& n, std::string_view t) {
    if (t.empty() || t.back() < '0' || t.back() > '9') return false;
    Real v = 0;
    const bool neg = t[0] == '-';
    Real scale = 0;
    for (char c : t.substr(neg ? 1 : 0)) {
        if (c == '.') {
            scale = 1;
            continue;
        }
        if (scale == 0) {
            v = v * 10 + (c - '0');
        } else {
            scale /= 10;
            v += (c - '0') * scale;
        }
    }
    if (neg) v = -v;
    const auto& b = n.bounds;
    if (b.has_min && (v < b.min || (b.min_exclusive && v == b.min))) return false;
    if (b.has_max && (v > b.max || (b.max_exclusive && v == b.max))) return false;
    return true;
}

// The shortest text found that, appended to the valid prefix `t`, gives a number within the
// bounds: a character that ends it within them if there is one, else the first that keeps the
// prefix valid.
std::string bounded_completion(const JsonSchemaGrammar::Node& n, std::string t,
                               std::size_t max_length) {
    const bool integer = n.kind == JsonSchemaGrammar::Kind::integer;
    std::string out;
    static constexpr std::string_view kChars = "0123456789.-";
    while (t.size() < max_length && !bounded_value_ok(n, t)) {
        char pick = 0;
        for (int pass = 0; pass < 2 && !pick; ++pass) {
            for (char c : kChars) {
                if (c == '-' && !t.empty()) continue;
                const std::string next = t + c;
                if (!bounded_syntax(next, integer) || !bounded_prefix_ok(n, next, max_length))
                    continue;
                if (pass == 1 || bounded_value_ok(n, next)) {
                    pick = c;
                    break;
                }
            }
        }
        if (!pick) break;
        t += pick;
        out += pick;
    }
    return out;
}
// ---- patterns ---------------------------------------------------------------------------------
// A string with a pattern steps its automaton over the string's code points (as JSON decodes
// them: escapes and UTF-8 alike) and takes a byte only while some matching string within the
// length limits still starts with the text.

using Pattern = JsonSchemaGrammar::Pattern;
using CodeRange = std::pair<char32_t, char32_t>;  // inclusive

// From `state` with `count` code points given, some matching rest fits minLength / maxLength.
bool pattern_can_finish(const Pattern& p, int state, std::size_t count,
                        const JsonSchemaGrammar::Node& n) {
    if (!p.lengths) return true;  // every state left in the automaton can still accept
    if (count > n.max_length) return false;
    const std::size_t lo = n.min_length > count ? n.min_length - count : 0;
    const std::size_t hi = n.max_length == SIZE_MAX ? SIZE_MAX : n.max_length - count;
    return p.lengths->can_finish(state, lo, hi);
}

// The first code point in `r` whose step from `state` leaves a viable string (count + 1 code
// points); -1 if none.
std::int64_t first_viable(const Pattern& p, int state, std::size_t count, CodeRange r,
                          const JsonSchemaGrammar::Node& n, int* to = nullptr) {
    const RegexAutomaton& re = *p.re;
    if (r.first > r.second) return -1;
    for (std::size_t c = 0; c < re.classes(); ++c) {
        if (re.class_last(c) < r.first) continue;
        if (re.class_first(c) > r.second) break;
        const int t = re.target(state, c);
        if (t >= 0 && pattern_can_finish(p, t, count + 1, n)) {
            if (to) *to = t;
            return std::max(re.class_first(c), r.first);
        }
    }
    return -1;
}

std::string hex4(std::uint32_t v) { return fmt::format("{:04x}", v & 0xFFFF); }

// A code point as JSON writes it inside a string.
void append_json_char(std::string& out, char32_t cp) {
    if (cp == '"' || cp == '\\') {
        out += '\\';
        out += static_cast<char>(cp);
    } else if (cp < 0x20) {
        out += "\\u" + hex4(cp);
    } else {
        append_utf8(out, cp);
    }
}

// A short matching rest of the string from `state` after `count` code points (JSON-escaped,
// without the closing quote): the step closest to acceptance among those that stay viable.
std::string pattern_rest(const Pattern& p, int state, std::size_t count,
                         const JsonSchemaGrammar::Node& n) {
    const RegexAutomaton& re = *p.re;
    std::string out;
    for (std::size_t guard = 0; guard < (1u << 20); ++guard) {
        if (re.accepting(state) && count >= n.min_length) break;
        int best = -1;
        std::size_t best_class = 0;
        for (std::size_t c = 0; c < re.classes(); ++c) {
            const int t = re.target(state, c);
            if (t < 0 || !pattern_can_finish(p, t, count + 1, n)) continue;
            // Prefer printable code points where the class has them.
            const bool printable = re.class_last(c) >= 0x20;
            const bool best_printable = best >= 0 && re.class_last(best_class) >= 0x20;
            if (best < 0 || (printable && !best_printable) ||
                (printable == best_printable && re.shortest(t) < re.shortest(best))) {
                best = t;
                best_class = c;
            }
        }
        if (best < 0) break;  // cannot happen for a viable state
        append_json_char(
            out, std::max<char32_t>(re.class_first(best_class), 0x20) <= re.class_last(best_class)
                     ? std::max<char32_t>(re.class_first(best_class), 0x20)
                     : re.class_first(best_class));
        state = best;
        ++count;
    }
    return out;
}

}  // namespace

// ---- compiler ---------------------------------------------------------------------------------

class SchemaCompiler {
public:
    std::shared_ptr<JsonSchemaGrammar> g = std::make_shared<JsonSchemaGrammar>();
    std::vector<std::string> unsupported;  // "keyword (at /pointer)"
    const Json* root = nullptr;            // what $ref pointers are resolved in

    int add(JsonSchemaGrammar::Node n) {
        if (g->nodes_.size() >= JsonSchemaGrammar::kMaxNodes) {
            throw SchemaError(fmt::format("the JSON schema is too large (more than {} subschemas)",
                                          JsonSchemaGrammar::kMaxNodes));
        }
        g->nodes_.push_back(std::move(n));
        return static_cast<int>(g->nodes_.size()) - 1;
    }

    // Any JSON value: the object and array alternatives refer back to it.
    int any() {
        if (any_ >= 0) return any_;
        JsonSchemaGrammar::Node types;
        types.kind = JsonSchemaGrammar::Kind::types;
        any_ = add(types);
        const int obj = any_object_node();
        JsonSchemaGrammar::Node arr;
        arr.kind = JsonSchemaGrammar::Kind::array;
        arr.items = any_;
        const int a = add(arr);
        const int str = primitive(JsonSchemaGrammar::Kind::string);
        const int num = primitive(JsonSchemaGrammar::Kind::number);
        const int boolean = literal({"true", "false"});
        const int null = literal({"null"});
        auto& t = g->nodes_[static_cast<std::size_t>(any_)];
        t.on_object = obj;
        t.on_array = a;
        t.on_string = str;
        t.on_number = num;
        t.on_bool = boolean;
        t.on_null = null;
        return any_;
    }

    int any_object_node() {
        JsonSchemaGrammar::Node obj;
        obj.kind = JsonSchemaGrammar::Kind::object;
        obj.additional = any();
        return add(obj);
    }

    int primitive(JsonSchemaGrammar::Kind k) {
        JsonSchemaGrammar::Node n;
        n.kind = k;
        return add(n);
    }

    int literal(std::vector<std::string> values) {
        JsonSchemaGrammar::Node n;
        n.kind = JsonSchemaGrammar::Kind::literal;
        n.literals = std::move(values);
        return add(n);
    }

    static std::string dump(const Json& v) {
        return v.dump(-1, ' ', false, Json::error_handler_t::replace);
    }

    static std::size_t count(const Json& v, const std::string& where) {
        if (!v.is_number_integer() || v.get<std::int64_t>() < 0) {
            throw SchemaError(fmt::format("'{}' must be a non-negative integer", where));
        }
        return static_cast<std::size_t>(v.get<std::int64_t>());
    }

    int compile(const Json& s, const std::string& ptr) {
        if (s.is_boolean()) {
            if (s.get<bool>()) return any();
            throw SchemaError(fmt::format("the schema at '{}' is false: no value matches it",
                                          ptr.empty() ? "/" : ptr));
        }
        if (!s.is_object()) {
            throw SchemaError(
                fmt::format("the schema at '{}' must be an object", ptr.empty() ? "/" : ptr));
        }
        static const std::set<std::string> annotations = {
            "title", "description", "default",    "examples", "format",   "$schema",
            "$id",   "$comment",    "deprecated", "readOnly", "writeOnly"};
        static const std::set<std::string> known = {"type",
                                                    "properties",
                                                    "required",
                                                    "additionalProperties",
                                                    "items",
                                                    "minItems",
                                                    "maxItems",
                                                    "enum",
                                                    "const",
                                                    "minimum",
                                                    "maximum",
                                                    "exclusiveMinimum",
                                                    "exclusiveMaximum",
                                                    "minLength",
                                                    "maxLength",
                                                    "pattern",
                                                    "anyOf",
                                                    "oneOf",
                                                    "allOf",
                                                    "$ref",
                                                    "$defs",
                                                    "definitions",
                                                    "nullable"};
        for (auto it = s.begin(); it != s.end(); ++it) {
            if (!known.count(it.key()) && !annotations.count(it.key())) {
                unsupported.push_back(fmt::format("{} (at {}/{})", it.key(), ptr, it.key()));
            }
        }
        if (auto r = s.find("$ref"); r != s.end()) return ref(*r, ptr);
        if (auto c = s.find("const"); c != s.end()) return literal({dump(*c)});
        if (auto e = s.find("enum"); e != s.end()) {
            if (!e->is_array() || e->empty()) {
                throw SchemaError(fmt::format("'{}/enum' must be a non-empty array", ptr));
            }
            std::vector<std::string> values;
            for (const Json& v : *e) values.push_back(dump(v));
            return literal(std::move(values));
        }
        for (const char* kw : {"anyOf", "oneOf"}) {
            if (auto a = s.find(kw); a != s.end()) return union_of(*a, ptr + "/" + kw);
        }
        if (auto a = s.find("allOf"); a != s.end()) {
            if (!a->is_array() || a->empty())
                throw SchemaError(fmt::format("'{}/allOf' must be a non-empty array", ptr));
            if (a->size() > 1) {
                unsupported.push_back(
                    fmt::format("allOf of several schemas (only the first is enforced) (at "
                                "{}/allOf)",
                                ptr));
            }
            return compile((*a)[0], ptr + "/allOf/0");
        }
        std::vector<std::string> types;
        if (auto t = s.find("type"); t != s.end()) {
            if (t->is_string()) {
                types.push_back(t->get<std::string>());
            } else if (t->is_array() && !t->empty()) {
                for (const Json& x : *t) {
                    if (!x.is_string())
                        throw SchemaError(fmt::format("'{}/type' must list type names", ptr));
                    types.push_back(x.get<std::string>());
                }
            } else {
                throw SchemaError(
                    fmt::format("'{}/type' must be a type name or a list of them", ptr));
            }
        } else if (s.contains("properties") || s.contains("additionalProperties") ||
                   s.contains("required")) {
            types.push_back("object");
        } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
            types.push_back("array");
        } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern")) {
            types.push_back("string");
        } else if (s.contains("minimum") || s.contains("maximum") ||
                   s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum")) {
            types.push_back("number");
        } else {
            return any();
        }
        if (auto n = s.find("nullable"); n != s.end() && n->is_boolean() && n->get<bool>())
            types.push_back("null");
        static const std::set<std::string> type_names = {"object",  "array",   "string", "number",
                                                         "integer", "boolean", "null"};
        for (const auto& t : types) {
            if (!type_names.count(t)) {
                throw SchemaError(fmt::format("'{}/type': unknown type '{}'", ptr, t));
            }
        }
        auto has = [&](const char* t) {
            return std::find(types.begin(), types.end(), t) != types.end();
        };
        JsonSchemaGrammar::Node u;
        u.kind = JsonSchemaGrammar::Kind::types;
        if (has("object")) u.on_object = object(s, ptr);
        if (has("array")) u.on_array = array(s, ptr);
        if (has("string")) u.on_string = string(s, ptr);
        if (has("number")) {
            u.on_number = numeric(s, ptr, JsonSchemaGrammar::Kind::number);
        } else if (has("integer")) {
            u.on_number = numeric(s, ptr, JsonSchemaGrammar::Kind::integer);
        }
        if (has("boolean")) u.on_bool = literal({"true", "false"});
        if (has("null")) u.on_null = literal({"null"});
        if (types.size() == 1) {
            for (int alt :
                 {u.on_object, u.on_array, u.on_string, u.on_number, u.on_bool, u.on_null}) {
                if (alt >= 0) return alt;
            }
        }
        return add(u);
    }

    // ---- $ref ----------------------------------------------------------------------------

    // The node of a JSON pointer into the root schema ("#", "#/$defs/Node"). A node is reserved
    // before its schema is compiled, so a recursive reference refers to it.
    int ref(const Json& r, const std::string& ptr) {
        if (!r.is_string()) throw SchemaError(fmt::format("'{}/$ref' must be a string", ptr));
        const std::string target = r.get<std::string>();
        if (auto it = refs_.find(target); it != refs_.end()) return it->second;
        const Json* t = resolve(target);
        if (!t) {
            unsupported.push_back(
                fmt::format("$ref '{}' outside this schema (at {}/$ref)", target, ptr));
            return any();
        }
        const int slot = add(JsonSchemaGrammar::Node{JsonSchemaGrammar::Kind::types});
        refs_[target] = slot;
        const int real = compile(*t, target.substr(1));
        if (real == slot) {
            throw SchemaError(fmt::format("'{}/$ref' refers to itself: no value matches it", ptr));
        }
        const JsonSchemaGrammar::Node copy = g->nodes_[static_cast<std::size_t>(real)];
        g->nodes_[static_cast<std::size_t>(slot)] = copy;
        return slot;
    }

    const Json* resolve(const std::string& target) const {
        if (target.empty() || target[0] != '#' || !root) return nullptr;
        const Json* at = root;
        std::size_t i = 1;
        if (i < target.size() && target[i] != '/') return nullptr;  // an anchor name
        while (i < target.size()) {
            std::size_t end = target.find('/', i + 1);
            if (end == std::string::npos) end = target.size();
            std::string token = target.substr(i + 1, end - i - 1);
            for (std::size_t k = 0; (k = token.find('~', k)) != std::string::npos; ++k) {
                if (k + 1 < token.size() && token[k + 1] == '1')
                    token.replace(k, 2, "/");
                else if (k + 1 < token.size() && token[k + 1] == '0')
                    token.replace(k, 2, "~");
            }
            if (at->is_object()) {
                auto it = at->find(token);
                if (it == at->end()) return nullptr;
                at = &*it;
            } else if (at->is_array()) {
                std::size_t index = 0;
                for (char c : token) {
                    if (c < '0' || c > '9' || index > 100000) return nullptr;
                    index = index * 10 + static_cast<std::size_t>(c - '0');
                }
                if (token.empty() || index >= at->size()) return nullptr;
                at = &(*at)[index];
            } else {
                return nullptr;
            }
            i = end;
        }
        return at;
    }

    // ---- anyOf / oneOf ----------------------------------------------------------------------

    // The recogniser picks an alternative by the value's first byte ('{', '[', '"', a digit or
    // '-', 't' / 'f', 'n'); alternatives that share one are merged into their union (a looser
    // constraint, reported in `unsupported`).
    int union_of(const Json& list, const std::string& ptr) {
        if (!list.is_array() || list.empty())
            throw SchemaError(fmt::format("'{}' must be a non-empty array", ptr));
        JsonSchemaGrammar::Node u;
        u.kind = JsonSchemaGrammar::Kind::types;
        bool loose = false;
        for (std::size_t i = 0; i < list.size(); ++i) {
            const int n = compile(list[i], fmt::format("{}/{}", ptr, i));
            distribute(u, n, loose);
        }
        if (loose) {
            unsupported.push_back(
                fmt::format("alternatives that start alike, enforced as their union (at {})", ptr));
        }
        int only = -1, slots = 0;
        for (int alt : {u.on_object, u.on_array, u.on_string, u.on_number, u.on_bool, u.on_null}) {
            if (alt >= 0) {
                only = alt;
                ++slots;
            }
        }
        return slots == 1 ? only : add(std::move(u));
    }

    static int* slot_of(JsonSchemaGrammar::Node& u, char first) {
        switch (first) {
            case '{':
                return &u.on_object;
            case '[':
                return &u.on_array;
            case '"':
                return &u.on_string;
            case 't':
            case 'f':
                return &u.on_bool;
            case 'n':
                return &u.on_null;
            default:
                return &u.on_number;
        }
    }

    void distribute(JsonSchemaGrammar::Node& u, int n, bool& loose) {
        const JsonSchemaGrammar::Node nn = g->nodes_[static_cast<std::size_t>(n)];
        auto put = [&](int* slot, int x) {
            if (*slot < 0 || *slot == x) {
                *slot = x;
            } else {
                *slot = merge(*slot, x, loose);
            }
        };
        switch (nn.kind) {
            case JsonSchemaGrammar::Kind::types: {
                const std::pair<char, int> alts[] = {{'{', nn.on_object}, {'[', nn.on_array},
                                                     {'"', nn.on_string}, {'0', nn.on_number},
                                                     {'t', nn.on_bool},   {'n', nn.on_null}};
                for (const auto& [first, alt] : alts) {
                    if (alt >= 0) put(slot_of(u, first), alt);
                }
                break;
            }
            case JsonSchemaGrammar::Kind::object:
                put(&u.on_object, n);
                break;
            case JsonSchemaGrammar::Kind::array:
                put(&u.on_array, n);
                break;
            case JsonSchemaGrammar::Kind::string:
                put(&u.on_string, n);
                break;
            case JsonSchemaGrammar::Kind::number:
            case JsonSchemaGrammar::Kind::integer:
                put(&u.on_number, n);
                break;
            case JsonSchemaGrammar::Kind::literal: {
                // true / false share a slot; so do all numbers, all strings, ...
                std::map<int*, std::vector<std::string>> groups;
                for (const std::string& l : nn.literals) groups[slot_of(u, l[0])].push_back(l);
                if (groups.size() == 1) {
                    put(groups.begin()->first, n);
                } else {
                    for (auto& [slot, values] : groups) put(slot, literal(std::move(values)));
                }
                break;
            }
        }
    }

    // A node accepting what `a` or `b` accepts (or more: then `loose` is set).
    int merge(int a, int b, bool& loose) {
        const auto key = std::make_pair(std::min(a, b), std::max(a, b));
        if (auto it = merges_.find(key); it != merges_.end()) return it->second;
        const JsonSchemaGrammar::Node A = g->nodes_[static_cast<std::size_t>(a)];
        const JsonSchemaGrammar::Node B = g->nodes_[static_cast<std::size_t>(b)];
        using K = JsonSchemaGrammar::Kind;
        if (A.kind == K::literal && B.kind == K::literal) {
            std::vector<std::string> values = A.literals;
            for (const auto& l : B.literals) {
                if (std::find(values.begin(), values.end(), l) == values.end()) values.push_back(l);
            }
            return merges_[key] = literal(std::move(values));
        }
        loose = true;
        if (A.kind == K::literal || A.kind == K::types) return merges_[key] = b;
        if (B.kind == K::literal || B.kind == K::types) return merges_[key] = a;
        const int slot = add(JsonSchemaGrammar::Node{K::types});
        merges_[key] = slot;
        JsonSchemaGrammar::Node m = A;
        switch (A.kind) {
            case K::number:
            case K::integer: {
                m.kind = A.kind == K::number || B.kind == K::number ? K::number : K::integer;
                m.bounds = {};
                if (A.bounds.has_min && B.bounds.has_min) {
                    const auto& lo = A.bounds.min <= B.bounds.min ? A.bounds : B.bounds;
                    m.bounds.has_min = true;
                    m.bounds.min = lo.min;
                    m.bounds.min_exclusive = A.bounds.min == B.bounds.min
                                                 ? A.bounds.min_exclusive && B.bounds.min_exclusive
                                                 : lo.min_exclusive;
                }
                if (A.bounds.has_max && B.bounds.has_max) {
                    const auto& hi = A.bounds.max >= B.bounds.max ? A.bounds : B.bounds;
                    m.bounds.has_max = true;
                    m.bounds.max = hi.max;
                    m.bounds.max_exclusive = A.bounds.max == B.bounds.max
                                                 ? A.bounds.max_exclusive && B.bounds.max_exclusive
                                                 : hi.max_exclusive;
                }
                break;
            }
            case K::string:
                if (A.format != B.format) m.format = JsonSchemaGrammar::Format::none;
                if (A.pattern != B.pattern) m.pattern = -1;
                m.min_length = std::min(A.min_length, B.min_length);
                m.max_length = std::max(A.max_length, B.max_length);
                break;
            case K::array:
                m.items = A.items == B.items ? A.items : merge(A.items, B.items, loose);
                m.min_items = std::min(A.min_items, B.min_items);
                m.max_items = std::max(A.max_items, B.max_items);
                break;
            case K::object: {
                m.properties.clear();
                for (const auto& p : A.properties) {
                    auto q = std::find_if(B.properties.begin(), B.properties.end(),
                                          [&](const auto& x) { return x.key == p.key; });
                    JsonSchemaGrammar::Property out = p;
                    if (q == B.properties.end()) {
                        out.required = false;
                    } else {
                        out.required = p.required && q->required;
                        if (q->node != p.node) out.node = merge(p.node, q->node, loose);
                    }
                    m.properties.push_back(std::move(out));
                }
                for (const auto& q : B.properties) {
                    if (std::none_of(A.properties.begin(), A.properties.end(),
                                     [&](const auto& x) { return x.key == q.key; })) {
                        JsonSchemaGrammar::Property out = q;
                        out.required = false;
                        m.properties.push_back(std::move(out));
                    }
                }
                if (m.properties.size() > JsonSchemaGrammar::kMaxProperties) {
                    throw SchemaError(fmt::format(
                        "alternatives with more than {} properties together are not supported",
                        JsonSchemaGrammar::kMaxProperties));
                }
                if (A.additional < 0 || B.additional < 0) {
                    m.additional = A.additional < 0 ? B.additional : A.additional;
                } else if (A.additional != B.additional) {
                    m.additional = merge(A.additional, B.additional, loose);
                }
                break;
            }
            default:
                break;
        }
        g->nodes_[static_cast<std::size_t>(slot)] = std::move(m);
        return slot;
    }

    // ---- strings and numbers ----------------------------------------------------------------

    int string(const Json& s, const std::string& ptr) {
        JsonSchemaGrammar::Node n;
        n.kind = JsonSchemaGrammar::Kind::string;
        if (auto it = s.find("minLength"); it != s.end()) {
            n.min_length = count(*it, ptr + "/minLength");
            if (n.min_length > kMaxMinLength) {
                unsupported.push_back(
                    fmt::format("minLength above {} (at {}/minLength)", kMaxMinLength, ptr));
                n.min_length = 0;
            }
        }
        if (auto it = s.find("maxLength"); it != s.end())
            n.max_length = count(*it, ptr + "/maxLength");
        if (n.min_length > n.max_length) {
            throw SchemaError(fmt::format("'{}': minLength {} is larger than maxLength {}", ptr,
                                          n.min_length, n.max_length));
        }
        // Formats with a regular language are enforced; others (uri, ipv4, ...) stay annotations.
        static const std::map<std::string, JsonSchemaGrammar::Format> formats = {
            {"email", JsonSchemaGrammar::Format::email},
            {"uuid", JsonSchemaGrammar::Format::uuid},
            {"date", JsonSchemaGrammar::Format::date},
            {"date-time", JsonSchemaGrammar::Format::date_time}};
        auto format = JsonSchemaGrammar::Format::none;
        if (auto it = s.find("format"); it != s.end() && it->is_string()) {
            if (auto f = formats.find(it->get<std::string>()); f != formats.end())
                format = f->second;
        }
        if (auto it = s.find("pattern"); it != s.end()) {
            if (!it->is_string())
                throw SchemaError(fmt::format("'{}/pattern' must be a string", ptr));
            if (pattern(n, it->get<std::string>(), format, ptr)) return add(std::move(n));
        }
        if (auto it = s.find("format"); it != s.end() && it->is_string()) {
            if (auto f = formats.find(it->get<std::string>()); f != formats.end()) {
                n.format = f->second;
                // Formatted values are ASCII: lengths are bytes. maxLength is enforced with the
                // format (a byte is taken only while the shortest completion still fits); a
                // minLength above the format's shortest value is not, except for the fixed
                // lengths of uuid and date.
                const std::string name = it->get<std::string>();
                const std::size_t shortest = format_completion(n.format, "").size();
                const bool fixed = n.format == JsonSchemaGrammar::Format::uuid ||
                                   n.format == JsonSchemaGrammar::Format::date;
                if (shortest > n.max_length || (fixed && n.min_length > shortest)) {
                    throw SchemaError(fmt::format(
                        "'{}': no {} string has a length between minLength and maxLength", ptr,
                        name));
                }
                if (n.min_length > shortest) {
                    unsupported.push_back(fmt::format(
                        "minLength above {} together with format '{}' (at {}/minLength)", shortest,
                        name, ptr));
                }
                n.min_length = 0;
            }
        }
        return add(std::move(n));
    }

    // A string's pattern (with its format, if any, as a second automaton intersected with it):
    // false when it cannot be enforced (recorded in `unsupported`; the format alone then is).
    bool pattern(JsonSchemaGrammar::Node& n, const std::string& text,
                 JsonSchemaGrammar::Format format, const std::string& ptr) {
        const std::string where = ptr + "/pattern";
        JsonSchemaGrammar::Pattern p;
        try {
            // The same expression (zod repeats its formats' patterns) is compiled once; a
            // schema's patterns together stay within a bound of memory and time.
            const auto key = std::make_pair(text, format);
            if (auto it = automata_.find(key); it != automata_.end()) {
                p.re = it->second;
            } else {
                if (automata_.size() >= kMaxPatterns) {
                    throw RegexError(
                        fmt::format("more than {} different patterns in one schema", kMaxPatterns),
                        true);
                }
                p.re = RegexAutomaton::compile(text);
                if (format != JsonSchemaGrammar::Format::none)
                    p.re = RegexAutomaton::intersect(*format_automaton(format), *p.re);
                pattern_cells_ += p.re->states() * p.re->classes();
                if (pattern_cells_ > kMaxPatternCells) {
                    throw RegexError("patterns whose automata together exceed the schema's bound",
                                     true);
                }
                automata_.emplace(key, p.re);
            }
            if (format != JsonSchemaGrammar::Format::none) {
                // The automaton leaves out email's part lengths; its whole length stays.
                if (format == JsonSchemaGrammar::Format::email)
                    n.max_length = std::min(n.max_length, kMaxEmailBytes);
            }
            if (n.min_length > 0 || n.max_length != SIZE_MAX) {
                const auto lkey = std::make_tuple(p.re.get(), n.min_length, n.max_length);
                if (auto it = lengths_.find(lkey); it != lengths_.end()) {
                    p.lengths = it->second;
                } else {
                    // Its table: a bit per state and length up to minLength + states.
                    const std::size_t bound = std::min(n.max_length, n.min_length + p.re->states());
                    pattern_cells_ += p.re->states() * (bound / 64 + 1) * 2;
                    if (pattern_cells_ > kMaxPatternCells) {
                        throw RegexError(
                            "patterns whose automata together exceed the schema's bound", true);
                    }
                    p.lengths = std::make_shared<RegexLengths>(*p.re, n.min_length, n.max_length);
                    lengths_.emplace(lkey, p.lengths);
                }
                if (!p.lengths->can_finish(p.re->start(), n.min_length, n.max_length)) {
                    throw SchemaError(fmt::format(
                        "'{}': no string matching the pattern has a length between minLength "
                        "and maxLength",
                        ptr));
                }
            }
        } catch (const RegexError& e) {
            if (!e.unsupported()) {
                throw SchemaError(fmt::format("'{}': {}{}", where, e.what(),
                                              format != JsonSchemaGrammar::Format::none
                                                  ? " (together with the format)"
                                                  : ""));
            }
            // A feature no automaton expresses is refused, never passed over: the client asked
            // for strings the server cannot guarantee. Size limits follow the rule of the other
            // unenforceable keywords (listed, or refused without a list).
            if (e.feature()) {
                throw SchemaError(
                    fmt::format("'{}': the pattern uses {}, which structured output "
                                "cannot enforce",
                                where, e.what()));
            }
            unsupported.push_back(fmt::format("pattern with {} (at {})", e.what(), where));
            return false;
        }
        n.format = JsonSchemaGrammar::Format::none;
        n.pattern = static_cast<int>(g->patterns_.size());
        g->patterns_.push_back(std::move(p));
        return true;
    }

    // Each enforced format as an ECMA-262 expression of the same language (format_status()),
    // but for email's limits on its parts (64 bytes before '@', 63 per domain label).
    static std::shared_ptr<const RegexAutomaton> format_automaton(JsonSchemaGrammar::Format f) {
        static constexpr const char* kDate =
            "(?:(?:\\d\\d[2468][048]|\\d\\d[13579][26]|\\d\\d0[48]|[02468][048]00|"
            "[13579][26]00)-02-29|\\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\\d|3[01])|"
            "(?:0[469]|11)-(?:0[1-9]|[12]\\d|30)|02-(?:0[1-9]|1\\d|2[0-8])))";
        switch (f) {
            case JsonSchemaGrammar::Format::uuid:
                return RegexAutomaton::compile(
                    "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-"
                    "[0-9a-fA-F]{12}$");
            case JsonSchemaGrammar::Format::date:
                return RegexAutomaton::compile(std::string("^") + kDate + "$");
            case JsonSchemaGrammar::Format::date_time:
                return RegexAutomaton::compile(
                    std::string("^") + kDate +
                    "T(?:[01]\\d|2[0-3]):[0-5]\\d:[0-5]\\d(?:\\.\\d{1,9})?Z$");
            case JsonSchemaGrammar::Format::email:
                return RegexAutomaton::compile(
                    "^(?:[A-Za-z0-9_+-]+\\.)*[A-Za-z0-9_+-]+@(?:[A-Za-z0-9](?:[A-Za-z0-9-]*"
                    "[A-Za-z0-9])?\\.)+[A-Za-z]{2,}$");
            case JsonSchemaGrammar::Format::none:
                break;
        }
        return RegexAutomaton::compile("");
    }

    static constexpr std::size_t kMaxEmailBytes = 254;
    static constexpr std::size_t kMaxPatterns = 128;
    static constexpr std::size_t kMaxPatternCells = 32'000'000;  // automaton transitions

    int numeric(const Json& s, const std::string& ptr, JsonSchemaGrammar::Kind kind) {
        JsonSchemaGrammar::Node n;
        n.kind = kind;
        auto number = [&](const char* key) -> std::optional<double> {
            auto it = s.find(key);
            if (it == s.end()) return std::nullopt;
            if (it->is_boolean()) return std::nullopt;  // draft 4's exclusive flags, below
            if (!it->is_number())
                throw SchemaError(fmt::format("'{}/{}' must be a number", ptr, key));
            return it->get<double>();
        };
        auto flag = [&](const char* key) {
            auto it = s.find(key);
            return it != s.end() && it->is_boolean() && it->get<bool>();
        };
        auto& b = n.bounds;
        if (auto v = number("minimum")) {
            b.has_min = true;
            b.min = *v;
            b.min_exclusive = flag("exclusiveMinimum");
        }
        if (auto v = number("exclusiveMinimum"); v && (!b.has_min || *v >= b.min)) {
            b.has_min = b.min_exclusive = true;
            b.min = *v;
        }
        if (auto v = number("maximum")) {
            b.has_max = true;
            b.max = *v;
            b.max_exclusive = flag("exclusiveMaximum");
        }
        if (auto v = number("exclusiveMaximum"); v && (!b.has_max || *v <= b.max)) {
            b.has_max = b.max_exclusive = true;
            b.max = *v;
        }
        const bool empty =
            b.has_min && b.has_max &&
            (b.min > b.max || (b.min == b.max && (b.min_exclusive || b.max_exclusive)) ||
             (kind == JsonSchemaGrammar::Kind::integer &&
              (b.min_exclusive ? std::floor(b.min) + 1 : std::ceil(b.min)) >
                  (b.max_exclusive ? std::ceil(b.max) - 1 : std::floor(b.max))));
        if (empty) {
            throw SchemaError(
                fmt::format("'{}': no {} lies between its minimum and maximum", ptr,
                            kind == JsonSchemaGrammar::Kind::integer ? "integer" : "number"));
        }
        return add(std::move(n));
    }

    static constexpr std::size_t kMaxMinLength = 4096;

    int object(const Json& s, const std::string& ptr) {
        JsonSchemaGrammar::Node n;
        n.kind = JsonSchemaGrammar::Kind::object;
        std::map<std::string, std::size_t> index;
        if (auto p = s.find("properties"); p != s.end()) {
            if (!p->is_object())
                throw SchemaError(fmt::format("'{}/properties' must be an object", ptr));
            if (p->size() > JsonSchemaGrammar::kMaxProperties) {
                throw SchemaError(
                    fmt::format("'{}/properties': at most {} properties per object are "
                                "supported",
                                ptr, JsonSchemaGrammar::kMaxProperties));
            }
            for (auto it = p->begin(); it != p->end(); ++it) {
                JsonSchemaGrammar::Property prop;
                const std::string quoted = dump(Json(it.key()));
                prop.key = quoted.substr(1, quoted.size() - 2);
                prop.node = compile(it.value(), ptr + "/properties/" + it.key());
                index[it.key()] = n.properties.size();
                n.properties.push_back(std::move(prop));
            }
        }
        if (auto r = s.find("required"); r != s.end()) {
            if (!r->is_array())
                throw SchemaError(fmt::format("'{}/required' must be an array", ptr));
            for (const Json& name : *r) {
                if (!name.is_string()) {
                    throw SchemaError(fmt::format("'{}/required' must list property names", ptr));
                }
                auto it = index.find(name.get<std::string>());
                if (it == index.end()) {
                    throw SchemaError(
                        fmt::format("'{}/required' names '{}', which is not in 'properties'", ptr,
                                    name.get<std::string>()));
                }
                n.properties[it->second].required = true;
            }
        }
        n.additional = any();
        if (auto a = s.find("additionalProperties"); a != s.end()) {
            if (a->is_boolean() && !a->get<bool>()) {
                n.additional = -1;
            } else {
                n.additional = compile(*a, ptr + "/additionalProperties");
            }
        }
        return add(std::move(n));
    }

    int array(const Json& s, const std::string& ptr) {
        JsonSchemaGrammar::Node n;
        n.kind = JsonSchemaGrammar::Kind::array;
        if (auto it = s.find("items"); it != s.end()) {
            if (it->is_array()) {
                unsupported.push_back(
                    fmt::format("items as a list (tuple validation) (at {}/items)", ptr));
                n.items = any();
            } else {
                n.items = compile(*it, ptr + "/items");
            }
        } else {
            n.items = any();
        }
        if (auto it = s.find("minItems"); it != s.end())
            n.min_items = count(*it, ptr + "/minItems");
        if (auto it = s.find("maxItems"); it != s.end())
            n.max_items = count(*it, ptr + "/maxItems");
        if (n.min_items > n.max_items) {
            throw SchemaError(fmt::format("'{}': minItems {} is larger than maxItems {}", ptr,
                                          n.min_items, n.max_items));
        }
        if (n.min_items > 1024) {
            throw SchemaError(fmt::format("'{}/minItems': at most 1024 is supported", ptr));
        }
        return add(std::move(n));
    }

    // Shortest valid text of every node. The recursive "any" nodes have short non-recursive
    // choices, so a node on the current path counts as unreachable.
    void minimal() {
        auto& m = g->minimal_;
        m.assign(g->nodes_.size(), std::string());
        std::vector<int> state(g->nodes_.size(), 0);  // 0 new, 1 in progress, 2 done
        const std::string none(1, '\0');
        std::function<const std::string&(int)> visit = [&](int i) -> const std::string& {
            const auto k = static_cast<std::size_t>(i);
            if (state[k] == 2) return m[k];
            if (state[k] == 1) return none;
            state[k] = 1;
            const JsonSchemaGrammar::Node& n = g->nodes_[k];
            std::string out;
            switch (n.kind) {
                case JsonSchemaGrammar::Kind::object: {
                    out = "{";
                    bool first = true;
                    for (const auto& p : n.properties) {
                        if (!p.required) continue;
                        out += (first ? "\"" : ",\"") + p.key + "\":" + visit(p.node);
                        first = false;
                    }
                    out += "}";
                    break;
                }
                case JsonSchemaGrammar::Kind::array:
                    out = "[";
                    for (std::size_t j = 0; j < n.min_items; ++j)
                        out += (j ? "," : "") + visit(n.items);
                    out += "]";
                    break;
                case JsonSchemaGrammar::Kind::string:
                    if (n.pattern >= 0) {
                        const auto& p = g->patterns_[static_cast<std::size_t>(n.pattern)];
                        out = "\"" + pattern_rest(p, p.re->start(), 0, n) + "\"";
                        break;
                    }
                    out = "\"" +
                          (n.format != JsonSchemaGrammar::Format::none
                               ? format_completion(n.format, "")
                               : std::string(n.min_length, 'a')) +
                          "\"";
                    break;
                case JsonSchemaGrammar::Kind::number:
                case JsonSchemaGrammar::Kind::integer:
                    out = n.bounds.any()
                              ? bounded_completion(n, "", JsonRecognizer::kMaxNumberLength)
                              : "0";
                    break;
                case JsonSchemaGrammar::Kind::literal:
                    out = *std::min_element(
                        n.literals.begin(), n.literals.end(),
                        [](const auto& a, const auto& b) { return a.size() < b.size(); });
                    break;
                case JsonSchemaGrammar::Kind::types: {
                    bool have = false;
                    for (int alt : {n.on_number, n.on_null, n.on_bool, n.on_string, n.on_object,
                                    n.on_array}) {
                        if (alt < 0) continue;
                        const std::string& t = visit(alt);
                        if (t == none) continue;
                        if (!have || t.size() < out.size()) out = t;
                        have = true;
                    }
                    if (!have) out = none;
                    break;
                }
            }
            state[k] = 2;
            m[k] = std::move(out);
            return m[k];
        };
        for (std::size_t i = 0; i < g->nodes_.size(); ++i) visit(static_cast<int>(i));
    }

private:
    std::map<std::pair<std::string, JsonSchemaGrammar::Format>,
             std::shared_ptr<const RegexAutomaton>>
        automata_;
    std::size_t pattern_cells_ = 0;
    std::map<std::tuple<const RegexAutomaton*, std::size_t, std::size_t>,
             std::shared_ptr<const RegexLengths>>
        lengths_;
    int any_ = -1;
    std::map<std::string, int> refs_;            // $ref target -> node
    std::map<std::pair<int, int>, int> merges_;  // merged alternatives -> node
};

std::shared_ptr<const JsonSchemaGrammar> JsonSchemaGrammar::compile(
    const Json& schema, std::vector<std::string>* ignored) {
    SchemaCompiler c;
    c.root = &schema;
    c.g->root_ = c.compile(schema, "");
    if (ignored) {
        ignored->insert(ignored->end(), c.unsupported.begin(), c.unsupported.end());
    } else if (!c.unsupported.empty()) {
        std::string list;
        for (std::size_t i = 0; i < c.unsupported.size(); ++i)
            list += (i ? ", " : "") + c.unsupported[i];
        throw SchemaError("the JSON schema uses keywords this server cannot enforce: " + list);
    }
    c.minimal();
    return c.g;
}

std::shared_ptr<const JsonSchemaGrammar> JsonSchemaGrammar::any_object() {
    SchemaCompiler c;
    c.g->root_ = c.any_object_node();
    c.minimal();
    return c.g;
}

std::shared_ptr<const JsonSchemaGrammar> JsonSchemaGrammar::text(
    std::shared_ptr<const RegexAutomaton> re) {
    if (!re) throw SchemaError("a text grammar needs an automaton");
    auto g = std::make_shared<JsonSchemaGrammar>();
    g->text_ = std::move(re);
    return g;
}

// ---- recogniser -------------------------------------------------------------------------------

JsonRecognizer::JsonRecognizer(const JsonSchemaGrammar& grammar) : grammar_(&grammar) {}

bool JsonRecognizer::whitespace() { return ++whitespace_run_ <= kMaxWhitespaceRun; }

// ---- string formats -------------------------------------------------------------------------
// Each format is a regular language over ASCII (docs/API.md, "Structured output"): a formatted
// string is read byte by byte and accepted only while some value of the format starts with it.

namespace {

using Format = JsonSchemaGrammar::Format;

constexpr std::size_t kDateLength = 10;  // YYYY-MM-DD
constexpr std::size_t kTimeEnd = 19;     // YYYY-MM-DDThh:mm:ss
constexpr std::size_t kMaxFractionDigits = 9;
constexpr std::size_t kMaxEmailLength = 254;  // RFC 5321's path limit
constexpr std::size_t kMaxEmailLocal = 64;
constexpr std::size_t kMaxEmailLabel = 63;

int digit(char c) { return c - '0'; }

int days_in_month(int year, int month) {
    static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (month == 2 && (year % 4 == 0 && (year % 100 != 0 || year % 400 == 0))) return 29;
    return kDays[month - 1];
}

// Byte `i` of a date (YYYY-MM-DD, a real calendar day: month 01-12, day 01 to the month's last,
// leap years counted), given the bytes before it.
bool date_byte_ok(std::string_view s, std::size_t i) {
    const char c = s[i];
    if (i == 4 || i == 7) return c == '-';
    if (!is_digit(c)) return false;
    if (i < 4) return true;
    if (i == 5) return c <= '1';
    if (i == 6) return s[5] == '0' ? c >= '1' : c <= '2';
    const int year = digit(s[0]) * 1000 + digit(s[1]) * 100 + digit(s[2]) * 10 + digit(s[3]);
    const int last = days_in_month(year, digit(s[5]) * 10 + digit(s[6]));
    if (i == 8) return digit(c) * 10 <= last;
    const int day = digit(s[8]) * 10 + digit(c);
    return day >= 1 && day <= last;
}

// Byte `i` (10 <= i < 19) of "THH:MM:SS" after a date: hours 00-23, minutes and seconds 00-59.
bool time_byte_ok(std::string_view s, std::size_t i) {
    const char c = s[i];
    switch (i) {
        case 10:
            return c == 'T';
        case 13:
        case 16:
            return c == ':';
        case 11:
            return c >= '0' && c <= '2';
        case 12:
            return is_digit(c) && (s[11] != '2' || c <= '3');
        case 14:
        case 17:
            return c >= '0' && c <= '5';
        default:
            return is_digit(c);
    }
}

// The smallest valid bytes of a date / time from byte `from` up to byte `to`.
std::string fill_date_time(std::string_view s, std::size_t from, std::size_t to) {
    std::string out;
    for (std::size_t i = from; i < to; ++i) {
        char c = '0';
        if (i == 4 || i == 7) c = '-';
        if (i == 10) c = 'T';
        if (i == 13 || i == 16) c = ':';
        // Month and day are 01 at least: "0" then "1", or "0" after a tens digit 1-3.
        if (i == 6 || i == 9) c = (i < from + 1 ? s[i - 1] : out.back()) == '0' ? '1' : '0';
        out += c;
    }
    return out;
}

// uuid: 8-4-4-4-12 hex digits as RFC 9562 writes them (a version 1-8, the variant 8, 9, a or b),
// which every validator accepts (zod's .uuid() checks version and variant).
constexpr std::string_view kUuidShape = "xxxxxxxx-xxxx-Vxxx-Rxxx-xxxxxxxxxxxx";

bool uuid_byte_ok(char shape, char c) {
    switch (shape) {
        case '-':
            return c == '-';
        case 'V':
            return c >= '1' && c <= '8';
        case 'R':
            return c == '8' || c == '9' || c == 'a' || c == 'b' || c == 'A' || c == 'B';
        default:
            return is_hex(c);
    }
}

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_alnum(char c) { return is_alpha(c) || is_digit(c); }

// email: a practical subset of RFC 5322's addr-spec that common validators (zod, ajv-formats)
// accept: a local part of letters, digits, '_', '+', '-' in dot-separated runs, '@', then at
// least two domain labels (letters, digits, inner '-'; at most 63 bytes) of which the last has
// only letters and at least two of them. At most 64 bytes before '@', 254 in all.
struct EmailScan {
    bool ok = true;
    bool domain = false;     // after '@'
    std::size_t local = 0;   // bytes before '@'
    std::size_t labels = 0;  // domain labels ended by a dot
    std::size_t label = 0;   // bytes of the current part (local run or domain label)
    bool letters = true;     // the current domain label has only letters
    char last = 0;           // the last byte ('.', '@', '-' or other)
};

EmailScan scan_email(std::string_view s) {
    EmailScan e;
    for (char c : s) {
        const bool part_start = e.last == 0 || e.last == '.' || e.last == '@';
        if (!e.domain) {
            if (c == '@' || c == '.') {
                if (part_start) return e.ok = false, e;
                e.domain = c == '@';
                // After a dot one more byte must fit.
                if (c == '.' && ++e.local >= kMaxEmailLocal) return e.ok = false, e;
            } else if (!(is_alnum(c) || c == '_' || c == '+' || c == '-')) {
                return e.ok = false, e;
            } else if (++e.local > kMaxEmailLocal) {
                return e.ok = false, e;
            }
            e.last = c == '@' || c == '.' ? c : 'a';
            continue;
        }
        if (c == '.') {
            if (part_start || e.last == '-') return e.ok = false, e;
            ++e.labels;
            e.label = 0;
            e.letters = true;
            e.last = '.';
        } else if (is_alnum(c) || c == '-') {
            if (c == '-' && part_start) return e.ok = false, e;
            // A label ends with a letter or digit, so after '-' one more byte must fit.
            if (++e.label > (c == '-' ? kMaxEmailLabel - 1 : kMaxEmailLabel))
                return e.ok = false, e;
            e.letters = e.letters && is_alpha(c);
            e.last = c == '-' ? '-' : 'a';
        } else {
            return e.ok = false, e;
        }
    }
    return e;
}

std::string email_completion(const EmailScan& e) {
    if (!e.domain) return e.last == 'a' ? "@a.aa" : "a@a.aa";
    if (e.last == '@') return "a.aa";
    if (e.last == '.') return "aa";  // a dot in the domain: a last label follows
    if (e.last == '-') return "a.aa";
    if (e.labels > 0 && e.letters) return e.label >= 2 ? "" : "a";
    return ".aa";
}

}  // namespace

int format_status(JsonSchemaGrammar::Format format, std::string_view s) {
    switch (format) {
        case Format::none:
            return 1;
        case Format::uuid:
            if (s.size() > kUuidShape.size()) return -1;
            for (std::size_t i = 0; i < s.size(); ++i) {
                if (!uuid_byte_ok(kUuidShape[i], s[i])) return -1;
            }
            return s.size() == kUuidShape.size() ? 1 : 0;
        case Format::date:
            if (s.size() > kDateLength) return -1;
            for (std::size_t i = 0; i < s.size(); ++i) {
                if (!date_byte_ok(s, i)) return -1;
            }
            return s.size() == kDateLength ? 1 : 0;
        case Format::date_time: {
            // date "T" time, seconds required, an optional fraction of 1-9 digits, then "Z"
            // (UTC; numeric offsets are left out, docs/API.md says why).
            for (std::size_t i = 0; i < s.size() && i < kTimeEnd; ++i) {
                if (i < kDateLength ? !date_byte_ok(s, i) : !time_byte_ok(s, i)) return -1;
            }
            if (s.size() <= kTimeEnd) return 0;
            std::size_t i = kTimeEnd;
            if (s[i] == '.') {
                std::size_t digits = 0;
                while (++i < s.size() && is_digit(s[i])) {
                    if (++digits > kMaxFractionDigits) return -1;
                }
                if (i == s.size()) return 0;
                if (digits == 0) return -1;
            }
            if (s[i] != 'Z') return -1;
            return i + 1 == s.size() ? 1 : -1;
        }
        case Format::email: {
            const EmailScan e = scan_email(s);
            if (!e.ok || s.size() + email_completion(e).size() > kMaxEmailLength) return -1;
            return email_completion(e).empty() ? 1 : 0;
        }
    }
    return -1;
}

std::string format_completion(JsonSchemaGrammar::Format format, std::string_view s) {
    switch (format) {
        case Format::none:
            return "";
        case Format::uuid: {
            std::string out;
            for (std::size_t i = s.size(); i < kUuidShape.size(); ++i) {
                const char shape = kUuidShape[i];
                out += shape == '-' ? '-' : shape == 'V' ? '4' : shape == 'R' ? '8' : '0';
            }
            return out;
        }
        case Format::date:
            return fill_date_time(s, s.size(), kDateLength);
        case Format::date_time:
            if (s.size() < kTimeEnd) return fill_date_time(s, s.size(), kTimeEnd) + "Z";
            if (s.size() == kTimeEnd) return "Z";
            return s.back() == '.' ? "0Z" : s.back() == 'Z' ? "" : "Z";
        case Format::email:
            return email_completion(scan_email(s));
    }
    return "";
}

bool JsonRecognizer::feed(std::string_view text) {
    for (char c : text) {
        if (!feed(c)) return false;
    }
    return true;
}

bool JsonRecognizer::string_char(StringState& s, char c, bool& closed) {
    const auto b = static_cast<unsigned char>(c);
    closed = false;
    if (s.hex > 0) {
        if (!is_hex(c)) return false;
        const char d = static_cast<char>(c | 0x20);  // lower case
        if (s.hex == 4) {
            if (s.surrogate == 5) {
                if (d != 'd') return false;
                s.surrogate = 6;
            } else if (d == 'd') {
                s.surrogate = 1;
            }
        } else if (s.hex == 3) {
            const bool high = d >= '8' && d <= 'b';
            const bool low = d >= 'c' && d <= 'f';
            if (s.surrogate == 6) {
                if (!low) return false;
                s.surrogate = 0;
            } else if (s.surrogate == 1) {
                if (low) return false;  // a low surrogate without its high half
                s.surrogate = high ? 2 : 0;
            }
        }
        if (--s.hex == 0 && s.surrogate == 2) s.surrogate = 3;
        return true;
    }
    if (s.escape) {
        s.escape = 0;
        if (s.surrogate == 4) {
            if (c != 'u') return false;
            s.hex = 4;
            s.surrogate = 5;
            return true;
        }
        if (c == 'u') {
            s.hex = 4;
            return true;
        }
        return c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' ||
               c == 't';
    }
    if (s.surrogate == 3) {  // a high surrogate: its low half must follow
        if (c != '\\') return false;
        s.escape = 1;
        s.surrogate = 4;
        return true;
    }
    if (s.utf8_need > 0) {
        unsigned lo = 0x80, hi = 0xBF;
        switch (s.utf8_lead) {  // the first continuation of these leads is narrower (RFC 3629)
            case 0xE0:
                lo = 0xA0;
                break;
            case 0xED:
                hi = 0x9F;
                break;
            case 0xF0:
                lo = 0x90;
                break;
            case 0xF4:
                hi = 0x8F;
                break;
            default:
                break;
        }
        if (b < lo || b > hi) return false;
        --s.utf8_need;
        s.utf8_lead = 0;
        return true;
    }
    if (b >= 0x80) {
        if (b >= 0xC2 && b <= 0xDF) {
            s.utf8_need = 1;
        } else if (b >= 0xE0 && b <= 0xEF) {
            s.utf8_need = 2;
        } else if (b >= 0xF0 && b <= 0xF4) {
            s.utf8_need = 3;
        } else {
            return false;
        }
        s.utf8_lead = b;
        return true;
    }
    if (b < 0x20) return false;
    if (c == '\\') {
        s.escape = 1;
        return true;
    }
    if (c == '"') closed = true;
    return true;
}

std::string JsonRecognizer::string_tail(const StringState& s) {
    std::string out;
    if (s.escape) {
        out += s.surrogate == 4 ? "udc00" : "n";
    } else if (s.hex > 0) {
        if (s.surrogate == 5) {
            out += "dc00";
        } else if (s.surrogate == 6) {
            out += "c" + std::string(s.hex - 1u, '0');
        } else {
            out.append(s.hex, '0');
            if (s.surrogate == 2) out += "\\udc00";
        }
    } else if (s.surrogate == 3) {
        out += "\\udc00";
    }
    for (int i = 0; i < s.utf8_need; ++i) {
        unsigned char b = 0x80;
        if (i == 0 && s.utf8_lead == 0xE0) b = 0xA0;
        if (i == 0 && s.utf8_lead == 0xF0) b = 0x90;
        out += static_cast<char>(b);
    }
    return out + "\"";
}

namespace {

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    return (c | 0x20) - 'a' + 10;
}

// The code points a high surrogate's pair can give, for the low halves in [lo, hi].
CodeRange supplementary(std::uint32_t high, std::uint32_t lo, std::uint32_t hi) {
    const char32_t base = 0x10000 + ((high - 0xD800) << 10);
    return {base + (std::max<std::uint32_t>(lo, 0xDC00) - 0xDC00),
            base + (std::min<std::uint32_t>(hi, 0xDFFF) - 0xDC00)};
}

// The values a \u escape with `left` of its 4 digits still to come can have.
CodeRange hex_span(std::uint32_t bits, int left) {
    const std::uint32_t lo = bits << (4 * left);
    return {lo, lo | ((1u << (4 * left)) - 1)};
}

}  // namespace

// A byte of a string with a pattern: decoded into code points (UTF-8 and escapes), each stepped
// through the automaton. A byte inside a code point is taken while some code point it can still
// become keeps a matching string within reach.
bool JsonRecognizer::pattern_char(Frame& f, const JsonSchemaGrammar::Node& n, char c) {
    const JsonSchemaGrammar::Pattern& p = grammar_->pattern(n.pattern);
    const StringState before = f.str;
    bool closed = false;
    if (!string_char(f.str, c, closed)) return false;
    if (closed) {
        if (!p.re->accepting(f.re_state) || f.count < n.min_length) return false;
        stack_.pop_back();
        value_done();
        return true;
    }
    const auto b = static_cast<unsigned char>(c);
    std::int64_t cp = -1;  // a code point completed by this byte
    std::vector<CodeRange> pending;
    if (before.hex > 0) {
        f.cp_bits = f.cp_bits << 4 | static_cast<std::uint32_t>(hex_value(c));
        if (f.str.hex == 0) {
            if (f.str.surrogate == 3) {  // a high surrogate: its low half follows
                f.high = f.cp_bits;
                pending.push_back(supplementary(f.high, 0xDC00, 0xDFFF));
            } else if (f.high != 0) {
                cp = supplementary(f.high, f.cp_bits, f.cp_bits).first;
                f.high = 0;
            } else {
                cp = f.cp_bits;
            }
        } else if (f.high != 0) {
            const CodeRange low = hex_span(f.cp_bits, f.str.hex);
            pending.push_back(supplementary(f.high, low.first, low.second));
        } else {
            const CodeRange r = hex_span(f.cp_bits, f.str.hex);
            pending.push_back(r);  // its surrogates never step
            if (r.first <= 0xDBFF && r.second >= 0xD800) {
                pending.push_back(
                    {supplementary(std::max<std::uint32_t>(r.first, 0xD800), 0xDC00, 0xDFFF).first,
                     supplementary(std::min<std::uint32_t>(r.second, 0xDBFF), 0xDC00, 0xDFFF)
                         .second});
            }
        }
    } else if (before.escape) {
        f.cp_bits = 0;
        if (c == 'u') {
            pending.push_back(f.high != 0 ? supplementary(f.high, 0xDC00, 0xDFFF)
                                          : CodeRange{0, RegexAutomaton::kMaxCodePoint});
        } else {
            switch (c) {
                case 'b':
                    cp = '\b';
                    break;
                case 'f':
                    cp = '\f';
                    break;
                case 'n':
                    cp = '\n';
                    break;
                case 'r':
                    cp = '\r';
                    break;
                case 't':
                    cp = '\t';
                    break;
                default:
                    cp = b;  // " \\ /
                    break;
            }
        }
    } else if (before.surrogate == 3) {  // the backslash of a low half
        pending.push_back(supplementary(f.high, 0xDC00, 0xDFFF));
    } else if (before.utf8_need > 0) {
        f.cp_bits = f.cp_bits << 6 | (b & 0x3Fu);
        if (f.str.utf8_need == 0) {
            cp = f.cp_bits;
        } else {
            const CodeRange r = {
                f.cp_bits << (6 * f.str.utf8_need),
                (f.cp_bits << (6 * f.str.utf8_need)) | ((1u << (6 * f.str.utf8_need)) - 1)};
            pending.push_back(
                {r.first, std::min<char32_t>(r.second, RegexAutomaton::kMaxCodePoint)});
        }
    } else if (b >= 0x80) {
        f.utf8_length = static_cast<std::uint8_t>(f.str.utf8_need + 1);
        f.cp_bits = b & (f.utf8_length == 2 ? 0x1Fu : f.utf8_length == 3 ? 0x0Fu : 0x07u);
        // The shortest form only: at least U+0080, U+0800, U+10000 for 2, 3, 4 bytes.
        const char32_t least = f.utf8_length == 2 ? 0x80 : f.utf8_length == 3 ? 0x800 : 0x10000;
        const char32_t lo = f.cp_bits << (6 * f.str.utf8_need);
        const char32_t hi = lo | ((1u << (6 * f.str.utf8_need)) - 1);
        pending.push_back(
            {std::max(lo, least), std::min<char32_t>(hi, RegexAutomaton::kMaxCodePoint)});
    } else if (c == '\\') {
        // \u can write any code point.
        pending.push_back({0, RegexAutomaton::kMaxCodePoint});
    } else {
        cp = b;
    }
    if (cp >= 0) {
        const int next = p.re->step(f.re_state, static_cast<char32_t>(cp));
        if (next < 0 || !pattern_can_finish(p, next, f.count + 1, n)) return false;
        f.re_state = next;
        ++f.count;
        return true;
    }
    for (const CodeRange& r : pending) {
        if (first_viable(p, f.re_state, f.count, r, n) >= 0) return true;
    }
    return false;
}

// The rest of a string with a pattern: the code point under way finished with the first value
// that stays viable, then pattern_rest(), then the closing quote.
std::string JsonRecognizer::pattern_completion(const Frame& f) const {
    const JsonSchemaGrammar::Node& n = grammar_->node(f.node);
    const JsonSchemaGrammar::Pattern& p = grammar_->pattern(n.pattern);
    const StringState& s = f.str;
    std::string out;
    int state = f.re_state;
    std::size_t count = f.count;
    auto finish = [&](CodeRange r) {
        int to = -1;
        const std::int64_t cp = first_viable(p, state, count, r, n, &to);
        if (cp < 0) return std::int64_t{-1};
        state = to;
        ++count;
        return cp;
    };
    auto pair_of = [](std::uint32_t cp) {
        return std::make_pair(0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF));
    };
    if (s.utf8_need > 0) {
        const char32_t lo = f.cp_bits << (6 * s.utf8_need);
        const char32_t hi = lo | ((1u << (6 * s.utf8_need)) - 1);
        const char32_t least = f.utf8_length == 2 ? 0x80 : f.utf8_length == 3 ? 0x800 : 0x10000;
        const std::int64_t cp =
            finish({std::max(lo, least), std::min<char32_t>(hi, RegexAutomaton::kMaxCodePoint)});
        if (cp >= 0) {
            for (int k = s.utf8_need - 1; k >= 0; --k)
                out += static_cast<char>(0x80 | ((cp >> (6 * k)) & 0x3F));
        }
    } else if (f.high != 0) {
        // In a surrogate pair: the low half, from what of it is written.
        std::int64_t cp = -1;
        if (s.hex > 0 && s.surrogate != 5) {
            const CodeRange low = hex_span(f.cp_bits, s.hex);
            cp = finish(supplementary(f.high, low.first, low.second));
        } else {
            cp = finish(supplementary(f.high, 0xDC00, 0xDFFF));
        }
        if (cp >= 0) {
            const std::string low = hex4(pair_of(static_cast<std::uint32_t>(cp)).second);
            if (s.surrogate == 3)
                out += "\\u" + low;
            else if (s.surrogate == 4)
                out += "u" + low;
            else
                out += low.substr(4 - s.hex);
        }
    } else if (s.hex > 0) {
        const CodeRange r = hex_span(f.cp_bits, s.hex);
        std::int64_t cp = finish(r);
        if (cp < 0 && r.first <= 0xDBFF && r.second >= 0xD800) {
            cp = finish(
                {supplementary(std::max<std::uint32_t>(r.first, 0xD800), 0xDC00, 0xDFFF).first,
                 supplementary(std::min<std::uint32_t>(r.second, 0xDBFF), 0xDC00, 0xDFFF).second});
        }
        if (cp >= 0x10000) {
            const auto [hi, lo] = pair_of(static_cast<std::uint32_t>(cp));
            out += hex4(hi).substr(4 - s.hex) + "\\u" + hex4(lo);
        } else if (cp >= 0) {
            out += hex4(static_cast<std::uint32_t>(cp)).substr(4 - s.hex);
        }
    } else if (s.escape) {
        const std::int64_t cp = finish({0, RegexAutomaton::kMaxCodePoint});
        if (cp >= 0x10000) {
            const auto [hi, lo] = pair_of(static_cast<std::uint32_t>(cp));
            out += "u" + hex4(hi) + "\\u" + hex4(lo);
        } else if (cp >= 0) {
            out += "u" + hex4(static_cast<std::uint32_t>(cp));
        }
    }
    return out + pattern_rest(p, state, count, n) + "\"";
}

bool JsonRecognizer::start_value(int index, char c) {
    const JsonSchemaGrammar::Node& n = grammar_->node(index);
    switch (n.kind) {
        case JsonSchemaGrammar::Kind::types: {
            int alt = -1;
            if (c == '{')
                alt = n.on_object;
            else if (c == '[')
                alt = n.on_array;
            else if (c == '"')
                alt = n.on_string;
            else if (c == '-' || is_digit(c))
                alt = n.on_number;
            else if (c == 't' || c == 'f')
                alt = n.on_bool;
            else if (c == 'n')
                alt = n.on_null;
            if (alt < 0) return false;
            return start_value(alt, c);
        }
        case JsonSchemaGrammar::Kind::object: {
            if (c != '{' || stack_.size() >= kMaxDepth) return false;
            Frame f;
            f.node = index;
            f.state = obj_start;
            stack_.push_back(std::move(f));
            return true;
        }
        case JsonSchemaGrammar::Kind::array: {
            if (c != '[' || stack_.size() >= kMaxDepth) return false;
            Frame f;
            f.node = index;
            f.state = arr_start;
            stack_.push_back(std::move(f));
            return true;
        }
        case JsonSchemaGrammar::Kind::string: {
            if (c != '"') return false;
            Frame f;
            f.node = index;
            f.state = str_body;
            if (n.pattern >= 0) f.re_state = grammar_->pattern(n.pattern).re->start();
            stack_.push_back(std::move(f));
            return true;
        }
        case JsonSchemaGrammar::Kind::number:
        case JsonSchemaGrammar::Kind::integer: {
            Frame f;
            f.node = index;
            f.count = 1;
            if (c == '-')
                f.state = num_minus;
            else if (c == '0')
                f.state = num_zero;
            else if (is_digit(c))
                f.state = num_int;
            else
                return false;
            f.text = c;
            if (n.bounds.any() &&
                !bounded_prefix_ok(n, f.text, static_cast<std::size_t>(kMaxNumberLength)))
                return false;
            stack_.push_back(std::move(f));
            return true;
        }
        case JsonSchemaGrammar::Kind::literal: {
            Frame f;
            f.node = index;
            f.state = lit_body;
            stack_.push_back(std::move(f));
            bool ended = false;
            if (!literal_char(stack_.back(), c, ended)) return false;
            if (ended) return false;  // a literal's first byte cannot end it
            if (literal_exact(stack_.back()) &&
                std::none_of(n.literals.begin(), n.literals.end(),
                             [&](const std::string& l) { return l.size() > 1 && l[0] == c; })) {
                stack_.pop_back();
                value_done();
            }
            return true;
        }
    }
    return false;
}

void JsonRecognizer::value_done() {
    if (stack_.empty()) {
        root_done_ = true;
        return;
    }
    Frame& p = stack_.back();
    if (p.state == obj_in_value) {
        p.state = obj_after_value;
    } else if (p.state == arr_in_value) {
        ++p.count;
        p.state = arr_after_value;
    }
}

bool JsonRecognizer::literal_exact(const Frame& f) const {
    const auto& lits = grammar_->node(f.node).literals;
    return std::find(lits.begin(), lits.end(), f.text) != lits.end();
}

// Appends `c` when some literal continues with it; otherwise `ended` says whether the text so
// far is a whole literal (then `c` belongs to the enclosing value).
bool JsonRecognizer::literal_char(Frame& f, char c, bool& ended) {
    const auto& lits = grammar_->node(f.node).literals;
    ended = false;
    const std::size_t n = f.text.size();
    for (const std::string& l : lits) {
        if (l.size() > n && l[n] == c && l.compare(0, n, f.text) == 0) {
            f.text += c;
            return true;
        }
    }
    if (literal_exact(f)) {
        ended = true;
        return true;
    }
    return false;
}

bool JsonRecognizer::number_can_end(const Frame& f) const {
    return f.state == num_zero || f.state == num_int || f.state == num_frac ||
           f.state == num_exp_digits;
}

bool JsonRecognizer::number_char(Frame& f, char c, bool& ended) const {
    ended = false;
    const JsonSchemaGrammar::Node& node = grammar_->node(f.node);
    const bool integer = node.kind == JsonSchemaGrammar::Kind::integer;
    const bool bounded = node.bounds.any();
    State next = f.state;
    bool ok = true;
    switch (f.state) {
        case num_minus:
            next = c == '0' ? num_zero : num_int;
            ok = is_digit(c);
            break;
        case num_zero:
        case num_int:
            if (f.state == num_int && is_digit(c))
                next = num_int;
            else if (c == '.' && !integer)
                next = num_dot;
            else if ((c == 'e' || c == 'E') && !integer)
                next = num_exp;
            else
                ok = false;
            break;
        case num_dot:
            next = num_frac;
            ok = is_digit(c);
            break;
        case num_frac:
            if (is_digit(c))
                next = num_frac;
            else if (c == 'e' || c == 'E')
                next = num_exp;
            else
                ok = false;
            break;
        case num_exp:
            if (c == '+' || c == '-')
                next = num_exp_sign;
            else if (is_digit(c))
                next = num_exp_digits;
            else
                ok = false;
            break;
        case num_exp_sign:
            next = num_exp_digits;
            ok = is_digit(c);
            break;
        case num_exp_digits:
            next = num_exp_digits;
            ok = is_digit(c);
            break;
        default:
            ok = false;
            break;
    }
    // Exponents have at most kMaxExponentDigits digits, so every number fits a double (parsers
    // such as nlohmann::json refuse 1e400). A number frame keeps the count in str.hex, which
    // only strings use otherwise.
    if (ok && next == num_exp_digits && ++f.str.hex > kMaxExponentDigits) return false;
    if (ok) {
        if (++f.count > static_cast<std::uint32_t>(kMaxNumberLength)) return false;
        f.state = next;
        if (bounded) {
            // Bounded numbers are written without an exponent.
            if (next == num_exp || next == num_exp_sign || next == num_exp_digits) return false;
            f.text += c;
            return bounded_prefix_ok(node, f.text, static_cast<std::size_t>(kMaxNumberLength));
        }
        return true;
    }
    if (number_can_end(f) && (!bounded || bounded_value_ok(node, f.text))) {
        ended = true;
        return true;
    }
    return false;
}

bool JsonRecognizer::object_char(char c) {
    Frame& f = stack_.back();
    const JsonSchemaGrammar::Node& n = grammar_->node(f.node);
    auto required_done = [&] {
        for (std::size_t i = 0; i < n.properties.size(); ++i) {
            if (n.properties[i].required && !(f.seen >> i & 1)) return false;
        }
        return true;
    };
    auto more_keys = [&] {
        if (n.additional >= 0) return true;
        for (std::size_t i = 0; i < n.properties.size(); ++i) {
            if (!(f.seen >> i & 1)) return true;
        }
        return false;
    };
    switch (f.state) {
        case obj_start:
        case obj_expect_key:
            if (is_ws(c)) return whitespace();
            if (c == '}' && f.state == obj_start) {
                if (!required_done()) return false;
                stack_.pop_back();
                value_done();
                return true;
            }
            if (c != '"') return false;
            if (f.state == obj_start && !more_keys()) return false;
            f.state = obj_key;
            f.text.clear();
            f.str = {};
            return true;
        case obj_key: {
            bool closed = false;
            StringState s = f.str;
            if (!string_char(s, c, closed)) return false;
            if (closed) {
                for (std::size_t i = 0; i < n.properties.size(); ++i) {
                    if (n.properties[i].key == f.text) {
                        if (f.seen >> i & 1) return false;  // a key given twice
                        f.seen |= std::uint64_t{1} << i;
                        f.value_node = n.properties[i].node;
                        f.state = obj_colon;
                        return true;
                    }
                }
                if (n.additional < 0) return false;
                f.value_node = n.additional;
                f.state = obj_colon;
                return true;
            }
            f.str = s;
            f.text += c;
            if (n.additional < 0) {
                // Only names of properties not given yet can follow.
                for (std::size_t i = 0; i < n.properties.size(); ++i) {
                    if (!(f.seen >> i & 1) &&
                        n.properties[i].key.compare(0, f.text.size(), f.text) == 0 &&
                        n.properties[i].key.size() >= f.text.size()) {
                        return true;
                    }
                }
                return false;
            }
            return true;
        }
        case obj_colon:
            if (is_ws(c)) return whitespace();
            if (c != ':') return false;
            f.state = obj_value;
            return true;
        case obj_value: {
            if (is_ws(c)) return whitespace();
            f.state = obj_in_value;
            const int v = f.value_node;
            return start_value(v, c);  // may push: `f` is not used after this
        }
        case obj_after_value:
            if (is_ws(c)) return whitespace();
            if (c == ',') {
                if (!more_keys()) return false;
                f.state = obj_expect_key;
                return true;
            }
            if (c == '}') {
                if (!required_done()) return false;
                stack_.pop_back();
                value_done();
                return true;
            }
            return false;
        default:
            return false;
    }
}

bool JsonRecognizer::array_char(char c) {
    Frame& f = stack_.back();
    const JsonSchemaGrammar::Node& n = grammar_->node(f.node);
    switch (f.state) {
        case arr_start:
        case arr_expect_value: {
            if (is_ws(c)) return whitespace();
            if (c == ']' && f.state == arr_start) {
                if (n.min_items > 0) return false;
                stack_.pop_back();
                value_done();
                return true;
            }
            if (f.count >= n.max_items) return false;
            f.state = arr_in_value;
            return start_value(n.items, c);
        }
        case arr_after_value:
            if (is_ws(c)) return whitespace();
            if (c == ',') {
                if (f.count >= n.max_items) return false;
                f.state = arr_expect_value;
                return true;
            }
            if (c == ']') {
                if (f.count < n.min_items) return false;
                stack_.pop_back();
                value_done();
                return true;
            }
            return false;
        default:
            return false;
    }
}

// ---- text grammars ----------------------------------------------------------------------------
// Raw UTF-8 (no quotes, no escapes) stepped through the automaton a code point at a time. A byte
// that starts or continues a character is accepted while some character it can still become
// steps the automaton (never a surrogate, an overlong form or a code point past U+10FFFF).

namespace {

// The least non-surrogate code point of `re`'s classes in [lo, hi] that steps from `state`:
// with `shortest`, the one whose target is nearest acceptance. -1 when there is none.
std::int64_t text_viable(const RegexAutomaton& re, int state, char32_t lo, char32_t hi,
                         bool shortest, int* to) {
    std::int64_t best = -1;
    std::uint32_t best_len = UINT32_MAX;
    for (std::size_t c = 0; c < re.classes(); ++c) {
        if (re.class_last(c) < lo) continue;
        if (re.class_first(c) > hi) break;
        char32_t x = std::max(lo, re.class_first(c));
        const char32_t last = std::min(hi, re.class_last(c));
        if (x >= 0xD800 && x <= 0xDFFF) x = 0xE000;
        if (x > last) continue;
        const int t = re.target(state, c);
        if (t < 0) continue;
        if (!shortest) {
            if (to) *to = t;
            return x;
        }
        if (re.shortest(t) < best_len) {
            best_len = re.shortest(t);
            best = x;
            if (to) *to = t;
        }
    }
    return best;
}

// The code points a character can still become: its bits so far, `need` continuation bytes due,
// `length` bytes in all.
std::pair<char32_t, char32_t> text_span(std::uint32_t bits, int need, int length) {
    const char32_t lo = bits << (6 * need);
    const char32_t hi = lo | ((1u << (6 * need)) - 1);
    const char32_t least = length == 2 ? 0x80 : length == 3 ? 0x800 : 0x10000;
    return {std::max(lo, least), std::min<char32_t>(hi, RegexAutomaton::kMaxCodePoint)};
}

}  // namespace

bool JsonRecognizer::text_char(const RegexAutomaton& re, char c) {
    const auto b = static_cast<unsigned char>(c);
    if (text_need_ == 0) {
        if (b < 0x80) {
            const int t = re.step(text_state_, b);
            if (t < 0) return false;
            text_state_ = t;
            return true;
        }
        if (b >= 0xC2 && b <= 0xDF) {
            text_length_ = 2, text_bits_ = b & 0x1Fu;
        } else if (b >= 0xE0 && b <= 0xEF) {
            text_length_ = 3, text_bits_ = b & 0x0Fu;
        } else if (b >= 0xF0 && b <= 0xF4) {
            text_length_ = 4, text_bits_ = b & 0x07u;
        } else {
            return false;
        }
        text_need_ = static_cast<std::uint8_t>(text_length_ - 1);
    } else {
        if ((b & 0xC0) != 0x80) return false;
        text_bits_ = text_bits_ << 6 | (b & 0x3Fu);
        --text_need_;
    }
    const auto [lo, hi] = text_span(text_bits_, text_need_, text_length_);
    if (lo > hi) return false;
    int to = -1;
    if (text_viable(re, text_state_, lo, hi, false, &to) < 0) return false;
    if (text_need_ == 0) text_state_ = to;  // lo == hi: the whole character
    return true;
}

std::string JsonRecognizer::text_completion(const RegexAutomaton& re) const {
    std::string out;
    int state = text_state_;
    if (text_need_ > 0) {
        const auto [lo, hi] = text_span(text_bits_, text_need_, text_length_);
        const std::int64_t cp = text_viable(re, state, lo, hi, true, &state);
        for (int k = text_need_ - 1; k >= 0; --k)
            out += static_cast<char>(0x80 | ((cp >> (6 * k)) & 0x3F));
    }
    while (!re.accepting(state)) {
        int to = -1;
        const std::int64_t cp = text_viable(re, state, 0, RegexAutomaton::kMaxCodePoint, true, &to);
        if (cp < 0 || re.shortest(to) >= re.shortest(state)) break;  // cannot happen: live states
        append_utf8(out, static_cast<char32_t>(cp));
        state = to;
    }
    return out;
}

bool JsonRecognizer::feed(char c) {
    if (const RegexAutomaton* re = grammar_->text_automaton()) return text_char(*re, c);
    if (!is_ws(c)) whitespace_run_ = 0;
    while (true) {
        if (stack_.empty()) {
            if (root_done_) return false;  // nothing may follow the value
            if (is_ws(c)) return whitespace();
            return start_value(grammar_->root(), c);
        }
        Frame& f = stack_.back();
        switch (f.state) {
            case str_body: {
                const JsonSchemaGrammar::Node& n = grammar_->node(f.node);
                if (n.pattern >= 0) return pattern_char(f, n, c);
                // A code point starts at a byte outside an escape / UTF-8 sequence (the second
                // half of an escaped surrogate pair belongs to the first).
                if (n.format != JsonSchemaGrammar::Format::none) {
                    // A formatted string is plain ASCII, kept in f.text to check its format.
                    if (c == '"') {
                        if (format_status(n.format, f.text) != 1) return false;
                        stack_.pop_back();
                        value_done();
                        return true;
                    }
                    const auto b = static_cast<unsigned char>(c);
                    if (b < 0x20 || b >= 0x7F || c == '\\') return false;
                    f.text += c;
                    if (format_status(n.format, f.text) < 0) return false;
                    return n.max_length == SIZE_MAX ||
                           f.text.size() + format_completion(n.format, f.text).size() <=
                               n.max_length;
                }
                const bool plain = f.str.escape == 0 && f.str.hex == 0 && f.str.utf8_need == 0 &&
                                   f.str.surrogate != 3;
                bool closed = false;
                if (!string_char(f.str, c, closed)) return false;
                if (closed && f.count < n.min_length) return false;
                if (plain && !closed && f.count++ >= n.max_length) return false;
                if (closed) {
                    stack_.pop_back();
                    value_done();
                }
                return true;
            }
            case lit_body: {
                bool ended = false;
                if (!literal_char(f, c, ended)) return false;
                if (!ended) {
                    // A literal that nothing can extend is over (strings, objects, true / false / null).
                    const auto& lits = grammar_->node(f.node).literals;
                    const bool longer =
                        std::any_of(lits.begin(), lits.end(), [&](const std::string& l) {
                            return l.size() > f.text.size() &&
                                   l.compare(0, f.text.size(), f.text) == 0;
                        });
                    if (!longer && literal_exact(f)) {
                        stack_.pop_back();
                        value_done();
                    }
                    return true;
                }
                stack_.pop_back();
                value_done();
                continue;  // `c` belongs to the enclosing value
            }
            case num_minus:
            case num_zero:
            case num_int:
            case num_dot:
            case num_frac:
            case num_exp:
            case num_exp_sign:
            case num_exp_digits: {
                bool ended = false;
                if (!number_char(f, c, ended)) return false;
                if (!ended) return true;
                stack_.pop_back();
                value_done();
                continue;
            }
            case arr_start:
            case arr_in_value:
            case arr_after_value:
            case arr_expect_value:
                return array_char(c);
            default:
                return object_char(c);
        }
    }
}

bool JsonRecognizer::complete() const {
    if (const RegexAutomaton* re = grammar_->text_automaton())
        return text_need_ == 0 && re->accepting(text_state_);
    if (stack_.empty()) return root_done_;
    if (stack_.size() != 1) return false;
    const Frame& f = stack_.back();
    if (f.state == lit_body) return literal_exact(f);
    const JsonSchemaGrammar::Node& n = grammar_->node(f.node);
    return number_can_end(f) && (!n.bounds.any() || bounded_value_ok(n, f.text));
}

std::string JsonRecognizer::object_rest(const Frame& f, std::uint64_t seen, bool has_member) const {
    const JsonSchemaGrammar::Node& n = grammar_->node(f.node);
    std::string out;
    for (std::size_t i = 0; i < n.properties.size(); ++i) {
        if (!n.properties[i].required || (seen >> i & 1)) continue;
        out += (has_member ? ",\"" : "\"") + n.properties[i].key +
               "\":" + grammar_->minimal_text(n.properties[i].node);
        has_member = true;
    }
    return out + "}";
}

std::string JsonRecognizer::frame_completion(const Frame& f) const {
    const JsonSchemaGrammar::Node& n = grammar_->node(f.node);
    auto items_rest = [&](std::size_t have) {
        std::string out;
        for (std::size_t j = have; j < n.min_items; ++j)
            out += "," + grammar_->minimal_text(n.items);
        return out + "]";
    };
    switch (f.state) {
        case obj_start:
            return object_rest(f, f.seen, false);
        case obj_expect_key: {
            // A key must come: the first required one not given, else any property not given, else
            // an additional key.
            int pick = -1;
            for (std::size_t i = 0; i < n.properties.size() && pick < 0; ++i) {
                if (n.properties[i].required && !(f.seen >> i & 1)) pick = static_cast<int>(i);
            }
            for (std::size_t i = 0; i < n.properties.size() && pick < 0; ++i) {
                if (!(f.seen >> i & 1)) pick = static_cast<int>(i);
            }
            if (pick >= 0) {
                const auto& p = n.properties[static_cast<std::size_t>(pick)];
                return "\"" + p.key + "\":" + grammar_->minimal_text(p.node) +
                       object_rest(f, f.seen | std::uint64_t{1} << pick, true);
            }
            return "\"\":" + grammar_->minimal_text(n.additional) + object_rest(f, f.seen, true);
        }
        case obj_key: {
            std::size_t best = SIZE_MAX;
            for (std::size_t i = 0; i < n.properties.size(); ++i) {
                const auto& k = n.properties[i].key;
                if (!(f.seen >> i & 1) && k.size() >= f.text.size() &&
                    k.compare(0, f.text.size(), f.text) == 0 &&
                    (best == SIZE_MAX || k.size() < n.properties[best].key.size())) {
                    best = i;
                }
            }
            if (best != SIZE_MAX) {
                // The name is given in its escaped spelling, so this also finishes a pending escape.
                const auto& p = n.properties[best];
                return p.key.substr(f.text.size()) + "\":" + grammar_->minimal_text(p.node) +
                       object_rest(f, f.seen | std::uint64_t{1} << best, true);
            }
            // An additional key: closed as it is, unless that repeats a property already given
            // (refused), then lengthened until it does not.
            std::string tail = string_tail(f.str);
            auto repeats = [&](const std::string& t) {
                const std::string key = f.text + t.substr(0, t.size() - 1);
                for (std::size_t i = 0; i < n.properties.size(); ++i) {
                    if ((f.seen >> i & 1) && n.properties[i].key == key) return true;
                }
                return false;
            };
            while (repeats(tail)) tail.insert(tail.size() - 1, "_");
            return tail + ":" + grammar_->minimal_text(n.additional) + object_rest(f, f.seen, true);
        }
        case obj_colon:
            return ":" + grammar_->minimal_text(f.value_node) + object_rest(f, f.seen, true);
        case obj_value:
            return grammar_->minimal_text(f.value_node) + object_rest(f, f.seen, true);
        case obj_in_value:
        case obj_after_value:
            return object_rest(f, f.seen, true);
        case arr_start:
            if (n.min_items == 0) return "]";
            return grammar_->minimal_text(n.items) + items_rest(1);
        case arr_expect_value:
            return grammar_->minimal_text(n.items) + items_rest(f.count + 1);
        case arr_in_value:
            return items_rest(f.count + 1);
        case arr_after_value:
            return items_rest(f.count);
        case str_body: {
            if (n.pattern >= 0) return pattern_completion(f);
            if (n.format != JsonSchemaGrammar::Format::none)
                return format_completion(n.format, f.text) + "\"";
            std::string tail = string_tail(f.str);
            if (f.count < n.min_length)
                tail.insert(tail.size() - 1, std::string(n.min_length - f.count, 'a'));
            return tail;
        }
        case num_minus:
        case num_dot:
        case num_exp:
        case num_exp_sign:
            if (n.bounds.any())
                return bounded_completion(n, f.text, static_cast<std::size_t>(kMaxNumberLength));
            return "0";
        case num_zero:
        case num_int:
        case num_frac:
        case num_exp_digits:
            if (n.bounds.any())
                return bounded_completion(n, f.text, static_cast<std::size_t>(kMaxNumberLength));
            return "";
        case lit_body: {
            const std::string* best = nullptr;
            for (const std::string& l : n.literals) {
                if (l.size() >= f.text.size() && l.compare(0, f.text.size(), f.text) == 0 &&
                    (!best || l.size() < best->size())) {
                    best = &l;
                }
            }
            return best ? best->substr(f.text.size()) : std::string();
        }
    }
    return {};
}

std::string JsonRecognizer::shortest_completion() const {
    if (const RegexAutomaton* re = grammar_->text_automaton()) return text_completion(*re);
    if (stack_.empty())
        return root_done_ ? std::string() : grammar_->minimal_text(grammar_->root());
    std::string out;
    for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) out += frame_completion(*it);
    return out;
}

}  // namespace neural::chat
