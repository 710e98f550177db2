#include "chat/json_schema_grammar.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace neural::chat {

using Json = nlohmann::ordered_json;

// ---- compiler ---------------------------------------------------------------------------------

class SchemaCompiler {
public:
    std::shared_ptr<JsonSchemaGrammar> g = std::make_shared<JsonSchemaGrammar>();
    std::vector<std::string> unsupported;  // "keyword (at /pointer)"

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
        static const std::set<std::string> known = {
            "type",     "properties", "required", "additionalProperties", "items", "minItems",
            "maxItems", "enum",       "const"};
        for (auto it = s.begin(); it != s.end(); ++it) {
            if (!known.count(it.key()) && !annotations.count(it.key())) {
                unsupported.push_back(fmt::format("{} (at {}/{})", it.key(), ptr, it.key()));
            }
        }
        if (auto c = s.find("const"); c != s.end()) return literal({dump(*c)});
        if (auto e = s.find("enum"); e != s.end()) {
            if (!e->is_array() || e->empty()) {
                throw SchemaError(fmt::format("'{}/enum' must be a non-empty array", ptr));
            }
            std::vector<std::string> values;
            for (const Json& v : *e) values.push_back(dump(v));
            return literal(std::move(values));
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
        } else {
            return any();
        }
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
        if (has("string")) u.on_string = primitive(JsonSchemaGrammar::Kind::string);
        if (has("number")) {
            u.on_number = primitive(JsonSchemaGrammar::Kind::number);
        } else if (has("integer")) {
            u.on_number = primitive(JsonSchemaGrammar::Kind::integer);
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
                    out = "\"\"";
                    break;
                case JsonSchemaGrammar::Kind::number:
                case JsonSchemaGrammar::Kind::integer:
                    out = "0";
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
    int any_ = -1;
};

std::shared_ptr<const JsonSchemaGrammar> JsonSchemaGrammar::compile(const Json& schema) {
    SchemaCompiler c;
    c.g->root_ = c.compile(schema, "");
    if (!c.unsupported.empty()) {
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

// ---- recogniser -------------------------------------------------------------------------------

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

constexpr int kMaxExponentDigits = 2;

}  // namespace

JsonRecognizer::JsonRecognizer(const JsonSchemaGrammar& grammar) : grammar_(&grammar) {}

bool JsonRecognizer::whitespace() { return ++whitespace_run_ <= kMaxWhitespaceRun; }

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
            if (c != '{') return false;
            Frame f;
            f.node = index;
            f.state = obj_start;
            stack_.push_back(std::move(f));
            return true;
        }
        case JsonSchemaGrammar::Kind::array: {
            if (c != '[') return false;
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

bool JsonRecognizer::number_char(Frame& f, char c, bool& ended) {
    ended = false;
    const bool integer = grammar_->node(f.node).kind == JsonSchemaGrammar::Kind::integer;
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
        return true;
    }
    if (number_can_end(f)) {
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

bool JsonRecognizer::feed(char c) {
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
                bool closed = false;
                if (!string_char(f.str, c, closed)) return false;
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
    if (stack_.empty()) return root_done_;
    if (stack_.size() != 1) return false;
    const Frame& f = stack_.back();
    if (f.state == lit_body) return literal_exact(f);
    return number_can_end(f);
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
            return string_tail(f.str) + ":" + grammar_->minimal_text(n.additional) +
                   object_rest(f, f.seen, true);
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
        case str_body:
            return string_tail(f.str);
        case num_minus:
        case num_dot:
        case num_exp:
        case num_exp_sign:
            return "0";
        case num_zero:
        case num_int:
        case num_frac:
        case num_exp_digits:
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
    if (stack_.empty())
        return root_done_ ? std::string() : grammar_->minimal_text(grammar_->root());
    std::string out;
    for (auto it = stack_.rbegin(); it != stack_.rend(); ++it) out += frame_completion(*it);
    return out;
}

}  // namespace neural::chat
