// Fuzz target: the JSON-schema grammar and recogniser (chat/json_schema_grammar.h). Input: a JSON
// schema, a NUL byte, then text. compile() may throw only SchemaError (or nlohmann's parse error
// for the schema text, which is skipped). The text is fed byte by byte; every prefix the
// recogniser accepts, completed with shortest_completion(), must be a whole value that
// nlohmann::json parses, and the completion must be accepted byte by byte.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "chat/json_schema_grammar.h"

namespace {

[[noreturn]] void broken(const char* what, const std::string& text) {
    std::fprintf(stderr, "fuzz_json_schema: %s: %s\n", what, text.c_str());
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace neural::chat;
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    const std::size_t nul = input.find('\0');
    if (nul == std::string_view::npos) return 0;
    nlohmann::ordered_json schema;
    try {
        schema = nlohmann::ordered_json::parse(input.substr(0, nul));
    } catch (const nlohmann::json::exception&) {
        return 0;
    }
    std::shared_ptr<const JsonSchemaGrammar> grammar;
    try {
        grammar = JsonSchemaGrammar::compile(schema);
    } catch (const SchemaError&) {
        return 0;
    }
    const std::string_view text = input.substr(nul + 1);
    JsonRecognizer rec(*grammar);
    std::string accepted;
    for (std::size_t i = 0; i <= text.size(); ++i) {
        const std::string completion = rec.shortest_completion();
        JsonRecognizer probe = rec;
        if (!probe.feed(completion) || !probe.complete())
            broken("completion refused", accepted + completion);
        if (!nlohmann::json::accept(accepted + completion))
            broken("completion not JSON", accepted + completion);
        if (i == text.size()) break;
        JsonRecognizer next = rec;
        if (next.feed(text[i])) {  // keep the bytes the recogniser takes, skip the others
            rec = next;
            accepted += text[i];
        }
    }
    return 0;
}
