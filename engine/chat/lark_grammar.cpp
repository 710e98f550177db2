#include "chat/lark_grammar.h"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "chat/regex_automaton.h"
#include "chat/utf8_stream.h"

namespace neural::chat {

namespace {

// The terminals of Lark's common.lark that an automaton expresses, in Lark's own syntax (read by
// the same parser). Python's `.` does not match "\n" only, hence the explicit classes.
constexpr std::string_view kCommon = R"lark(
DIGIT: "0".."9"
HEXDIGIT: "a".."f" | "A".."F" | DIGIT
INT: DIGIT+
SIGNED_INT: ["+" | "-"] INT
DECIMAL: INT "." INT? | "." INT
_EXP: ("e" | "E") SIGNED_INT
FLOAT: INT _EXP | DECIMAL _EXP?
SIGNED_FLOAT: ["+" | "-"] FLOAT
NUMBER: FLOAT | INT
SIGNED_NUMBER: ["+" | "-"] NUMBER
ESCAPED_STRING: "\"" /([^"\\\n]|\\[^\n])*/ "\""
LCASE_LETTER: "a".."z"
UCASE_LETTER: "A".."Z"
LETTER: UCASE_LETTER | LCASE_LETTER
WORD: LETTER+
CNAME: ("_" | LETTER) ("_" | LETTER | DIGIT)*
WS_INLINE: (" " | /\t/)+
WS: /[ \t\f\r\n]/+
CR: /\r/
LF: /\n/
NEWLINE: (CR? LF)+
SH_COMMENT: /#[^\n]*/
CPP_COMMENT: /\/\/[^\n]*/
SQL_COMMENT: /--[^\n]*/
)lark";

[[noreturn]] void unsupported(const std::string& what) {
    throw RegexError(fmt::format("the Lark grammar uses {}, which cannot be enforced", what), true,
                     true);
}

[[noreturn]] void syntax(int line, const std::string& what) {
    throw RegexError(fmt::format("Lark grammar, line {}: {}", line, what), false);
}

enum class Tok { name, string, regex, number, op, end };

struct Token {
    Tok kind = Tok::end;
    std::string text;   // name, op, number; string: the decoded value; regex: the body
    std::string flags;  // string: "i"; regex: its flags
    int line = 0;
    bool line_start = false;  // first token of its line
};

std::vector<Token> tokenize(std::string_view src) {
    std::vector<Token> out;
    int line = 1;
    bool line_start = true;
    std::size_t i = 0;
    auto push = [&](Tok kind, std::string text, std::string flags = {}) {
        out.push_back({kind, std::move(text), std::move(flags), line, line_start});
        line_start = false;
    };
    while (i < src.size()) {
        const char c = src[i];
        if (c == '\n') {
            ++line;
            line_start = true;
            ++i;
        } else if (c == ' ' || c == '\t' || c == '\r') {
            ++i;
        } else if (c == '/' && i + 1 < src.size() && src[i + 1] == '/') {
            while (i < src.size() && src[i] != '\n') ++i;  // a comment
        } else if (c == '#' && line_start) {
            while (i < src.size() && src[i] != '\n') ++i;  // older Lark comments
        } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
            std::size_t j = i;
            while (j < src.size() &&
                   (std::isalnum(static_cast<unsigned char>(src[j])) || src[j] == '_'))
                ++j;
            push(Tok::name, std::string(src.substr(i, j - i)));
            i = j;
        } else if (std::isdigit(static_cast<unsigned char>(c))) {
            std::size_t j = i;
            while (j < src.size() && std::isdigit(static_cast<unsigned char>(src[j]))) ++j;
            push(Tok::number, std::string(src.substr(i, j - i)));
            i = j;
        } else if (c == '"') {
            // A Python string literal: its escapes decoded here.
            std::string value;
            std::size_t j = i + 1;
            for (;;) {
                if (j >= src.size() || src[j] == '\n') syntax(line, "a string is not closed");
                if (src[j] == '"') break;
                if (src[j] != '\\') {
                    value += src[j++];
                    continue;
                }
                if (j + 1 >= src.size()) syntax(line, "a string is not closed");
                const char e = src[j + 1];
                j += 2;
                auto hex = [&](int digits) {
                    if (j + static_cast<std::size_t>(digits) > src.size())
                        syntax(line, "a short \\x / \\u escape");
                    char32_t v = 0;
                    for (int k = 0; k < digits; ++k) {
                        const char h = src[j++];
                        if (!std::isxdigit(static_cast<unsigned char>(h)))
                            syntax(line, "a bad \\x / \\u escape");
                        v = v * 16 +
                            static_cast<char32_t>(
                                std::isdigit(static_cast<unsigned char>(h))
                                    ? h - '0'
                                    : std::tolower(static_cast<unsigned char>(h)) - 'a' + 10);
                    }
                    return v;
                };
                switch (e) {
                    case 'n':
                        value += '\n';
                        break;
                    case 't':
                        value += '\t';
                        break;
                    case 'r':
                        value += '\r';
                        break;
                    case 'f':
                        value += '\f';
                        break;
                    case 'v':
                        value += '\v';
                        break;
                    case '0':
                        value += '\0';
                        break;
                    case 'x':
                        append_utf8(value, hex(2));
                        break;
                    case 'u':
                        append_utf8(value, hex(4));
                        break;
                    case 'U':
                        append_utf8(value, hex(8));
                        break;
                    case '\\':
                    case '"':
                    case '\'':
                        value += e;
                        break;
                    default:  // Python keeps an unknown escape as written
                        value += '\\';
                        value += e;
                        break;
                }
            }
            i = j + 1;
            std::string flags;
            while (i < src.size() && src[i] == 'i') flags += src[i++];
            push(Tok::string, std::move(value), std::move(flags));
        } else if (c == '/') {
            std::string body;
            std::size_t j = i + 1;
            bool in_class = false;
            for (;;) {
                if (j >= src.size() || src[j] == '\n') syntax(line, "a /regexp/ is not closed");
                const char r = src[j];
                if (r == '\\' && j + 1 < src.size()) {
                    // "\/" is the slash itself; other escapes stay for the regex.
                    if (src[j + 1] == '/') {
                        body += '/';
                    } else {
                        body += r;
                        body += src[j + 1];
                    }
                    j += 2;
                    continue;
                }
                if (r == '[') in_class = true;
                if (r == ']') in_class = false;
                if (r == '/' && !in_class) break;
                body += r;
                ++j;
            }
            i = j + 1;
            std::string flags;
            while (i < src.size() && std::isalpha(static_cast<unsigned char>(src[i])))
                flags += src[i++];
            push(Tok::regex, std::move(body), std::move(flags));
        } else if (c == '.' && i + 1 < src.size() && src[i + 1] == '.') {
            push(Tok::op, "..");
            i += 2;
        } else if (c == '-' && i + 1 < src.size() && src[i + 1] == '>') {
            push(Tok::op, "->");
            i += 2;
        } else if (c == '%') {
            std::size_t j = i + 1;
            while (j < src.size() && std::isalpha(static_cast<unsigned char>(src[j]))) ++j;
            push(Tok::op, std::string(src.substr(i, j - i)));
            i = j;
        } else if (std::string_view("()[]|?*+~:.,!{}").find(c) != std::string_view::npos) {
            push(Tok::op, std::string(1, c));
            ++i;
        } else {
            syntax(line, fmt::format("unexpected character '{}'", c));
        }
    }
    out.push_back({Tok::end, {}, {}, line, true});
    return out;
}

// Parsed expressions.
struct Expr {
    enum class Kind { literal, regex, range, ref, seq, alt, repeat } kind = Kind::seq;
    std::string text;           // literal value, regex body, ref name; range: first and last
    std::string last;           // range: the last character
    bool ignore_case = false;   // literal
    std::vector<Expr> items;    // seq, alt; repeat: one
    unsigned min = 0, max = 0;  // repeat; max == UINT32_MAX: unbounded
    int line = 0;
};

constexpr unsigned kUnbounded = 0xFFFFFFFFu;

class Parser {
public:
    explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

