// Where tests find the shared reference data and the built binaries.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

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

nlohmann::json read_json(const std::filesystem::path& path);
std::string read_file(const std::filesystem::path& path);
void write_file(const std::filesystem::path& path, const std::string& bytes);

}  // namespace neural::test
