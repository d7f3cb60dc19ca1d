// Test helpers for conf/: a scratch directory for config files, removed on destruction.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

namespace regent {

class ScratchDirForTests final {
 public:
  ScratchDirForTests() {
    std::string pattern = (std::filesystem::temp_directory_path() / "regent-conf-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~ScratchDirForTests() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDirForTests(const ScratchDirForTests&) = delete;
  ScratchDirForTests& operator=(const ScratchDirForTests&) = delete;

  // Writes `contents` to `name` in the directory and returns the file's path.
  std::string write(const std::string& name, const std::string& contents) const {
    const std::string file = (path_ / name).string();
    std::ofstream(file, std::ios::binary) << contents;
    return file;
  }

  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace regent
