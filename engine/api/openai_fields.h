// Field access with OpenAI-style errors, shared by the Chat Completions / Completions mapping
// (api/openai.cpp) and the Responses mapping (api/responses.cpp). Internal to engine/chat.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "api/openai.h"

namespace neural::openai::detail {

std::string type_name(const Json& v);  // "a string", "an object", ...
[[noreturn]] void wrong_type(const std::string& param, const char* expected, const Json& v);
// The value of `key`, or nullptr when it is absent or null (OpenAI treats null as "not given").
const Json* field(const Json& obj, const char* key);
std::optional<std::string> get_string(const Json& obj, const char* key, const std::string& param);
std::optional<bool> get_bool(const Json& obj, const char* key, const std::string& param);
std::optional<double> get_number(const Json& obj, const char* key, const std::string& param);
std::optional<std::int64_t> get_integer(const Json& obj, const char* key, const std::string& param);
[[noreturn]] void missing(const std::string& param);
[[noreturn]] void unsupported(const std::string& param, const std::string& why);
// Keys of `obj` outside `allowed` are a 400, or, inside a LenientScope, recorded and skipped.
void check_keys(const Json& obj, const std::set<std::string_view>& allowed,
                const std::string& where);
// "messages[3].foo" -> "messages[].foo".
std::string field_name(const std::string& param);

// While it lives, check_keys records unknown fields in `out` instead of refusing them (unless
// `strict`). Scopes nest; parsing runs on one thread from start to end.
class LenientScope {
public:
    LenientScope(bool strict, std::vector<std::string>& out);
    ~LenientScope();
    LenientScope(const LenientScope&) = delete;
    LenientScope& operator=(const LenientScope&) = delete;

private:
    std::vector<std::string>* previous_;
};

}  // namespace neural::openai::detail
