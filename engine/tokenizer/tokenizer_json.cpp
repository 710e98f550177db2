#include "tokenizer/tokenizer_json.h"

#include <fstream>
#include <optional>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "neural/error.h"
#include "tokenizer/byte_level.h"

namespace neural {

namespace {

// Ids beyond this are surely corruption; refusing them avoids a huge allocation.
constexpr std::uint64_t kMaxId = 1u << 24;

std::string path_text(const std::filesystem::path& path) {
    const std::u8string u8 = path.u8string();
    return std::string(u8.begin(), u8.end());
}

// Walks the SAX events keeping a stack of where we are; only model.type, model.vocab,
// model.merges, added_tokens and pre_tokenizer regexes are looked at, the rest is skipped.
class Reader final : public nlohmann::json_sax<nlohmann::json> {
public:
    explicit Reader(std::string file) : file_(std::move(file)) {}

    TokenizerFile finish() {
        if (!saw_vocab_) fail("{}: missing model.vocab", file_);
        if (model_type_ && *model_type_ != "BPE") {
            fail("{}: model.type is \"{}\", only BPE is supported", file_, *model_type_);
        }
        merge_added_tokens();
        return std::move(out_);
    }

    bool null() override { return scalar(Value::other); }
    bool boolean(bool) override { return scalar(Value::boolean); }
    bool number_integer(number_integer_t v) override {
        if (v < 0) return scalar(Value::other);
        int_ = static_cast<std::uint64_t>(v);
        return scalar(Value::integer);
    }
    bool number_unsigned(number_unsigned_t v) override {
        int_ = v;
        return scalar(Value::integer);
    }
    bool number_float(number_float_t, const string_t&) override { return scalar(Value::other); }
    bool string(string_t& v) override {
        string_ = &v;
        return scalar(Value::string);
    }
    bool binary(binary_t&) override { return scalar(Value::other); }

    bool start_object(std::size_t) override { return open(/*is_object=*/true); }
    bool end_object() override {
        if (stack_.back() == Ctx::added_token) finish_added_token();
        stack_.pop_back();
        return true;
    }
    bool start_array(std::size_t) override { return open(/*is_object=*/false); }
    bool end_array() override {
        if (stack_.back() == Ctx::merge_pair && pair_items_ != 2) bad_merge();
        stack_.pop_back();
        return true;
    }
    bool key(string_t& k) override {
        key_ = std::move(k);
        return true;
    }

    bool parse_error(std::size_t, const std::string&,
                     const nlohmann::detail::exception& e) override {
        fail("{}: invalid JSON: {}", file_, e.what());
    }

private:
    enum class Ctx {
        root,
        model,
        vocab,
        merges,
        merge_pair,
        added_tokens,
        added_token,
        pre_tokenizer,
        skip,
    };
    enum class Value { string, integer, boolean, other };

    bool open(bool is_object) {
        if (stack_.empty()) {
            if (!is_object) not_object();
            stack_.push_back(Ctx::root);
            return true;
        }
        Ctx next = Ctx::skip;
        switch (stack_.back()) {
            case Ctx::root:
                if (key_ == "model") {
                    next = is_object ? Ctx::model : Ctx::skip;
                } else if (key_ == "added_tokens") {
                    if (is_object) fail("{}: added_tokens is not an array", file_);
                    next = Ctx::added_tokens;
                } else if (key_ == "pre_tokenizer") {
                    next = Ctx::pre_tokenizer;
                }
                break;
            case Ctx::model:
                if (key_ == "vocab") {
                    if (!is_object) fail("{}: model.vocab is not an object", file_);
                    saw_vocab_ = true;
                    next = Ctx::vocab;
                } else if (key_ == "merges") {
                    if (is_object) fail("{}: model.merges is not an array", file_);
                    next = Ctx::merges;
                }
                break;
            case Ctx::vocab:
                bad_vocab_value();
            case Ctx::merges:
                if (is_object) bad_merge();
                pair_items_ = 0;
                next = Ctx::merge_pair;
                break;
            case Ctx::merge_pair:
                bad_merge();
            case Ctx::added_tokens:
                if (!is_object) bad_added_token("is not an object");
                added_ = AddedToken{};
                next = Ctx::added_token;
                break;
            case Ctx::pre_tokenizer:
                next = Ctx::pre_tokenizer;
                break;
            case Ctx::added_token:
            case Ctx::skip:
                break;
        }
        stack_.push_back(next);
        return true;
    }

    bool scalar(Value kind) {
        if (stack_.empty()) not_object();
        switch (stack_.back()) {
            case Ctx::model:
                if (key_ == "type") {
                    if (kind != Value::string) fail("{}: model.type is not a string", file_);
                    model_type_ = *string_;
                } else if (key_ == "vocab") {
                    fail("{}: model.vocab is not an object", file_);
                } else if (key_ == "merges") {
                    fail("{}: model.merges is not an array", file_);
                }
                break;
            case Ctx::vocab:
                if (kind != Value::integer) bad_vocab_value();
                add_vocab_entry();
                break;
            case Ctx::merges:
                // "left right": byte-level keys never contain a raw space, so exactly one.
                if (kind != Value::string || string_->find(' ') == std::string::npos ||
                    string_->find(' ') != string_->rfind(' ')) {
                    bad_merge();
                }
                {
                    const std::size_t space = string_->find(' ');
                    add_merge_key(std::string_view(*string_).substr(0, space));
                    add_merge_key(std::string_view(*string_).substr(space + 1));
                }
                ++out_.merge_count;
                break;
            case Ctx::merge_pair:
                if (kind != Value::string) bad_merge();
                if (pair_items_ < 2) add_merge_key(*string_);
                if (++pair_items_ == 2) ++out_.merge_count;
                break;
            case Ctx::added_tokens:
                bad_added_token("is not an object");
            case Ctx::added_token:
                if (key_ == "id") {
                    if (kind != Value::integer || int_ >= kMaxId) {
                        bad_added_token("has no valid \"id\"");
                    }
                    added_.id = int_;
                } else if (key_ == "content") {
                    if (kind != Value::string) bad_added_token("has a non-string \"content\"");
                    added_.content = std::move(*string_);
                }
                break;
            case Ctx::pre_tokenizer:
                if (key_ == "Regex" && kind == Value::string) {
                    out_.split_regexes.push_back(*string_);
                }
                break;
            case Ctx::root:
            case Ctx::skip:
                break;
        }
        return true;
    }