    // name -> expression; `imports` gets the names imported from common.lark (-> their alias).
    void parse(std::map<std::string, Expr>& rules, std::map<std::string, std::string>& imports) {
        while (peek().kind != Tok::end) {
            const Token& first = peek();
            if (!first.line_start) syntax(first.line, fmt::format("unexpected '{}'", first.text));
            if (first.kind == Tok::op && first.text.starts_with('%')) {
                directive(imports);
                continue;
            }
            if (first.kind == Tok::op && (first.text == "?" || first.text == "!")) next();
            const Token name = next();
            if (name.kind != Tok::name) syntax(name.line, "a rule or terminal name was expected");
            if (peek().kind == Tok::op && peek().text == "{") unsupported("a template rule");
            if (peek().kind == Tok::op && peek().text == ".") {  // priority
                next();
                if (next().kind != Tok::number) syntax(name.line, "a priority number was expected");
            }
            if (next().text != ":")
                syntax(name.line, fmt::format("':' after '{}' expected", name.text));
            Expr e = alternatives();
            if (!peek().line_start && peek().kind != Tok::end)
                syntax(peek().line, fmt::format("unexpected '{}'", peek().text));
            if (!rules.emplace(name.text, std::move(e)).second)
                syntax(name.line, fmt::format("'{}' is defined twice", name.text));
        }
    }

private:
    const Token& peek() const { return t_[pos_]; }
    Token next() { return t_[pos_ < t_.size() - 1 ? pos_++ : pos_]; }
    bool at_op(const char* op) const {
        const Token& p = peek();
        return p.kind == Tok::op && p.text == op;
    }
    // The rule body ends at the next line that does not continue it with '|'.
    bool at_end_of_rule() const {
        const Token& p = peek();
        return p.kind == Tok::end || (p.line_start && !(p.kind == Tok::op && p.text == "|"));
    }

