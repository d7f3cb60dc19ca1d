// The standalone epoch file: read, and replace through a temporary file so a crash never leaves
// a torn number behind.
#include "leader/epoch_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

namespace regent::leader {
namespace {

std::string errnoText() { return std::strerror(errno); }

Status writeAll(int fd, const std::string& text, const std::string& what,
                const std::string& path) {
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::fatal("cannot write " + what + " " + path + ": " + errnoText());
    written += static_cast<size_t>(n);
  }
  return Status();
}

}  // namespace

Result<std::optional<uint64_t>> readEpochFile(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    if (error) return Error::fatal("cannot read epoch file " + path + ": " + error.message());
    return std::optional<uint64_t>();
  }
  // An ifstream opens a directory and then reads nothing: say what is there instead.
  if (std::filesystem::is_directory(path, error)) {
    return Error::fatal("cannot read epoch file " + path + ": it is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error::fatal("cannot read epoch file " + path + ": " + errnoText());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  uint64_t epoch = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, epoch);
  if (text.empty() || ec != std::errc() || ptr != end) {
    std::string shown = text.size() > 40 ? text.substr(0, 40) + "..." : text;
    return Error::fatal("epoch file " + path +
                        " is corrupt: expected one decimal number, found \"" + shown + "\"");
  }
  return std::optional<uint64_t>(epoch);
}

Status writeEpochFile(const std::string& path, uint64_t epoch) {
  return replaceFileDurably(path, std::to_string(epoch) + "\n", "epoch file");
}

Status replaceFileDurably(const std::string& path, const std::string& contents,
                          const std::string& what) {
  // A temporary name of its own per call: writes of the same file may run at once on the
  // loop's thread pool (a standalone master's leader record), and must not share a half-written
  // temporary file.
  static std::atomic<uint64_t> writes{0};
  const std::string temp = path + ".tmp." + std::to_string(::getpid()) + "." +
                           std::to_string(writes.fetch_add(1, std::memory_order_relaxed));
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Error::fatal("cannot write " + what + " " + path + ": cannot create " + temp + ": " +
                        errnoText());
  }
  Status written = writeAll(fd, contents, what, temp);
  if (written && ::fsync(fd) != 0) {
    written = Error::fatal("cannot sync " + what + " " + temp + ": " + errnoText());
  }
  ::close(fd);
  if (written && ::rename(temp.c_str(), path.c_str()) != 0) {
    written = Error::fatal("cannot rename " + temp + " to " + path + ": " + errnoText());
  }
  if (!written) {
    ::unlink(temp.c_str());
    return written;
  }
  // The rename is durable only once the directory is synced.
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  int dirFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd < 0) return Error::fatal("cannot open directory " + dir.string() + ": " + errnoText());
  int rc = ::fsync(dirFd);
  ::close(dirFd);
  if (rc != 0) return Error::fatal("cannot sync directory " + dir.string() + ": " + errnoText());
  return Status();
}

Result<uint64_t> advanceEpochFile(const std::string& path) {
  auto last = readEpochFile(path);
  if (!last) return last.error();
  const uint64_t previous = last.value().value_or(0);
  if (previous == std::numeric_limits<uint64_t>::max()) {
    // Epoch 0 means "no term", and every reader of epochs expects them to rise.
    return Error::fatal("epoch file " + path + " holds " + std::to_string(previous) +
                        ", the largest epoch; the next would wrap to 0, so none is taken");
  }
  const uint64_t next = previous + 1;
  Status written = writeEpochFile(path, next);
  if (!written) return written.error();
  return next;
}

}  // namespace regent::leader
