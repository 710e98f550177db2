// Fuzz target: the harmony streaming parser (chat::StreamParser) on arbitrary token sequences.
// Input: byte 0 = options (bit 0 strict, bit 1 no preset role, bits 2-3 end-of-stream reason,
// bit 4 small header limit), then u32 LE token ids. Ids are mostly folded into the vocabulary
// (so specials and text tokens both occur often), some left as they are (unknown ids).
// Non-strict mode must never throw; strict mode may throw neural::Error only. The streaming
// events must agree with the messages, and Completion must accept every event.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "chat/parser.h"
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
    chat::ParseOptions options;
    options.strict = (data[0] & 1) != 0;
    if (data[0] & 2) options.role = std::nullopt;
    const chat::FinishReason reasons[] = {chat::FinishReason::length, chat::FinishReason::stop,
                                          chat::FinishReason::tool_calls,
                                          chat::FinishReason::length};
    const chat::FinishReason reason = reasons[(data[0] >> 2) & 3];
    if (data[0] & 16) options.max_header_tokens = 4;
    const auto vocab = static_cast<std::uint32_t>(tok.vocab_size());

    chat::StreamParser parser(tok, options);
    chat::Completion completion;
    std::vector<chat::ParserEvent> events;
    std::size_t message_ends = 0;
    try {
        for (std::size_t i = 1; i + 4 <= size; i += 4) {
            const std::uint32_t raw = fuzz::load_u32(data + i);
            // Top bit set: the raw value (unknown / negative ids); otherwise inside the vocab.
            const auto id = static_cast<TokenId>((raw & 0x80000000u) ? raw : raw % vocab);
            events.clear();
            parser.feed(id, events);
            for (const auto& e : events) {
                completion.add(e);
                if (e.type == chat::EventType::message_end) ++message_ends;
            }
            (void)parser.last_content_delta();
            if (parser.stopped()) break;
        }
        events.clear();
        parser.end_of_stream(events, reason);
        for (const auto& e : events) {
            completion.add(e);
            if (e.type == chat::EventType::message_end) ++message_ends;
        }
    } catch (const Error&) {
        if (!options.strict) {
            std::fprintf(stderr, "non-strict parser threw\n");
            std::abort();
        }
        return 0;
    }
    if (message_ends != parser.messages().size()) {
        std::fprintf(stderr, "%zu message_end events but %zu messages\n", message_ends,
                     parser.messages().size());
        std::abort();
    }
    if (!parser.finish_reason()) {
        std::fprintf(stderr, "no finish reason after end_of_stream\n");
        std::abort();
    }
    return 0;
}
