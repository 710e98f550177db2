#include "fuzz_support.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <system_error>

#include "neural/error.h"
#include "tokenizer/tokenizer.h"

namespace neural::fuzz {

namespace fs = std::filesystem;

MemFile::MemFile(std::string_view bytes, const char* name) {
    fd_ = ::memfd_create(name, MFD_CLOEXEC);
    if (fd_ < 0) {
        std::perror("memfd_create");
        std::abort();
    }
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
        if (n <= 0) {
            std::perror("write(memfd)");
            std::abort();
        }
        done += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
}

MemFile::~MemFile() {
    if (fd_ >= 0) ::close(fd_);
}

MemDir::MemDir() {
    static std::atomic<unsigned> counter{0};
    std::error_code ec;
    const fs::path base =
        fs::is_directory("/dev/shm", ec) ? fs::path("/dev/shm") : fs::temp_directory_path();
    for (int attempt = 0; attempt < 1000; ++attempt) {
        fs::path p =
            base / ("neural-fuzz-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
        if (fs::create_directory(p, ec)) {
            path_ = p;
            return;
        }
    }
    std::fprintf(stderr, "fuzz: cannot create a temporary directory under %s\n", base.c_str());
    std::abort();
}

MemDir::~MemDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
}

void MemDir::write(const std::string& name, std::string_view bytes) const {
    std::ofstream out(path_ / name, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

const Tokenizer& tokenizer() {
    static const std::unique_ptr<Tokenizer> tok = [] {
        fs::path path = NEURAL_FUZZ_DEFAULT_TOKENIZER;
        if (const char* env = std::getenv("NEURAL_FUZZ_TOKENIZER"); env != nullptr && *env != 0)
            path = env;
        try {
            return std::make_unique<Tokenizer>(Tokenizer::load(path));
        } catch (const Error& e) {
            std::fprintf(stderr,
                         "fuzz: cannot load the tokenizer (set NEURAL_FUZZ_TOKENIZER to a "
                         "tokenizer.json): %s\n",
                         e.what());
            std::exit(2);
        }
    }();
    return *tok;
}

}  // namespace neural::fuzz