    void directive(std::map<std::string, std::string>& imports) {
        const Token d = next();
        if (d.text == "%ignore") unsupported("%ignore (text skipped between any two tokens)");
        if (d.text != "%import") unsupported(d.text);
        const Token module = next();
        if (module.kind != Tok::name || module.text != "common")
            unsupported("an import from a module other than common");
        if (at_op(".")) {
            next();
            const Token n = next();
            if (n.kind != Tok::name) syntax(d.line, "a name after '%import common.' expected");
            std::string alias = n.text;
            if (at_op("->")) {
                next();
                alias = next().text;
            }
            imports[alias] = n.text;
        } else if (at_op("(")) {
            next();
            while (!at_op(")")) {
                const Token n = next();
                if (n.kind != Tok::name)
                    syntax(d.line, "a name list after '%import common' expected");
                imports[n.text] = n.text;
                if (at_op(",")) next();
            }
            next();
        } else {
            syntax(d.line, "'%import common.NAME' or '%import common (A, B)' expected");
        }
        if (!at_end_of_rule()) syntax(d.line, "unexpected text after %import");
    }

    Expr alternatives() {
        Expr alt{Expr::Kind::alt};
        alt.line = peek().line;
        for (;;) {
            alt.items.push_back(sequence());
            if (at_op("->")) {  // an alias names the tree node only
                next();
                next();
            }
            if (!at_op("|")) break;
            next();
        }
        return alt.items.size() == 1 ? std::move(alt.items.front()) : alt;
    }

    Expr sequence() {
        Expr seq{Expr::Kind::seq};
        seq.line = peek().line;
        while (!at_end_of_rule()) {
            const Token& p = peek();
            if (p.kind == Tok::op &&
                (p.text == "|" || p.text == ")" || p.text == "]" || p.text == "->"))
                break;
            seq.items.push_back(postfix());
        }
        return seq.items.size() == 1 ? std::move(seq.items.front()) : seq;
    }

    Expr postfix() {
        Expr e = atom();
        for (;;) {
            if (at_op("?") || at_op("*") || at_op("+")) {
                const std::string op = next().text;
                Expr r{Expr::Kind::repeat};
                r.line = e.line;
                r.min = op == "+" ? 1 : 0;
                r.max = op == "?" ? 1 : kUnbounded;
                r.items.push_back(std::move(e));
                e = std::move(r);
            } else if (at_op("~")) {
                const int line = next().line;
                const Token lo = next();
                if (lo.kind != Tok::number) syntax(line, "a count after '~' expected");
                unsigned hi = static_cast<unsigned>(std::stoul(lo.text));
                if (at_op("..")) {
                    next();
                    const Token h = next();
                    if (h.kind != Tok::number) syntax(line, "a count after '..' expected");
                    hi = static_cast<unsigned>(std::stoul(h.text));
                }
                Expr r{Expr::Kind::repeat};
                r.line = line;
                r.min = static_cast<unsigned>(std::stoul(lo.text));
                r.max = hi;
                if (r.max < r.min) syntax(line, "a '~ n..m' range with m < n");
                r.items.push_back(std::move(e));
                e = std::move(r);
            } else {
                return e;
            }
        }
    }

