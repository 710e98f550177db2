// neural tokenize --model DIR TEXT | --decode 1,2,3
#include <fmt/format.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "model/gguf.h"
#include "neural/error.h"
#include "tokenizer/tokenizer.h"

namespace neural::cli {

namespace {
constexpr const char* kHelp = R"(usage: neural tokenize --model DIR [--special] TEXT
       neural tokenize --model DIR --decode ID[,ID...]

Encodes TEXT with the checkpoint's tokenizer (DIR/tokenizer.json, or a GGUF's tokenizer.ggml
metadata) and prints the ids, comma separated; or decodes a list of ids and prints the text.
  --model DIR     checkpoint folder (or a tokenizer.json file, or a GGUF file)
  --special       treat special-token text such as <|start|> as special tokens
  --decode IDS    decode instead of encode
)";
}

int cmd_tokenize(int argc, char** argv) {
    Args args(argc, argv, {"--model", "--decode"}, {"--help", "--special"});
    if (args.has("--help")) {
        fmt::print("{}", kHelp);
        return 0;
    }
    auto model = args.get("--model");
    if (!model) fail("--model DIR is required\n{}", kHelp);
    std::filesystem::path path(*model);
    if (std::filesystem::is_directory(path)) path /= "tokenizer.json";
    Tokenizer tok = is_gguf_path(path) ? Tokenizer::load(GgufFile::open(gguf_parts(path).front()))
                                       : Tokenizer::load(path);
    if (auto ids = args.get("--decode")) {
        if (!args.positional().empty()) fail("--decode takes no TEXT argument");
        fmt::print("{}\n", tok.decode(parse_id_list(*ids)));
        return 0;
    }
    if (args.positional().size() != 1) fail("expected exactly one TEXT argument\n{}", kHelp);
    auto ids = tok.encode(args.positional()[0], args.has("--special"));
    fmt::print("{}\n", fmt::join(ids, ","));
    return 0;
}

}  // namespace neural::cli
