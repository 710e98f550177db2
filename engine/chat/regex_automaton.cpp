#include "chat/regex_automaton.h"

#include <fmt/format.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <utility>

namespace neural::chat {

namespace {

using Range = std::pair<char32_t, char32_t>;  // inclusive
using Set = std::vector<Range>;               // sorted, disjoint, not adjacent

constexpr char32_t kMax = RegexAutomaton::kMaxCodePoint;

Set normalize(Set s) {
    std::sort(s.begin(), s.end());
    Set out;
    for (const Range& r : s) {
        if (!out.empty() && r.first <= out.back().second + 1) {
            out.back().second = std::max(out.back().second, r.second);
        } else {
            out.push_back(r);
        }
    }
    return out;
}

Set negate(const Set& s) {
    Set out;
    char32_t next = 0;
    for (const Range& r : s) {
        if (r.first > next) out.push_back({next, r.first - 1});
        next = r.second + 1;
    }
    if (next <= kMax) out.push_back({next, kMax});
    return out;
}

bool contains(const Set& s, char32_t cp) {
    auto it = std::upper_bound(s.begin(), s.end(), Range{cp, kMax + 1});
    return it != s.begin() && std::prev(it)->second >= cp;
}

// ECMA-262's classes.
const Set& digit_set() {
    static const Set s = {{'0', '9'}};
    return s;
}
const Set& word_set() {
    static const Set s = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
    return s;
}
const Set& space_set() {  // WhiteSpace and LineTerminator
    static const Set s = normalize({{0x09, 0x0D},
                                    {0x20, 0x20},
                                    {0xA0, 0xA0},
                                    {0x1680, 0x1680},
                                    {0x2000, 0x200A},
                                    {0x2028, 0x2029},
                                    {0x202F, 0x202F},
                                    {0x205F, 0x205F},
                                    {0x3000, 0x3000},
                                    {0xFEFF, 0xFEFF}});
    return s;
}
const Set& dot_set() {  // anything but a line terminator
    static const Set s = negate(normalize({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
    return s;
}

// ---- syntax tree --------------------------------------------------------------------------

struct Node {
    enum Kind { empty, set, concat, alt, repeat, begin, end };
    Kind kind = empty;
    Set chars;                // set
    std::vector<Node> parts;  // concat, alt; repeat: one
    std::uint32_t min = 0, max = 0;
    bool unbounded = false;  // repeat without an upper count
};

std::u32string decode_utf8(std::string_view s) {
    std::u32string out;
    for (std::size_t i = 0; i < s.size();) {
        const auto b = static_cast<unsigned char>(s[i]);
        int need = 0;
        char32_t cp = 0;
        if (b < 0x80) {
            cp = b;
        } else if (b >= 0xC2 && b <= 0xDF) {
            need = 1;
            cp = b & 0x1F;
        } else if (b >= 0xE0 && b <= 0xEF) {
            need = 2;
            cp = b & 0x0F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            need = 3;
            cp = b & 0x07;
        } else {
            throw RegexError("the pattern is not valid UTF-8", false);
        }
        ++i;
        for (int k = 0; k < need; ++k, ++i) {
            if (i >= s.size() || (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80)
                throw RegexError("the pattern is not valid UTF-8", false);
            cp = cp << 6 | (static_cast<unsigned char>(s[i]) & 0x3F);
        }
        out += cp;
    }
    return out;
}

class Parser {
public:
    explicit Parser(std::u32string p) : p_(std::move(p)) {}

    Node parse() {
        Node n = disjunction();
        if (i_ < p_.size()) syntax(p_[i_] == ')' ? "unmatched ')'" : "unexpected character");
        return n;
    }

private:
    std::u32string p_;
    std::size_t i_ = 0;
    int depth_ = 0;

    [[noreturn]] void syntax(const std::string& what) const {
        throw RegexError(fmt::format("invalid regular expression: {} at offset {}", what, i_),
                         false);
    }
    [[noreturn]] void unsupported(const std::string& feature) const {
        throw RegexError(fmt::format("{} at offset {}", feature, i_), true, true);
    }
    [[noreturn]] void limit(const std::string& what) const {
        throw RegexError(fmt::format("{} at offset {}", what, i_), true);
    }

    bool more() const { return i_ < p_.size(); }
    char32_t peek(std::size_t ahead = 0) const {
        return i_ + ahead < p_.size() ? p_[i_ + ahead] : char32_t{0xFFFFFFFF};
    }
    bool eat(char32_t c) {
        if (peek() != c) return false;
        ++i_;
        return true;
    }

    Node disjunction() {
        if (++depth_ > 200) limit("nesting deeper than 200 groups");
        Node first = alternative();
        if (peek() != '|') {
            --depth_;
            return first;
        }
        Node a;
        a.kind = Node::alt;
        a.parts.push_back(std::move(first));
        while (eat('|')) a.parts.push_back(alternative());
        --depth_;
        return a;
    }

    Node alternative() {
        Node c;
        c.kind = Node::concat;
        while (more() && peek() != '|' && peek() != ')') c.parts.push_back(term());
        return c;
    }

    Node term() {
        const char32_t c = peek();
        if (c == '^' || c == '$') {
            ++i_;
            Node a;
            a.kind = c == '^' ? Node::begin : Node::end;
            if (quantifier_ahead()) syntax("nothing to repeat");
            return a;
        }
        if (c == '\\' && (peek(1) == 'b' || peek(1) == 'B'))
            unsupported("a word boundary \\b / \\B");
        if (c == '(' && peek(1) == '?') {
            if (peek(2) == '=' || peek(2) == '!') unsupported("a lookahead (?= / (?!");
            if (peek(2) == '<' && (peek(3) == '=' || peek(3) == '!'))
                unsupported("a lookbehind (?<= / (?<!");
        }
        Node atom_node = atom();
        return quantified(std::move(atom_node));
    }

    // A quantifier follows (for "nothing to repeat" after an anchor).
    bool quantifier_ahead() {
        const char32_t c = peek();
        if (c == '*' || c == '+' || c == '?') return true;
        if (c != '{') return false;
        const std::size_t save = i_;
        std::uint32_t a = 0, b = 0;
        bool unb = false;
        const bool ok = counted(a, b, unb);
        i_ = save;
        return ok;
    }

    // {n}, {n,}, {n,m} at i_ (moves past it when it is one; Annex B: else '{' is a literal).
    bool counted(std::uint32_t& lo, std::uint32_t& hi, bool& unbounded) {
        const std::size_t save = i_;
        if (!eat('{')) return false;
        auto number = [&](std::uint32_t& v) {
            const std::size_t start = i_;
            std::uint64_t x = 0;
            while (peek() >= '0' && peek() <= '9') {
                x = std::min<std::uint64_t>(x * 10 + (peek() - '0'), 0xFFFFFFFFull);
                ++i_;
            }
            v = static_cast<std::uint32_t>(x);
            return i_ > start;
        };
        unbounded = false;
        if (!number(lo)) {
            i_ = save;
            return false;
        }
        hi = lo;
        if (eat(',')) {
            if (!number(hi)) unbounded = true;
        }
        if (!eat('}')) {
            i_ = save;
            return false;
        }
        return true;
    }

    Node quantified(Node a) {
        std::uint32_t lo = 0, hi = 0;
        bool unbounded = false;
        const char32_t c = peek();
        if (c == '*') {
            ++i_;
            unbounded = true;
        } else if (c == '+') {
            ++i_;
            lo = 1;
            unbounded = true;
        } else if (c == '?') {
            ++i_;
            hi = 1;
        } else if (!(c == '{' && counted(lo, hi, unbounded))) {
            return a;
        }
        eat('?');  // lazy: the same language
        if (!unbounded && hi < lo) syntax("numbers out of order in {} quantifier");
        if (lo > RegexAutomaton::kMaxRepeat || (!unbounded && hi > RegexAutomaton::kMaxRepeat))
            limit(fmt::format("a repetition count above {}", RegexAutomaton::kMaxRepeat));
        if (quantifier_ahead()) syntax("nothing to repeat");
        Node r;
        r.kind = Node::repeat;
        r.min = lo;
        r.max = hi;
        r.unbounded = unbounded;
        r.parts.push_back(std::move(a));
        return r;
    }

    Node atom() {
        const char32_t c = peek();
        Node n;
        n.kind = Node::set;
        switch (c) {
            case '.':
                ++i_;
                n.chars = dot_set();
                return n;
            case '(': {
                ++i_;
                if (eat('?')) {
                    if (eat(':')) {
                    } else if (peek() == '<') {
                        ++i_;
                        const std::size_t start = i_;
                        while (more() && peek() != '>') ++i_;
                        if (!eat('>') || i_ == start + 1) syntax("invalid group name");
                    } else {
                        unsupported("an inline modifier group (?flags:...)");
                    }
                }
                Node inner = disjunction();
                if (!eat(')')) syntax("missing ')'");
                return inner;
            }
            case ')':
                syntax("unmatched ')'");
            case '*':
            case '+':
            case '?':
                syntax("nothing to repeat");
            case '{': {
                std::uint32_t a = 0, b = 0;
                bool u = false;
                if (counted(a, b, u)) syntax("nothing to repeat");
                ++i_;
                n.chars = {{'{', '{'}};
                return n;
            }
            case '[':
                ++i_;
                n.chars = char_class();
                return n;
            case '\\':
                ++i_;
                n.chars = escape(false);
                return n;
            default:
                ++i_;
                n.chars = {{c, c}};
                return n;
        }
    }

    std::uint32_t hex_digits(int count) {
        std::uint32_t v = 0;
        for (int k = 0; k < count; ++k) {
            const char32_t h = peek();
            int d = -1;
            if (h >= '0' && h <= '9') d = static_cast<int>(h - '0');
            if (h >= 'a' && h <= 'f') d = static_cast<int>(h - 'a' + 10);
            if (h >= 'A' && h <= 'F') d = static_cast<int>(h - 'A' + 10);
            if (d < 0) syntax("invalid hexadecimal escape");
            v = v * 16 + static_cast<std::uint32_t>(d);
            ++i_;
        }
        return v;
    }

    // After a backslash: one code point or a class escape. `in_class`: \b is a backspace there.
    Set escape(bool in_class) {
        if (!more()) syntax("\\ at the end of the pattern");
        const char32_t c = peek();
        ++i_;
        auto one = [](char32_t x) { return Set{{x, x}}; };
        switch (c) {
            case 'd':
                return digit_set();
            case 'D':
                return negate(digit_set());
            case 'w':
                return word_set();
            case 'W':
                return negate(word_set());
            case 's':
                return space_set();
            case 'S':
                return negate(space_set());
            case 't':
                return one('\t');
            case 'n':
                return one('\n');
            case 'v':
                return one('\v');
            case 'f':
                return one('\f');
            case 'r':
                return one('\r');
            case 'b':
                if (in_class) return one('\b');
                unsupported("a word boundary \\b");
            case 'B':
                unsupported("a word boundary \\B");
            case 'c': {
                const char32_t l = peek();
                if ((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z')) {
                    ++i_;
                    return one(l % 32);
                }
                syntax("invalid \\c escape");
            }
            case 'x':
                return one(hex_digits(2));
            case 'u': {
                if (eat('{')) {
                    std::uint32_t v = 0;
                    const std::size_t start = i_;
                    while (more() && peek() != '}') {
                        v = v * 16 + hex_digits(1);
                        if (v > kMax) syntax("\\u{...} above U+10FFFF");
                    }
                    if (!eat('}') || i_ == start + 1) syntax("invalid \\u{...} escape");
                    return one(v);
                }
                std::uint32_t v = hex_digits(4);
                // A surrogate pair written as two escapes is one code point.
                if (v >= 0xD800 && v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
                    const std::size_t save = i_;
                    i_ += 2;
                    bool ok = true;
                    std::uint32_t lo = 0;
                    try {
                        lo = hex_digits(4);
                    } catch (const RegexError&) {
                        ok = false;
                    }
                    if (ok && lo >= 0xDC00 && lo <= 0xDFFF)
                        return one(0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00));
                    i_ = save;
                }
                return one(v);
            }
            case 'p':
            case 'P':
                unsupported("a Unicode property escape \\p{...}");
            case 'k':
                unsupported("a backreference \\k<name>");
            case '0':
                if (peek() >= '0' && peek() <= '9') unsupported("an octal escape");
                return one(0);
            default:
                break;
        }
        if (c >= '1' && c <= '9') {
            if (in_class) unsupported("an octal escape");
            unsupported("a backreference \\" + std::string(1, static_cast<char>(c)));
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            syntax(fmt::format("unknown escape \\{}", static_cast<char>(c)));
        }
        return one(c);  // an escaped syntax character (or any other non-letter)
    }

    Set char_class() {
        const bool negated = eat('^');
        Set s;
        // One class atom: a code point (single) or a class escape (several).
        auto class_atom = [&](bool& single) -> Set {
            if (!more()) syntax("missing ']'");
            const char32_t c = peek();
            ++i_;
            Set one;
            if (c == '\\') {
                if (peek() == '-') {
                    ++i_;
                    one = {{'-', '-'}};
                } else {
                    one = escape(true);
                }
            } else {
                one = {{c, c}};
            }
            single = one.size() == 1 && one[0].first == one[0].second;
            return one;
        };
        while (true) {
            if (!more()) syntax("missing ']'");
            if (eat(']')) break;
            bool single = false;
            Set a = class_atom(single);
            if (peek() == '-' && peek(1) != ']' && i_ + 1 < p_.size()) {
                ++i_;
                bool single_b = false;
                Set b = class_atom(single_b);
                if (!single || !single_b) syntax("a class escape in a range");
                if (a[0].first > b[0].first) syntax("range out of order in character class");
                s.push_back({a[0].first, b[0].first});
                continue;
            }
            s.insert(s.end(), a.begin(), a.end());
        }
        s = normalize(std::move(s));
        return negated ? negate(s) : s;
    }
};

// ---- automaton construction -----------------------------------------------------------------

struct NfaState {
    enum Kind : std::uint8_t { chars, split, begin, end, accept };
    Kind kind = split;
    int set = -1;  // chars: index into Nfa::sets
    int out = -1, out2 = -1;
};

struct Nfa {
    std::vector<NfaState> states;
    std::vector<Set> sets;
    int start = -1;

    int add(NfaState s) {
        if (states.size() >= RegexAutomaton::kMaxNfaStates) {
            throw RegexError(fmt::format("more than {} automaton states before determinisation",
                                         RegexAutomaton::kMaxNfaStates),
                             true);
        }
        states.push_back(s);
        return static_cast<int>(states.size()) - 1;
    }
};

// A fragment: entry state and the dangling exits (state, which out) to patch.
struct Frag {
    int in = -1;
    std::vector<std::pair<int, int>> outs;
};

class Thompson {
public:
    Nfa nfa;

    Frag build(const Node& n) {
        switch (n.kind) {
            case Node::empty:
                return epsilon();
            case Node::set: {
                nfa.sets.push_back(n.chars);
                NfaState s;
                s.kind = NfaState::chars;
                s.set = static_cast<int>(nfa.sets.size()) - 1;
                const int id = nfa.add(s);
                return {id, {{id, 0}}};
            }
            case Node::begin:
            case Node::end: {
                NfaState s;
                s.kind = n.kind == Node::begin ? NfaState::begin : NfaState::end;
                const int id = nfa.add(s);
                return {id, {{id, 0}}};
            }
            case Node::concat: {
                if (n.parts.empty()) return epsilon();
                Frag f = build(n.parts[0]);
                for (std::size_t k = 1; k < n.parts.size(); ++k) f = chain(f, build(n.parts[k]));
                return f;
            }
            case Node::alt: {
                Frag f = build(n.parts[0]);
                for (std::size_t k = 1; k < n.parts.size(); ++k) {
                    Frag g = build(n.parts[k]);
                    NfaState s;
                    s.out = f.in;
                    s.out2 = g.in;
                    const int id = nfa.add(s);
                    f.in = id;
                    f.outs.insert(f.outs.end(), g.outs.begin(), g.outs.end());
                }
                return f;
            }
            case Node::repeat: {
                const Node& body = n.parts[0];
                Frag f = epsilon();
                for (std::uint32_t k = 0; k < n.min; ++k) f = chain(f, build(body));
                if (n.unbounded) {
                    Frag b = build(body);
                    NfaState s;
                    s.out = b.in;
                    const int loop = nfa.add(s);
                    patch(b, loop);
                    return chain(f, {loop, {{loop, 1}}});
                }
                // Optional copies, nested: (b(b(b)?)?)?
                Frag opt = epsilon();
                bool have = false;
                for (std::uint32_t k = n.min; k < n.max; ++k) {
                    Frag b = build(body);
                    if (have) b = chain(b, opt);
                    NfaState s;
                    s.out = b.in;
                    const int id = nfa.add(s);
                    Frag o{id, b.outs};
                    o.outs.push_back({id, 1});
                    opt = o;
                    have = true;
                }
                return have ? chain(f, opt) : f;
            }
        }
        return epsilon();
    }

    Frag epsilon() {
        const int id = nfa.add(NfaState{});
        return {id, {{id, 0}}};
    }

    void patch(const Frag& f, int to) {
        for (const auto& [s, which] : f.outs) {
            auto& st = nfa.states[static_cast<std::size_t>(s)];
            (which == 0 ? st.out : st.out2) = to;
        }
    }

    Frag chain(const Frag& a, const Frag& b) {
        patch(a, b.in);
        return {a.in, b.outs};
    }
};

}  // namespace

class RegexBuilder {
public:
    static constexpr std::size_t kMaxWork = 50'000'000;         // closure and move steps
    static constexpr std::size_t kMaxTransitions = 16'000'000;  // states x classes

    // Subset construction. An item is an NFA state and whether `$` was passed (then only an
    // accept may follow); `^` passes only before the first code point.
    static std::shared_ptr<RegexAutomaton> determinise(const Nfa& nfa) {
        auto re = std::make_shared<RegexAutomaton>();
        // The alphabet: every set's boundaries, and the surrogates apart.
        std::vector<char32_t> cuts = {0, 0xD800, 0xE000, kMax + 1};
        for (const Set& s : nfa.sets) {
            for (const Range& r : s) {
                cuts.push_back(r.first);
                cuts.push_back(r.second + 1);
            }
        }
        std::sort(cuts.begin(), cuts.end());
        cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
        re->bounds_ = cuts;
        const std::size_t classes = cuts.size() - 1;
        // Work and memory stay bounded for any pattern (a request may carry a hostile one).
        std::size_t work = 0;
        auto spend = [&](std::size_t n) {
            work += n;
            if (work > kMaxWork)
                throw RegexError("an expression too complex to compile into an automaton", true);
        };

        using Items = std::vector<int>;  // sorted: state * 2 + ended
        std::vector<std::uint32_t> seen(nfa.states.size() * 2, 0);
        std::uint32_t visit = 0;
        auto closure = [&](std::vector<int> todo, bool at_start) {
            ++visit;
            Items out;
            while (!todo.empty()) {
                const int item = todo.back();
                todo.pop_back();
                if (item < 0 || seen[static_cast<std::size_t>(item)] == visit) continue;
                seen[static_cast<std::size_t>(item)] = visit;
                spend(1);
                out.push_back(item);
                const int s = item / 2;
                const bool ended = item % 2 != 0;
                const NfaState& st = nfa.states[static_cast<std::size_t>(s)];
                auto go = [&](int to, bool e) {
                    if (to >= 0) todo.push_back(to * 2 + (e ? 1 : 0));
                };
                switch (st.kind) {
                    case NfaState::split:
                        go(st.out, ended);
                        go(st.out2, ended);
                        break;
                    case NfaState::begin:
                        if (at_start) go(st.out, ended);
                        break;
                    case NfaState::end:
                        go(st.out, true);
                        break;
                    default:
                        break;
                }
            }
            std::sort(out.begin(), out.end());
            return out;
        };
        std::map<Items, int> index;
        std::vector<Items> sets;
        std::vector<int> trans;
        std::vector<std::uint8_t> accept;
        auto intern = [&](Items items) {
            auto it = index.find(items);
            if (it != index.end()) return it->second;
            if (sets.size() >= RegexAutomaton::kMaxStates ||
                (sets.size() + 1) * classes > kMaxTransitions) {
                throw RegexError(
                    fmt::format("more than {} automaton states", RegexAutomaton::kMaxStates), true);
            }
            const int id = static_cast<int>(sets.size());
            bool acc = false;
            for (int item : items) {
                if (nfa.states[static_cast<std::size_t>(item / 2)].kind == NfaState::accept)
                    acc = true;
            }
            index.emplace(items, id);
            sets.push_back(std::move(items));
            accept.push_back(acc ? 1 : 0);
            trans.resize(sets.size() * classes, -1);
            return id;
        };
        intern(closure({nfa.start * 2}, true));
        for (std::size_t d = 0; d < sets.size(); ++d) {
            for (std::size_t c = 0; c < classes; ++c) {
                if (cuts[c] >= 0xD800 && cuts[c] < 0xE000) continue;  // surrogates never step
                std::vector<int> next;
                spend(sets[d].size());
                for (int item : sets[d]) {
                    if (item % 2) continue;
                    const NfaState& st = nfa.states[static_cast<std::size_t>(item / 2)];
                    if (st.kind == NfaState::chars &&
                        contains(nfa.sets[static_cast<std::size_t>(st.set)], cuts[c]))
                        next.push_back(st.out * 2);
                }
                if (next.empty()) continue;
                const int to = intern(closure(std::move(next), false));
                trans[d * classes + c] = to;
            }
        }
        re->trans_ = std::move(trans);
        re->accept_ = std::move(accept);
        re->finish();
        return re;
    }
};

void RegexAutomaton::finish() {
    const std::size_t n = accept_.size();
    const std::size_t k = classes();
    // Shortest distance to acceptance (reverse breadth-first); unreachable: dead.
    std::vector<std::vector<int>> rev(n);
    for (std::size_t s = 0; s < n; ++s) {
        for (std::size_t c = 0; c < k; ++c) {
            const int t = trans_[s * k + c];
            if (t >= 0) rev[static_cast<std::size_t>(t)].push_back(static_cast<int>(s));
        }
    }
    constexpr std::uint32_t kDead = std::numeric_limits<std::uint32_t>::max();
    std::vector<std::uint32_t> dist(n, kDead);
    std::deque<int> q;
    for (std::size_t s = 0; s < n; ++s) {
        if (accept_[s]) {
            dist[s] = 0;
            q.push_back(static_cast<int>(s));
        }
    }
    while (!q.empty()) {
        const int s = q.front();
        q.pop_front();
        for (int p : rev[static_cast<std::size_t>(s)]) {
            if (dist[static_cast<std::size_t>(p)] == kDead) {
                dist[static_cast<std::size_t>(p)] = dist[static_cast<std::size_t>(s)] + 1;
                q.push_back(p);
            }
        }
    }
    if (n == 0 || dist[0] == kDead) throw RegexError("no string matches the pattern", false);
    // Renumber the live states (the start stays 0), dropping edges into dead ones.
    std::vector<int> id(n, -1);
    int next = 0;
    for (std::size_t s = 0; s < n; ++s) {
        if (dist[s] != kDead) id[s] = next++;
    }
    std::vector<int> trans(static_cast<std::size_t>(next) * k, -1);
    std::vector<std::uint8_t> accept(static_cast<std::size_t>(next));
    std::vector<std::uint32_t> shortest(static_cast<std::size_t>(next));
    for (std::size_t s = 0; s < n; ++s) {
        if (id[s] < 0) continue;
        const auto ns = static_cast<std::size_t>(id[s]);
        accept[ns] = accept_[s];
        shortest[ns] = dist[s];
        for (std::size_t c = 0; c < k; ++c) {
            const int t = trans_[s * k + c];
            trans[ns * k + c] = t >= 0 ? id[static_cast<std::size_t>(t)] : -1;
        }
    }
    trans_ = std::move(trans);
    accept_ = std::move(accept);
    shortest_ = std::move(shortest);
}

std::shared_ptr<const RegexAutomaton> RegexAutomaton::compile(std::string_view pattern) {
    if (pattern.size() > kMaxPatternBytes) {
        throw RegexError(fmt::format("an expression longer than {} bytes", kMaxPatternBytes), true);
    }
    Parser parser(decode_utf8(pattern));
    Node body = parser.parse();
    // Not anchored: any text may come before and after the match.
    Node any;
    any.kind = Node::set;
    any.chars = {{0, kMax}};
    Node around;
    around.kind = Node::repeat;
    around.unbounded = true;
    around.parts.push_back(any);
    Node whole;
    whole.kind = Node::concat;
    whole.parts = {around, std::move(body), around};
    Thompson t;
    const Frag f = t.build(whole);
    NfaState acc;
    acc.kind = NfaState::accept;
    const int accept = t.nfa.add(acc);
    t.patch(f, accept);
    t.nfa.start = f.in;
    return RegexBuilder::determinise(t.nfa);
}

std::shared_ptr<const RegexAutomaton> RegexAutomaton::intersect(const RegexAutomaton& a,
                                                                const RegexAutomaton& b) {
    auto re = std::make_shared<RegexAutomaton>();
    std::vector<char32_t> cuts = a.bounds_;
    cuts.insert(cuts.end(), b.bounds_.begin(), b.bounds_.end());
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    re->bounds_ = cuts;
    const std::size_t classes = cuts.size() - 1;
    auto class_of = [](const RegexAutomaton& r, char32_t cp) {
        return static_cast<std::size_t>(std::upper_bound(r.bounds_.begin(), r.bounds_.end(), cp) -
                                        r.bounds_.begin() - 1);
    };
    std::map<std::pair<int, int>, int> index;
    std::vector<std::pair<int, int>> pairs;
    auto intern = [&](std::pair<int, int> p) {
        auto it = index.find(p);
        if (it != index.end()) return it->second;
        if (pairs.size() >= kMaxStates ||
            (pairs.size() + 1) * classes > RegexBuilder::kMaxTransitions) {
            throw RegexError(
                fmt::format("more than {} automaton states together with the format", kMaxStates),
                true);
        }
        const int id = static_cast<int>(pairs.size());
        index.emplace(p, id);
        pairs.push_back(p);
        re->accept_.push_back(a.accepting(p.first) && b.accepting(p.second) ? 1 : 0);
        re->trans_.resize(pairs.size() * classes, -1);
        return id;
    };
    intern({a.start(), b.start()});
    for (std::size_t d = 0; d < pairs.size(); ++d) {
        for (std::size_t c = 0; c < classes; ++c) {
            const auto [x, y] = pairs[d];
            const int tx = a.target(x, class_of(a, cuts[c]));
            const int ty = b.target(y, class_of(b, cuts[c]));
            if (tx < 0 || ty < 0) continue;
            const int to = intern({tx, ty});
            re->trans_[d * classes + c] = to;
        }
    }
    re->finish();
    return re;
}

int RegexAutomaton::step(int state, char32_t cp) const {
    if (cp > kMaxCodePoint) return -1;
    const auto c = static_cast<std::size_t>(std::upper_bound(bounds_.begin(), bounds_.end(), cp) -
                                            bounds_.begin() - 1);
    return target(state, c);
}

bool RegexAutomaton::matches(std::u32string_view text) const {
    int s = start();
    for (char32_t cp : text) {
        s = step(s, cp);
        if (s < 0) return false;
    }
    return accepting(s);
}

// ---- lengths --------------------------------------------------------------------------------

RegexLengths::RegexLengths(const RegexAutomaton& re, std::size_t min_length,
                           std::size_t max_length) {
    const std::size_t n = re.states();
    bound_ = std::min(max_length, min_length + n);
    words_ = bound_ / 64 + 1;
    // Distinct successors of each state.
    std::vector<std::vector<int>> succ(n);
    std::size_t edges = 0;
    for (std::size_t s = 0; s < n; ++s) {
        for (std::size_t c = 0; c < re.classes(); ++c) {
            const int t = re.target(static_cast<int>(s), c);
            if (t >= 0) succ[s].push_back(t);
        }
        std::sort(succ[s].begin(), succ[s].end());
        succ[s].erase(std::unique(succ[s].begin(), succ[s].end()), succ[s].end());
        edges += succ[s].size();
    }
    if ((bound_ + 1) * (edges + n) > 64'000'000) {
        throw RegexError("minLength / maxLength over an automaton this large", true);
    }
    bits_.assign(n * words_, 0);
    auto set = [&](std::size_t s, std::size_t len) {
        bits_[s * words_ + len / 64] |= std::uint64_t{1} << (len % 64);
    };
    auto get = [&](std::size_t s, std::size_t len) {
        return (bits_[s * words_ + len / 64] >> (len % 64) & 1) != 0;
    };
    for (std::size_t s = 0; s < n; ++s) {
        if (re.accepting(static_cast<int>(s))) set(s, 0);
    }
    for (std::size_t len = 1; len <= bound_; ++len) {
        for (std::size_t s = 0; s < n; ++s) {
            for (int t : succ[s]) {
                if (get(static_cast<std::size_t>(t), len - 1)) {
                    set(s, len);
                    break;
                }
            }
        }
    }
}

bool RegexLengths::can_finish(int state, std::size_t lo, std::size_t hi) const {
    hi = std::min(hi, bound_);
    if (lo > hi) return false;
    const std::uint64_t* w = &bits_[static_cast<std::size_t>(state) * words_];
    for (std::size_t len = lo; len <= hi;) {
        const std::size_t word = len / 64;
        std::uint64_t bits = w[word] >> (len % 64);
        const std::size_t span = std::min<std::size_t>(64 - len % 64, hi - len + 1);
        if (span < 64) bits &= (std::uint64_t{1} << span) - 1;
        if (bits) return true;
        len += span;
    }
    return false;
}

}  // namespace neural::chat