    Expr atom() {
        const Token t = next();
        Expr e;
        e.line = t.line;
        if (t.kind == Tok::op && t.text == "(") {
            e = alternatives();
            if (next().text != ")") syntax(t.line, "')' expected");
            return e;
        }
        if (t.kind == Tok::op && t.text == "[") {
            Expr r{Expr::Kind::repeat};
            r.line = t.line;
            r.min = 0;
            r.max = 1;
            r.items.push_back(alternatives());
            if (next().text != "]") syntax(t.line, "']' expected");
            return r;
        }
        if (t.kind == Tok::string) {
            if (!t.flags.empty() && t.flags != "i") unsupported("the string flag " + t.flags);
            if (at_op("..")) {
                next();
                const Token last = next();
                if (last.kind != Tok::string) syntax(t.line, "a string after '..' expected");
                e.kind = Expr::Kind::range;
                e.text = t.text;
                e.last = last.text;
                return e;
            }
            e.kind = Expr::Kind::literal;
            e.text = t.text;
            e.ignore_case = t.flags == "i";
            return e;
        }
        if (t.kind == Tok::regex) {
            if (!t.flags.empty()) unsupported("the regular-expression flags /" + t.flags);
            e.kind = Expr::Kind::regex;
            e.text = t.text;
            return e;
        }
        if (t.kind == Tok::name) {
            if (at_op("{")) unsupported("a template");
            e.kind = Expr::Kind::ref;
            e.text = t.text;
            return e;
        }
        syntax(t.line, fmt::format("unexpected '{}'", t.text));
    }

    std::vector<Token> t_;
    std::size_t pos_ = 0;
};

// One code point of a UTF-8 string at `i` (advancing it).
char32_t decode_one(const std::string& s, std::size_t& i) {
    const auto b = static_cast<unsigned char>(s[i]);
    int n = b < 0x80 ? 0 : b < 0xE0 ? 1 : b < 0xF0 ? 2 : 3;
    char32_t cp = n == 0 ? b : b & (0x3F >> n);
    ++i;
    while (n-- > 0 && i < s.size()) cp = cp << 6 | (static_cast<unsigned char>(s[i++]) & 0x3F);
    return cp;
}

void append_escaped(std::string& out, char32_t cp, bool in_class) {
    static constexpr std::string_view kSyntax = "\\^$.|?*+()[]{}/-";
    if (cp < 0x20 || cp == 0x7F) {
        out += fmt::format("\\x{:02X}", static_cast<unsigned>(cp));
        return;
    }
    if (cp < 0x80 && kSyntax.find(static_cast<char>(cp)) != std::string_view::npos &&
        (in_class || cp != '-'))
        out += '\\';
    append_utf8(out, cp);
}

// Python's regular expressions in ECMA-262 spelling: (?P<name> is (?<name>, and `.` outside a
// class matches anything but "\n" (Python) rather than anything but a line terminator (ECMA).
std::string python_regex(const std::string& body, int line) {
    std::string out;
    bool in_class = false;
    for (std::size_t i = 0; i < body.size(); ++i) {
        const char c = body[i];
        if (c == '\\' && i + 1 < body.size()) {
            const char e = body[i + 1];
            if (e == 'A' || e == 'Z')
                unsupported(fmt::format("the anchor \\{} (line {})", e, line));
            out += c;
            out += e;
            ++i;
        } else if (in_class) {
            if (c == ']') in_class = false;
            out += c;
        } else if (c == '[') {
            in_class = true;
            out += c;
            if (i + 1 < body.size() && body[i + 1] == '^') out += body[++i];
            if (i + 1 < body.size() && body[i + 1] == ']') out += body[++i];  // a literal ]
        } else if (c == '(' && body.compare(i, 4, "(?P<") == 0) {
            out += "(?<";
            i += 3;
        } else if (c == '(' && body.compare(i, 4, "(?P=") == 0) {
            unsupported(fmt::format("a backreference (?P=...) (line {})", line));
        } else if (c == '.') {
            out += "[^\\n]";
        } else {
            out += c;
        }
    }
    return out;
}

class Translator {
public:
    Translator(const std::map<std::string, Expr>& rules, const std::map<std::string, Expr>& common,
               const std::map<std::string, std::string>& imports)
        : rules_(rules), common_(common), imports_(imports) {}

