#include "tokenizer/tokenizer_gguf.h"

#include "model/gguf.h"
#include "neural/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"

namespace neural {

namespace {

// llama.cpp's token types (llama_token_type).
enum : std::int64_t {
    kNormal = 1,
    kUnknown = 2,
    kControl = 3,
    kUserDefined = 4,
    kUnused = 5,
    kByte = 6
};

}  // namespace

TokenizerFile read_tokenizer_gguf(const GgufFile& f) {
    const std::string file = f.path().string();
    if (f.find("tokenizer.ggml.tokens") == nullptr) {
        fail("{}: the GGUF has no tokenizer (metadata \"tokenizer.ggml.tokens\" is missing)", file);
    }
    const std::string model = f.get_string("tokenizer.ggml.model", true).value();
    if (model != "gpt2") {
        fail("{}: tokenizer.ggml.model is \"{}\"; gpt-oss uses byte-level BPE (\"gpt2\")", file,
             model);
    }
    const std::string pre = f.get_string("tokenizer.ggml.pre", true).value();
    if (pre != "gpt-4o") {
        fail("{}: tokenizer.ggml.pre is \"{}\": only the o200k split (\"gpt-4o\") is implemented",
             file, pre);
    }
    TokenizerFile out;
    out.split_regexes.emplace_back(PreTokenizer::kO200kPattern);
    const std::vector<std::string_view> tokens = f.get_strings("tokenizer.ggml.tokens");
    const std::vector<std::int64_t> types = f.get_ints("tokenizer.ggml.token_type");
    if (types.size() != tokens.size()) {
        fail("{}: tokenizer.ggml.token_type has {} entries, tokenizer.ggml.tokens {}", file,
             types.size(), tokens.size());
    }
    if (tokens.size() > (1u << 24)) fail("{}: {} tokens is implausibly many", file, tokens.size());
    out.tokens.resize(tokens.size());
    out.kinds.resize(tokens.size(), TokenKind::absent);
    std::size_t defined = 0;
    for (std::size_t id = 0; id < tokens.size(); ++id) {
        switch (types[id]) {
            case kNormal:
                if (!byte_level::decode_key(tokens[id], out.tokens[id]) || out.tokens[id].empty()) {
                    fail("{}: tokenizer.ggml.tokens[{}] (\"{}\") is not a byte-level token", file,
                         id, tokens[id]);
                }
                out.kinds[id] = TokenKind::ordinary;
                defined = id + 1;
                break;
            case kControl:
            case kUserDefined:
                if (tokens[id].empty()) fail("{}: special token {} is empty", file, id);
                out.tokens[id] = std::string(tokens[id]);
                out.kinds[id] = TokenKind::special;
                defined = id + 1;
                break;
            case kUnused:
                break;
            default:
                fail(
                    "{}: tokenizer.ggml.token_type[{}] is {} ({}), which a byte-level BPE "
                    "vocabulary does not use",
                    file, id, types[id],
                    types[id] == kUnknown ? "UNKNOWN"
                    : types[id] == kByte  ? "BYTE"
                                          : "undefined");
        }
    }
    // One past the last defined id, like tokenizer.json (the "[PAD]" fill is not vocabulary).
    out.tokens.resize(defined);
    out.kinds.resize(defined);
    if (f.find("tokenizer.ggml.merges") == nullptr) {
        fail("{}: metadata \"tokenizer.ggml.merges\" is missing", file);
    }
    for (std::string_view merge : f.get_strings("tokenizer.ggml.merges")) {
        // Byte-level keys never hold a space (0x20 is written as U+0120), so one separates them.
        const std::size_t sp = merge.find(' ');
        if (sp == std::string_view::npos || merge.find(' ', sp + 1) != std::string_view::npos) {
            fail("{}: tokenizer.ggml.merges entry {} (\"{}\") is not \"left right\"", file,
                 out.merge_count, merge);
        }
        if (out.merge_keys.size() + merge.size() > UINT32_MAX) {
            fail("{}: tokenizer.ggml.merges is too large", file);
        }
        out.merge_keys.append(merge.substr(0, sp));
        out.merge_ends.push_back(static_cast<std::uint32_t>(out.merge_keys.size()));
        out.merge_keys.append(merge.substr(sp + 1));
        out.merge_ends.push_back(static_cast<std::uint32_t>(out.merge_keys.size()));
        ++out.merge_count;
    }
    return out;
}

}  // namespace neural
