// Reads the tokenizer a gpt-oss GGUF carries in its metadata (tokenizer.ggml.*: the byte-level
// BPE vocabulary, token types, merges and the pre-tokenizer's name) into the same form as
// tokenizer.json (TokenizerFile), so Tokenizer checks and builds both alike.
#pragma once

#include "tokenizer/tokenizer_json.h"

namespace neural {

class GgufFile;

// tokenizer.ggml.model must be "gpt2" (byte-level BPE) and tokenizer.ggml.pre "gpt-4o" (the
// o200k split); NORMAL tokens are byte-level keys, CONTROL and USER_DEFINED ones are special
// tokens, UNUSED ones (the converter's "[PAD...]" fill up to the embedding rows) are absent.
// Throws neural::Error naming the file and the key.
TokenizerFile read_tokenizer_gguf(const GgufFile& file);

}  // namespace neural