    std::string rule(const std::string& name, int line) {
        const Expr* e = nullptr;
        const std::map<std::string, Expr>* scope = &rules_;
        if (scope_ == &common_ && common_.count(name)) {  // common.lark's own references
            e = &common_.at(name);
            scope = &common_;
        } else if (auto it = rules_.find(name); it != rules_.end()) {
            e = &it->second;
        } else if (auto im = imports_.find(name); im != imports_.end()) {
            auto c = common_.find(im->second);
            if (c == common_.end())
                unsupported(
                    fmt::format("common.{} (not a regular terminal of common.lark)", im->second));
            e = &c->second;
            scope = &common_;
        } else {
            syntax(line, fmt::format("'{}' is not defined", name));
        }
        const std::string key = (scope == &common_ ? "common." : "") + name;
        if (auto done = memo_.find(key); done != memo_.end()) return done->second;
        if (!active_.insert(key).second)
            unsupported(fmt::format("the recursive rule '{}' (line {})", name, line));
        const auto* saved = scope_;
        scope_ = scope;
        std::string out = "(?:" + expr(*e) + ")";
        scope_ = saved;
        active_.erase(key);
        memo_[key] = out;
        return out;
    }

    std::string expr(const Expr& e) {
        std::string out;
        switch (e.kind) {
            case Expr::Kind::literal: {
                for (std::size_t i = 0; i < e.text.size();) {
                    const char32_t cp = decode_one(e.text, i);
                    if (e.ignore_case && cp < 0x80 && std::isalpha(static_cast<int>(cp))) {
                        out += '[';
                        append_utf8(out, static_cast<char32_t>(std::tolower(static_cast<int>(cp))));
                        append_utf8(out, static_cast<char32_t>(std::toupper(static_cast<int>(cp))));
                        out += ']';
                    } else {
                        append_escaped(out, cp, false);
                    }
                }
                return "(?:" + out + ")";
            }
            case Expr::Kind::range: {
                std::size_t i = 0, j = 0;
                const char32_t a = decode_one(e.text, i), b = decode_one(e.last, j);
                if (i != e.text.size() || j != e.last.size() || e.text.empty() || e.last.empty())
                    syntax(e.line, "a range \"a\"..\"z\" of single characters expected");
                if (b < a) syntax(e.line, "a range whose last character comes before its first");
                out = "[";
                append_escaped(out, a, true);
                out += '-';
                append_escaped(out, b, true);
                return out + "]";
            }
            case Expr::Kind::regex:
                return "(?:" + python_regex(e.text, e.line) + ")";
            case Expr::Kind::ref:
                return rule(e.text, e.line);
            case Expr::Kind::seq:
                for (const Expr& item : e.items) out += expr(item);
                return "(?:" + out + ")";
            case Expr::Kind::alt:
                for (std::size_t k = 0; k < e.items.size(); ++k) {
                    if (k) out += '|';
                    out += expr(e.items[k]);
                }
                return "(?:" + out + ")";
            case Expr::Kind::repeat: {
                out = expr(e.items.front());
                if (e.min == 0 && e.max == 1) return out + "?";
                if (e.min == 0 && e.max == kUnbounded) return out + "*";
                if (e.min == 1 && e.max == kUnbounded) return out + "+";
                if (e.max == kUnbounded) return out + fmt::format("{{{},}}", e.min);
                return out + fmt::format("{{{},{}}}", e.min, e.max);
            }
        }
        return out;
    }

private:
    const std::map<std::string, Expr>& rules_;
    const std::map<std::string, Expr>& common_;
    const std::map<std::string, std::string>& imports_;
    const std::map<std::string, Expr>* scope_ = nullptr;
    std::map<std::string, std::string> memo_;
    std::set<std::string> active_;
};

}  // namespace

std::string lark_to_regex(std::string_view grammar) {
    std::map<std::string, Expr> rules, common;
    std::map<std::string, std::string> imports, none;
    Parser(tokenize(grammar)).parse(rules, imports);
    Parser(tokenize(kCommon)).parse(common, none);
    if (!rules.count("start")) throw RegexError("the Lark grammar has no 'start' rule", false);
    Translator tr(rules, common, imports);
    std::string out = tr.rule("start", 0);
    if (out.size() > RegexAutomaton::kMaxPatternBytes) {
        throw RegexError(
            fmt::format("the Lark grammar's expression is {} bytes, over the limit of {}",
                        out.size(), RegexAutomaton::kMaxPatternBytes),
            true);
    }
    return out;
}

}  // namespace neural::chat
