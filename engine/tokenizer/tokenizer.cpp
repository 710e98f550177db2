#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "neural/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "model/gguf.h"
#include "tokenizer/tokenizer_gguf.h"
#include "tokenizer/tokenizer_json.h"
#include "platform/thread_scratch.h"

namespace neural {

struct Tokenizer::Impl {
    std::string file;
    std::vector<std::string> tokens;  // [id] raw bytes; special tokens hold their text
    std::vector<TokenKind> kinds;
    bpe::VocabIndex index;  // ordinary tokens only: special text is never merged into
    // Special tokens, longest first so that a longer one wins when two start at one place.
    std::vector<std::pair<std::string, TokenId>> specials;
    PreTokenizer pretokenizer;

    void encode_ordinary(std::string_view text, std::vector<TokenId>& out) const;
    void encode_with_specials(std::string_view text, std::vector<TokenId>& out) const;
};

namespace {

std::string path_text(const std::filesystem::path& path) {
    const std::u8string u8 = path.u8string();
    return std::string(u8.begin(), u8.end());
}

}  // namespace

Tokenizer Tokenizer::load(const std::filesystem::path& tokenizer_json) {
    return build(read_tokenizer_json(tokenizer_json), path_text(tokenizer_json));
}

Tokenizer Tokenizer::load(const GgufFile& gguf) {
    return build(read_tokenizer_gguf(gguf), path_text(gguf.path()) + " (tokenizer.ggml metadata)");
}

Tokenizer Tokenizer::build(TokenizerFile parsed, std::string source) {
    auto impl = std::make_unique<Impl>();
    impl->file = std::move(source);
    const std::string& file = impl->file;

    // Only the o200k split is implemented; a different pattern would tokenize silently wrong.
    for (const std::string& regex : parsed.split_regexes) {
        if (regex != PreTokenizer::kO200kPattern) {
            fail("{}: unsupported pre-tokenizer pattern \"{}\" (only o200k is implemented)", file,
                 regex);
        }
    }

    std::vector<std::uint8_t> ordinary(parsed.tokens.size());
    for (std::size_t id = 0; id < parsed.tokens.size(); ++id) {
        ordinary[id] = parsed.kinds[id] == TokenKind::ordinary;
    }
    if (const bpe::Rank dup = impl->index.build(parsed.tokens, ordinary); dup != bpe::kNoRank) {
        fail("{}: model.vocab id {} repeats the bytes of an earlier id", file, dup);
    }
    // Byte-level BPE starts from single bytes, so each of the 256 must be a token.
    for (int byte = 0; byte < 256; ++byte) {
        const char c = static_cast<char>(byte);
        if (impl->index.find(std::string_view(&c, 1)) == bpe::kNoRank) {
            fail("{}: model.vocab has no token for the single byte 0x{:02x}", file, byte);
        }
    }
    // Every merge names two vocab tokens whose concatenation is a token too: rank == id makes
    // the merges redundant for encoding, so one that disagrees with the vocab means the file is
    // damaged or belongs to another tokenizer. (Looked up in the BPE index: ~20 ms for o200k.)
    {
        const std::string_view keys = parsed.merge_keys;
        std::string left, right, joined;
        std::uint32_t begin = 0;
        for (std::size_t i = 0; i + 1 < parsed.merge_ends.size(); i += 2) {
            const std::uint32_t mid = parsed.merge_ends[i], end = parsed.merge_ends[i + 1];
            const std::string_view l = keys.substr(begin, mid - begin),
                                   r = keys.substr(mid, end - mid);
            begin = end;
            left.clear();  // decode_key appends
            right.clear();
            bool ok = byte_level::decode_key(l, left) && byte_level::decode_key(r, right);
            if (ok) {
                joined.assign(left).append(right);
                ok = impl->index.find(left) != bpe::kNoRank &&
                     impl->index.find(right) != bpe::kNoRank &&
                     impl->index.find(joined) != bpe::kNoRank;
            }
            if (!ok) {
                fail(
                    "{}: model.merges entry {} (\"{} {}\") names a token that model.vocab does "
                    "not have",
                    file, i / 2, l, r);
            }
        }
        parsed.merge_keys = {};
        parsed.merge_ends = {};
    }
    for (std::size_t id = 0; id < parsed.tokens.size(); ++id) {
        if (parsed.kinds[id] == TokenKind::special) {
            impl->specials.emplace_back(parsed.tokens[id], static_cast<TokenId>(id));
        }
    }
    std::stable_sort(impl->specials.begin(), impl->specials.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    impl->tokens = std::move(parsed.tokens);
    impl->kinds = std::move(parsed.kinds);
    return Tokenizer(std::move(impl));
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

void Tokenizer::Impl::encode_ordinary(std::string_view text, std::vector<TokenId>& out) const {
    auto& pieces = thread_scratch<std::vector<std::string_view>, struct EncodePieces>();
    pieces.clear();
    pretokenizer.split(text, pieces);
    for (std::string_view piece : pieces) bpe::encode_piece(index, piece, out);
}

void Tokenizer::Impl::encode_with_specials(std::string_view text, std::vector<TokenId>& out) const {
    // next_at[i]: where specials[i] next occurs at or after `pos` (npos: nowhere). Each is only
    // searched again once `pos` passes it, so the text is scanned a bounded number of times
    // per special token rather than once per occurrence.
    std::vector<std::size_t> next_at(specials.size());
    for (std::size_t i = 0; i < specials.size(); ++i) next_at[i] = text.find(specials[i].first);
    std::size_t pos = 0;
    while (true) {
        std::size_t best = std::string_view::npos;
        std::size_t which = 0;
        for (std::size_t i = 0; i < specials.size(); ++i) {
            // Strict <: on a tie the earlier entry, which is the longer token, wins.
            if (next_at[i] < best) {
                best = next_at[i];
                which = i;
            }
        }
        if (best == std::string_view::npos) break;
        encode_ordinary(text.substr(pos, best - pos), out);
        out.push_back(specials[which].second);
        pos = best + specials[which].first.size();
        for (std::size_t i = 0; i < specials.size(); ++i) {
            if (next_at[i] != std::string_view::npos && next_at[i] < pos) {
                next_at[i] = text.find(specials[i].first, pos);
            }
        }
    }
    encode_ordinary(text.substr(pos), out);
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, bool allow_special) const {
    std::vector<TokenId> out;
    // English averages about 4 bytes per token; reserving avoids most regrowth.
    out.reserve(text.size() / 4 + 4);
    if (allow_special && !impl_->specials.empty()) {
        impl_->encode_with_specials(text, out);
    } else {
        impl_->encode_ordinary(text, out);
    }
    return out;
}

std::string Tokenizer::decode(std::span<const TokenId> ids) const {
    std::size_t size = 0;
    for (TokenId id : ids) size += token_bytes(id).size();
    std::string out;
    out.reserve(size);
    for (TokenId id : ids) out += impl_->tokens[static_cast<std::size_t>(id)];
    return out;
}

const std::string& Tokenizer::token_bytes(TokenId id) const {
    if (!is_valid(id)) {
        fail("token id {} is not in the tokenizer vocabulary (ids 0..{})", id, vocab_size() - 1);
    }
    return impl_->tokens[static_cast<std::size_t>(id)];
}

std::optional<TokenId> Tokenizer::special_id(std::string_view text) const {
    for (const auto& [name, id] : impl_->specials) {
        if (name == text) return id;
    }
    return std::nullopt;
}

bool Tokenizer::is_special(TokenId id) const {
    return is_valid(id) && impl_->kinds[static_cast<std::size_t>(id)] == TokenKind::special;
}

bool Tokenizer::is_valid(TokenId id) const {
    return id >= 0 && static_cast<std::size_t>(id) < impl_->kinds.size() &&
           impl_->kinds[static_cast<std::size_t>(id)] != TokenKind::absent;
}

std::size_t Tokenizer::vocab_size() const { return impl_->tokens.size(); }

}  // namespace neural
