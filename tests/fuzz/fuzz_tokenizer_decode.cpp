// Fuzz target: Tokenizer::decode / token_bytes on arbitrary ids (u32 LE each, any value:
// negative, past the vocabulary, in the gap between ordinary and special tokens). Unknown ids
// must throw neural::Error, never read out of bounds.
#include <cstdint>
#include <vector>

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
    std::vector<neural::TokenId> ids;
    for (std::size_t i = 0; i + 4 <= size; i += 4)
        ids.push_back(static_cast<neural::TokenId>(neural::fuzz::load_u32(data + i)));
    try {
        (void)tok.decode(ids);
    } catch (const neural::Error&) {
    }
    for (auto id : ids) {
        (void)tok.is_valid(id);
        (void)tok.is_special(id);
        try {
            (void)tok.token_bytes(id);
        } catch (const neural::Error&) {
        }
    }
    return 0;
}
