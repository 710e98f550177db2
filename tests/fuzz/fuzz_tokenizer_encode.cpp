// Fuzz target: Tokenizer::encode on arbitrary bytes (invalid UTF-8 included), with and without
// special tokens. Every id must be valid, and decoding the ids must give back the input bytes
// exactly (byte-level BPE is lossless; with special tokens allowed too, as they decode to their
// text).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

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
    const neural::Tokenizer& tok = neural::fuzz::tokenizer();
    if (size < 1) return 0;
    const bool special = (data[0] & 1) != 0;
    const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
    const auto ids = tok.encode(text, special);
    for (auto id : ids) {
        if (!tok.is_valid(id)) {
            std::fprintf(stderr, "encode produced invalid id %d\n", static_cast<int>(id));
            std::abort();
        }
    }
    if (tok.decode(ids) != text) {
        std::fprintf(stderr, "decode(encode(text)) != text (%zu bytes, special=%d)\n", text.size(),
                     special ? 1 : 0);
        std::abort();
    }
    return 0;
}