    void add_merge_key(std::string_view key) {
        if (out_.merge_keys.size() + key.size() > UINT32_MAX)
            fail("{}: model.merges is too large", file_);
        out_.merge_keys.append(key);
        out_.merge_ends.push_back(static_cast<std::uint32_t>(out_.merge_keys.size()));
    }

    void add_vocab_entry() {
        if (int_ >= kMaxId) {
            fail("{}: model.vocab id {} for \"{}\" is out of range", file_, int_, key_);
        }
        const auto id = static_cast<std::size_t>(int_);
        if (id >= out_.tokens.size()) {
            out_.tokens.resize(id + 1);
            out_.kinds.resize(id + 1, TokenKind::absent);
        }
        if (out_.kinds[id] != TokenKind::absent) {
            fail("{}: model.vocab uses id {} twice", file_, id);
        }
        std::string& bytes = out_.tokens[id];
        if (!byte_level::decode_key(key_, bytes) || bytes.empty()) {
            fail("{}: model.vocab key \"{}\" (id {}) is not a byte-level token", file_, key_, id);
        }
        out_.kinds[id] = TokenKind::ordinary;
    }

    void finish_added_token() {
        if (!added_.id) bad_added_token("has no valid \"id\"");
        if (!added_.content || added_.content->empty()) bad_added_token("has no \"content\"");
        added_list_.push_back(std::move(added_));
        ++added_index_;
    }

    // added_tokens comes before model in HF files, so they are merged in only once the vocab
    // is complete.
    void merge_added_tokens() {
        for (AddedToken& added : added_list_) {
            const auto id = static_cast<std::size_t>(*added.id);
            if (id >= out_.tokens.size()) {
                out_.tokens.resize(id + 1);
                out_.kinds.resize(id + 1, TokenKind::absent);
            }
            // HF lets an added token repeat a vocab entry; then it must be the same string.
            if (out_.kinds[id] == TokenKind::ordinary && out_.tokens[id] != *added.content) {
                fail("{}: added token \"{}\" reuses vocab id {}", file_, *added.content, id);
            }
            if (out_.kinds[id] == TokenKind::special) {
                fail("{}: added_tokens uses id {} twice", file_, id);
            }
            // Non-special added tokens are also matched before BPE by HF; o200k has none, and
            // treating every added token as special keeps one rule.
            out_.tokens[id] = std::move(*added.content);
            out_.kinds[id] = TokenKind::special;
        }
    }

    [[noreturn]] void not_object() { fail("{}: the top level is not a JSON object", file_); }
    [[noreturn]] void bad_vocab_value() {
        fail("{}: model.vocab value for \"{}\" is not a non-negative integer", file_, key_);
    }
    [[noreturn]] void bad_merge() {
        fail("{}: model.merges entry {} is neither \"left right\" nor a 2-element array", file_,
             out_.merge_count);
    }
    [[noreturn]] void bad_added_token(std::string_view what) {
        fail("{}: added_tokens entry {} {}", file_, added_index_, what);
    }

    struct AddedToken {
        std::optional<std::uint64_t> id;
        std::optional<std::string> content;
    };

    std::string file_;
    TokenizerFile out_;
    std::vector<Ctx> stack_;
    std::string key_;
    // The scalar just reported, read by scalar() according to its Value kind.
    std::string* string_ = nullptr;
    std::uint64_t int_ = 0;
    std::size_t pair_items_ = 0;
    AddedToken added_;
    std::vector<AddedToken> added_list_;
    std::size_t added_index_ = 0;
    bool saw_vocab_ = false;
    std::optional<std::string> model_type_;
};

std::string read_bytes(const std::filesystem::path& path, const std::string& file) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) fail("tokenizer file {} does not exist", file);
    if (std::filesystem::is_directory(path, ec)) fail("tokenizer file {} is a directory", file);
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("cannot open tokenizer file {}", file);
    in.seekg(0, std::ios::end);
    const std::streamoff size = in.tellg();
    in.seekg(0, std::ios::beg);
    if (size < 0) fail("cannot read tokenizer file {}", file);
    std::string bytes(static_cast<std::size_t>(size), '\0');
    if (!in.read(bytes.data(), size)) fail("cannot read tokenizer file {}", file);
    return bytes;
}

}  // namespace

TokenizerFile read_tokenizer_json(const std::filesystem::path& path) {
    const std::string file = path_text(path);
    const std::string bytes = read_bytes(path, file);
    Reader reader(file);
    nlohmann::json::sax_parse(bytes, &reader);
    return reader.finish();
}

}  // namespace neural
