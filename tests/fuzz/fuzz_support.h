// Helpers shared by the fuzz targets (tests/fuzz/README in docs/RELIABILITY.md). Every target
// defines LLVMFuzzerTestOneInput; it is linked either with libFuzzer (clang, NEURAL_FUZZ=ON) or
// with replay_main.cpp, which runs a corpus once (a ctest in every build, ASan included).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace neural {
class Tokenizer;
}

namespace neural::fuzz {

// An anonymous in-memory file (memfd) holding `bytes`; path() names it (/proc/self/fd/N) so the
// engine's path-based openers (mmap included) read it like a regular file. No disk I/O.
class MemFile {
public:
    explicit MemFile(std::string_view bytes, const char* name = "fuzz");
    ~MemFile();
    MemFile(const MemFile&) = delete;
    MemFile& operator=(const MemFile&) = delete;
    const std::filesystem::path& path() const { return path_; }

private:
    int fd_ = -1;
    std::filesystem::path path_;
};

// A fresh directory under /dev/shm (else the temp folder), removed with its files on destruction.
class MemDir {
public:
    MemDir();
    ~MemDir();
    MemDir(const MemDir&) = delete;
    MemDir& operator=(const MemDir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    void write(const std::string& name, std::string_view bytes) const;

private:
    std::filesystem::path path_;
};

// The real o200k_harmony tokenizer, loaded once: $NEURAL_FUZZ_TOKENIZER, else
// NEURAL_SHARED_DIR/fixtures/tiny-gptoss-a/tokenizer.json (the path compiled in). Exits with a
// message if it cannot be loaded (a setup problem, not a finding).
const Tokenizer& tokenizer();

// Reads a little-endian u32 at `p` (4 bytes).
inline std::uint32_t load_u32(const std::uint8_t* p) {
    return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
           (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

}  // namespace neural::fuzz
