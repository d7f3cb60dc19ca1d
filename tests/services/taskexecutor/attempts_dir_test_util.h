// The attempts directory a ProcessTaskRunner under test is given
// (ProcessTaskRunnerOptions::attemptsFd), made and opened as the worker's data directory does it
// (services/worker/worker_data_dir.h).
#pragma once

#include <fcntl.h>
#include <kj/io.h>
#include <sys/stat.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace regent::testing {

// Creates `path` (parents too; mode 0711) if missing and opens it as a directory, never through a
// link. Throws std::runtime_error if it cannot (a broken test environment).
inline kj::AutoCloseFd openAttemptsDirForTests(const std::string& path) {
  std::filesystem::create_directories(path);
  ::chmod(path.c_str(), 0711);
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open the attempts directory " + path);
  return kj::AutoCloseFd(fd);
}

}  // namespace regent::testing
