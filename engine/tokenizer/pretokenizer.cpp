#include "tokenizer/pretokenizer.h"

#include <memory>
#include <string>

#include <pcre2.h>

#include "neural/error.h"

namespace neural {

namespace {

// The canonical o200k spelling (as in tokenizer.json and tiktoken). Alternatives are tried left
// to right at each position: words (with an optional leading non-letter and English
// contractions), 1-3 digit groups, punctuation runs, newline runs, and whitespace that leaves
// its last space to the following word.
constexpr std::string_view kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3})"
    R"(| ?[^\s\p{L}\p{N}]+[\r\n/]*)"
    R"(|\s*[\r\n]+)"
    R"(|\s+(?!\S))"
    R"(|\s+)";

// The Unicode White_Space property, which is what \s means to tiktoken's regex engine (Rust
// regex / fancy-regex). PCRE2's \s with UCP also matches U+180E, a space only before Unicode
// 6.3, so the pattern PCRE2 runs spells whitespace out.
#define NEURAL_O200K_WS \
    R"(\t-\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})"

// kPattern with \s and \S replaced by NEURAL_O200K_WS.
constexpr std::string_view kPcre2Pattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3})"
    R"(| ?[^)" NEURAL_O200K_WS R"(\p{L}\p{N}]+[\r\n/]*)"
    R"(|[)" NEURAL_O200K_WS R"(]*[\r\n]+)"
    R"(|[)" NEURAL_O200K_WS R"(]+(?![^)" NEURAL_O200K_WS R"(]))"
    R"(|[)" NEURAL_O200K_WS R"(]+)";

#undef NEURAL_O200K_WS

std::string pcre2_message(int code) {
    PCRE2_UCHAR buffer[256];
    if (pcre2_get_error_message(code, buffer, sizeof buffer) < 0) {
        return "PCRE2 error " + std::to_string(code);
    }
    return reinterpret_cast<const char*>(buffer);
}

pcre2_code* as_code(void* p) { return static_cast<pcre2_code*>(p); }

struct MatchDataDeleter {
    void operator()(pcre2_match_data* p) const { pcre2_match_data_free(p); }
};
struct JitStackDeleter {
    void operator()(pcre2_jit_stack* p) const { pcre2_jit_stack_free(p); }
};
struct MatchContextDeleter {
    void operator()(pcre2_match_context* p) const { pcre2_match_context_free(p); }
};

}  // namespace

const std::string_view PreTokenizer::kO200kPattern = kPattern;

PreTokenizer::PreTokenizer() {
    int error = 0;
    PCRE2_SIZE offset = 0;
    // MATCH_INVALID_UTF: text is user input and may be broken UTF-8; PCRE2 then never matches
    // across an invalid sequence instead of rejecting the whole subject, and split() hands the
    // skipped bytes to byte-level BPE.
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPcre2Pattern.data()), kPcre2Pattern.size(),
                      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
    if (code == nullptr) {
        fail("cannot compile the o200k pre-tokenizer pattern at offset {}: {}", offset,
             pcre2_message(error));
    }
    code_ = code;
    // JIT is optional (not every PCRE2 build or CPU has it); the interpreter gives the same
    // matches, only slower.
    jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

PreTokenizer::~PreTokenizer() { pcre2_code_free(as_code(code_)); }

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& pieces) const {
    std::unique_ptr<pcre2_match_data, MatchDataDeleter> match(
        pcre2_match_data_create_from_pattern(as_code(code_), nullptr));
    if (!match) fail("out of memory creating PCRE2 match data");
    // Created only if the default 32 KiB JIT stack runs out (it does not for this pattern in
    // practice, but the pattern's look-ahead and nested repeats make no hard promise).
    std::unique_ptr<pcre2_match_context, MatchContextDeleter> context;
    std::unique_ptr<pcre2_jit_stack, JitStackDeleter> stack;

    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    std::size_t pos = 0;
    while (pos < text.size()) {
        const int rc =
            pcre2_match(as_code(code_), subject, text.size(), pos, 0, match.get(), context.get());
        if (rc == PCRE2_ERROR_NOMATCH) {
            pieces.push_back(text.substr(pos));
            return;
        }
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !stack) {
            context.reset(pcre2_match_context_create(nullptr));
            stack.reset(pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, nullptr));
            if (!context || !stack) fail("out of memory creating a PCRE2 JIT stack");
            pcre2_jit_stack_assign(context.get(), nullptr, stack.get());
            continue;
        }
        if (rc < 0) {
            fail("pre-tokenizer failed at byte {} of {}: {}", pos, text.size(), pcre2_message(rc));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match.get());
        std::size_t start = ov[0];
        std::size_t end = ov[1];
        // Every valid character is matched by some alternative, so a gap before the match is
        // invalid UTF-8: keep it as one piece so that BPE still encodes those bytes.
        if (start > pos) pieces.push_back(text.substr(pos, start - pos));
        if (end <= start) {
            // The pattern cannot match empty, but never loop forever if it somehow does.
            end = start + 1;
        }
        pieces.push_back(text.substr(start, end - start));
        pos = end;
    }
}

}  // namespace neural
