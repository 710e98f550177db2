// Where tests find the shared reference data and the built binaries.
#pragma once

#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "neural/error.h"

namespace neural::test {

// $NEURAL_SHARED_DIR, else the CMake variable NEURAL_SHARED_DIR (default ../shared).
std::filesystem::path shared_dir();
// shared_dir()/fixtures/tiny-gptoss-a
std::filesystem::path tiny_model_dir();
// Folder of the built `neural` binary ($NEURAL_BIN_DIR, else the build tree's engine/cli).
std::filesystem::path bin_dir();

// A fresh, empty temporary directory removed when the object dies.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

private:
    std::filesystem::path path_;
};

// Runs `f`, which must throw neural::Error; returns the message ("" and a test failure
// otherwise), so tests can check what an error says, not only that there was one.
template <typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    } catch (const std::exception& e) {
        ADD_FAILURE() << "expected neural::Error, got std::exception: " << e.what();
        return {};
    }
    ADD_FAILURE() << "expected neural::Error, nothing was thrown";
    return {};
}

nlohmann::json read_json(const std::filesystem::path& path);
std::string read_file(const std::filesystem::path& path);
void write_file(const std::filesystem::path& path, const std::string& bytes);

}  // namespace neural::test
