// Fuzz target: the server's request-body validation, exactly as ApiServer::handleChat /
// handleCompletion run it (openai::parse_body under the depth limit, then
// parse_chat_request / parse_completion_request), followed by what the engine worker does with
// an accepted request before generating (GenerationQueue: render the conversation and tokenize
// it, encode forced output / a text prompt with special tokens). Input: byte 0 = options
// (bit 0 completions instead of chat, bit 1 test options allowed), then the body.
// A malformed body must end in openai::RequestError (HTTP 400), nothing else.
#include <cstdint>
#include <string_view>
#include <variant>

#include "api/openai.h"
#include "chat/render.h"
#include "fuzz_support.h"
#include "neural/error.h"
#include "tokenizer/tokenizer.h"

// libFuzzer calls this once before the first input: the tokenizer (a 27 MB JSON, seconds under
// ASan) loads here, outside the per-input -timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
    neural::fuzz::tokenizer();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace neural;
    const Tokenizer& tok = fuzz::tokenizer();
    if (size < 1) return 0;
    const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
    openai::ParseLimits limits;  // the server's defaults (max_json_depth 64)
    try {
        const openai::Json json = openai::parse_body(body, limits);
        if (data[0] & 1) {
            const openai::CompletionRequest req = openai::parse_completion_request(json, limits);
            if (const auto* text = std::get_if<std::string>(&req.prompt))
                (void)tok.encode(*text, true);
        } else {
            openai::ChatRequestOptions options;
            options.current_date = "2026-01-01";
            options.allow_test_options = (data[0] & 2) != 0;
            options.limits = limits;
            const openai::ChatRequest req = openai::parse_chat_request(json, options);
            (void)chat::render_for_completion(req.conversation()).tokens(tok);
            if (req.forced_output) (void)tok.encode(*req.forced_output, true);
        }
    } catch (const openai::RequestError&) {
        // HTTP 400 with an OpenAI error object: the expected outcome for a bad body.
    }
    return 0;
}
