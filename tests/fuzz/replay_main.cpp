// main() for the fuzz targets in ordinary builds (no libFuzzer): runs LLVMFuzzerTestOneInput once
// on every file given, or on every file in the folders given, so a corpus (seeds and the inputs
// of fixed crashes) is replayed as a regression test under any compiler and sanitizer. A crash,
// an escaping exception or a sanitizer report fails the run.
//
// --mutate SECONDS [--seed N]: afterwards, for SECONDS, feeds random mutations of the corpus
// inputs (bit flips, random and boundary bytes, inserted/deleted/duplicated ranges, splices of
// two inputs, at most 64 KiB). No coverage guidance -- libFuzzer does that (scripts/fuzz.sh) --
// but it needs no clang build, so CI runs every target this way under g++ (and its sanitizer
// pass). The sequence is a function of the seed: a failure prints the seed and the input's
// number; `--mutate 0 --seed N --save-from K FILE` then writes inputs K, K+1, ... to FILE just
// before running each, so the crashing one is left in FILE.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using Bytes = std::vector<std::uint8_t>;
constexpr std::size_t kMaxLen = 64 * 1024;

// One to four mutations of `in` (another corpus input for splices).
Bytes mutate(const Bytes& in, const Bytes& other, std::mt19937_64& rng) {
    Bytes b = in;
    auto pick = [&](std::size_t n) {
        return n == 0 ? std::size_t{0} : static_cast<std::size_t>(rng() % n);
    };
    static const std::uint8_t kInteresting[] = {0x00, 0x01, 0x7F, 0x80, 0xFF, '{',  '}',
                                                '[',  ']',  '"',  ':',  ',',  '\\', '-',
                                                '0',  '9',  'e',  'E',  '.',  '\n'};
    const int rounds = 1 + static_cast<int>(rng() % 4);
    for (int r = 0; r < rounds; ++r) {
        switch (rng() % 7) {
            case 0:  // flip a bit
                if (!b.empty()) b[pick(b.size())] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
                break;
            case 1:  // a random byte
                if (!b.empty()) b[pick(b.size())] = static_cast<std::uint8_t>(rng());
                break;
            case 2:  // a boundary / syntax byte
                if (!b.empty()) b[pick(b.size())] = kInteresting[pick(sizeof kInteresting)];
                break;
            case 3: {  // insert 1-8 bytes
                const std::size_t at = pick(b.size() + 1), n = 1 + pick(8);
                Bytes ins(n);
                for (auto& c : ins)
                    c = rng() % 2 ? kInteresting[pick(sizeof kInteresting)]
                                  : static_cast<std::uint8_t>(rng());
                b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), ins.begin(), ins.end());
                break;
            }
            case 4: {  // delete a range
                if (b.empty()) break;
                const std::size_t at = pick(b.size()),
                                  n = 1 + pick(std::min<std::size_t>(b.size() - at, 64));
                b.erase(b.begin() + static_cast<std::ptrdiff_t>(at),
                        b.begin() + static_cast<std::ptrdiff_t>(at + n));
                break;
            }
            case 5: {  // duplicate a range
                if (b.empty()) break;
                const std::size_t at = pick(b.size()),
                                  n = 1 + pick(std::min<std::size_t>(b.size() - at, 64));
                const Bytes copy(b.begin() + static_cast<std::ptrdiff_t>(at),
                                 b.begin() + static_cast<std::ptrdiff_t>(at + n));
                b.insert(b.begin() + static_cast<std::ptrdiff_t>(pick(b.size() + 1)), copy.begin(),
                         copy.end());
                break;
            }
            default: {  // splice: a prefix of this input, a suffix of another
                const std::size_t cut = pick(b.size() + 1), from = pick(other.size() + 1);
                b.resize(cut);
                b.insert(b.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
                break;
            }
        }
        if (b.size() > kMaxLen) b.resize(kMaxLen);
    }
    return b;
}

}  // namespace

int main(int argc, char** argv) {
    namespace fs = std::filesystem;
    std::vector<fs::path> files;
    double mutate_seconds = -1;
    std::uint64_t seed = 1;
    std::uint64_t save_from = UINT64_MAX;
    std::string save_file;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--mutate" && i + 1 < argc) {
            mutate_seconds = std::atof(argv[++i]);
            continue;
        }
        if (a == "--seed" && i + 1 < argc) {
            seed = std::strtoull(argv[++i], nullptr, 10);
            continue;
        }
        if (a == "--save-from" && i + 2 < argc) {
            save_from = std::strtoull(argv[++i], nullptr, 10);
            save_file = argv[++i];
            continue;
        }
        const fs::path arg = a;
        if (fs::is_directory(arg)) {
            for (const auto& e : fs::recursive_directory_iterator(arg)) {
                if (e.is_regular_file()) files.push_back(e.path());
            }
        } else if (fs::is_regular_file(arg)) {
            files.push_back(arg);
        } else {
            std::fprintf(stderr, "replay: %s is neither a file nor a folder\n", argv[i]);
            return 2;
        }
    }
    if (files.empty()) {
        std::fprintf(stderr,
                     "usage: %s [--mutate SECONDS [--seed N] [--save-from K FILE]] "
                     "CORPUS_DIR_OR_FILE... (found no inputs)\n",
                     argv[0]);
        return 2;
    }
    std::sort(files.begin(), files.end());
    std::vector<Bytes> corpus;
    for (const auto& f : files) {
        std::ifstream in(f, std::ios::binary);
        const std::string bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
        // A copy of exactly the input's size, so ASan sees reads past its end.
        Bytes buf(bytes.begin(), bytes.end());
        LLVMFuzzerTestOneInput(buf.data(), buf.size());
        corpus.push_back(std::move(buf));
    }
    std::printf("replayed %zu inputs\n", files.size());
    if (mutate_seconds < 0 && save_from == UINT64_MAX) return 0;

    std::fprintf(stderr, "mutate: seed %llu, %.0f s\n", static_cast<unsigned long long>(seed),
                 mutate_seconds);
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::duration<double>(std::max(0.0, mutate_seconds));
    std::uint64_t k = 0;
    for (;; ++k) {
        // Each input is a function of (seed, k) alone, so --save-from can regenerate input k.
        std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + k);
        const Bytes& base = corpus[static_cast<std::size_t>(rng() % corpus.size())];
        const Bytes& other = corpus[static_cast<std::size_t>(rng() % corpus.size())];
        const Bytes input = mutate(base, other, rng);
        if (k >= save_from) {
            std::ofstream out(save_file, std::ios::binary | std::ios::trunc);
            out.write(reinterpret_cast<const char*>(input.data()),
                      static_cast<std::streamsize>(input.size()));
        }
        if (k % 1024 == 0)
            std::fprintf(stderr, "mutate: input %llu\n", static_cast<unsigned long long>(k));
        Bytes buf = input;  // exactly sized, as above
        LLVMFuzzerTestOneInput(buf.data(), buf.size());
        const bool timed = mutate_seconds > 0 && std::chrono::steady_clock::now() >= until;
        const bool done_saving =
            save_from != UINT64_MAX && mutate_seconds <= 0 && k >= save_from + 100000;
        if (timed || done_saving || (mutate_seconds <= 0 && save_from == UINT64_MAX)) break;
    }
    std::printf("mutated %llu inputs (seed %llu)\n", static_cast<unsigned long long>(k + 1),
                static_cast<unsigned long long>(seed));
    return 0;
}
