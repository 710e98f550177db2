#include "support/fixtures.h"

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

namespace neural::test {

namespace fs = std::filesystem;

fs::path shared_dir() {
    if (const char* env = std::getenv("NEURAL_SHARED_DIR"); env != nullptr && *env != 0) {
        return fs::path(env);
    }
    return fs::path(NEURAL_DEFAULT_SHARED_DIR);
}

fs::path tiny_model_dir() { return shared_dir() / "fixtures" / "tiny-gptoss-a"; }

fs::path bin_dir() {
    if (const char* env = std::getenv("NEURAL_BIN_DIR"); env != nullptr && *env != 0) {
        return fs::path(env);
    }
    return fs::path(NEURAL_BINARY_DIR) / "engine" / "cli";
}

TempDir::TempDir() {
    static std::atomic<int> counter{0};
    std::random_device rd;
    for (int attempt = 0; attempt < 100; ++attempt) {
        fs::path p = fs::temp_directory_path() /
                     ("neural-test-" + std::to_string(rd()) + "-" + std::to_string(counter++));
        if (fs::create_directory(p)) {
            path_ = p;
            return;
        }
    }
    throw std::runtime_error("cannot create a temporary directory");
}

TempDir::~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path.string());
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void write_file(const fs::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path.string());
}

nlohmann::json read_json(const fs::path& path) { return nlohmann::json::parse(read_file(path)); }

}  // namespace neural::test
