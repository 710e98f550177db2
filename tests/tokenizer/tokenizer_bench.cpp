// Tokenizer throughput: load time, encode MB/s on English prose (the pages of docs/), decode.
// Run: neural_tokenizer_bench [--benchmark_filter=Encode]. Not part of ctest.
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "support/fixtures.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace neural {
namespace {

std::filesystem::path tokenizer_path() { return test::tiny_model_dir() / "tokenizer.json"; }

const Tokenizer& o200k() {
    static const Tokenizer tokenizer = Tokenizer::load(tokenizer_path());
    return tokenizer;
}

// The repository's English markdown (docs/, a fixed order of pages); repeated to 1 MB so one
// iteration is long enough to time.
const std::string& english() {
    static const std::string text = [] {
        const std::filesystem::path dir = NEURAL_DOCS_DIR;
        std::string docs;
        for (const char* name :
             {"ARCHITECTURE.md", "MODEL.md", "CHAT_FORMAT.md", "USER_GUIDE.md"}) {
            docs += test::read_file(dir / name);
        }
        std::string out;
        while (out.size() < (1u << 20)) out += docs;
        return out;
    }();
    return text;
}

void BM_Load(benchmark::State& state) {
    for (auto _ : state) {
        Tokenizer t = Tokenizer::load(tokenizer_path());
        benchmark::DoNotOptimize(t.vocab_size());
    }
}
BENCHMARK(BM_Load)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_EncodeEnglish(benchmark::State& state) {
    const Tokenizer& t = o200k();
    const std::string& text = english();
    std::size_t tokens = 0;
    for (auto _ : state) {
        std::vector<TokenId> ids = t.encode(text);
        tokens = ids.size();
        benchmark::DoNotOptimize(ids.data());
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
    state.counters["tokens"] = static_cast<double>(tokens);
}
BENCHMARK(BM_EncodeEnglish)->Unit(benchmark::kMillisecond);

// The regex split alone, to see how encode time divides between PCRE2 and BPE.
void BM_PreTokenizeEnglish(benchmark::State& state) {
    const PreTokenizer pre;
    const std::string& text = english();
    std::vector<std::string_view> pieces;
    for (auto _ : state) {
        pieces.clear();
        pre.split(text, pieces);
        benchmark::DoNotOptimize(pieces.data());
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
    state.SetLabel(pre.jit() ? "PCRE2 JIT" : "PCRE2 interpreter");
}
BENCHMARK(BM_PreTokenizeEnglish)->Unit(benchmark::kMillisecond);

// Text that is not in the vocab as whole words (random letters), so nearly every piece runs
// the merge loop: the slow path's throughput.
void BM_EncodeRandomWords(benchmark::State& state) {
    const Tokenizer& t = o200k();
    std::string text;
    std::uint32_t x = 12345;
    while (text.size() < (1u << 20)) {
        x = x * 1664525u + 1013904223u;
        const std::size_t len = 3 + (x >> 28);
        text += ' ';
        for (std::size_t i = 0; i < len; ++i) {
            x = x * 1664525u + 1013904223u;
            text += static_cast<char>('a' + (x >> 24) % 26);
        }
    }
    for (auto _ : state) {
        std::vector<TokenId> ids = t.encode(text);
        benchmark::DoNotOptimize(ids.data());
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_EncodeRandomWords)->Unit(benchmark::kMillisecond);

void BM_Decode(benchmark::State& state) {
    const Tokenizer& t = o200k();
    const std::vector<TokenId> ids = t.encode(english());
    for (auto _ : state) {
        std::string text = t.decode(ids);
        benchmark::DoNotOptimize(text.data());
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * english().size()));
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace neural

BENCHMARK_MAIN();
