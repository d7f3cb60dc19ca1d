// WorkerDataDir (see worker_data_dir.h): the lock file and the resource id file.
#include "services/worker/worker_data_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <optional>
#include <sstream>
#include <system_error>

#include "leader/epoch_file.h"

namespace regent::worker {
namespace {

std::string errnoText(int error) { return std::strerror(error); }

// At most `limit` bytes of `path` (the whole file if smaller), or an error naming it.
Result<std::string> readSmallFile(const std::string& path, size_t limit) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error::fatal("cannot read " + path + ": " + errnoText(errno));
  std::string contents(limit, '\0');
  size_t have = 0;
  while (have < limit) {
    const ssize_t n = ::read(fd, contents.data() + have, limit - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return Error::fatal("cannot read " + path + ": " + errnoText(error));
    }
    if (n == 0) break;
    have += static_cast<size_t>(n);
  }
  ::close(fd);
  contents.resize(have);
  return contents;
}

// "host pid started_at_ms", as the lock file holds it.
std::string holderLine(const DataDirHolder& holder) {
  return holder.host + " " + std::to_string(holder.pid) + " " +
         std::to_string(holder.startedAtMs) + "\n";
}

std::optional<DataDirHolder> parseHolder(const std::string& text) {
  std::istringstream in(text);
  DataDirHolder holder;
  if (!(in >> holder.host >> holder.pid >> holder.startedAtMs)) return std::nullopt;
  return holder;
}

// Replaces the lock file's contents with `self` through the locked descriptor (the lock belongs to
// the open file, so the file itself is never replaced).
Status writeHolder(int fd, const std::string& path, const DataDirHolder& self) {
  const std::string line = holderLine(self);
  if (::ftruncate(fd, 0) != 0) return Error::fatal("cannot write " + path + ": " + errnoText(errno));
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::pwrite(fd, line.data() + done, line.size() - done, off_t(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::fatal("cannot write " + path + ": " + errnoText(errno));
    done += static_cast<size_t>(n);
  }
  return Status();
}

// What a corrupt resource id file holds, for the error: its first bytes, made printable.
std::string shown(const std::string& contents) {
  if (contents.empty()) return "it is empty";
  std::string head = contents.substr(0, 64);
  for (char& c : head) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return "it holds \"" + head + (contents.size() > 64 ? "..." : "") + "\" (" +
         std::to_string(contents.size()) + " bytes)";
}

}  // namespace

std::string describeHolder(const DataDirHolder& holder) {
  std::string started = "unknown";
  if (holder.startedAtMs > 0) {
    const std::time_t seconds = static_cast<std::time_t>(holder.startedAtMs / 1000);
    std::tm utc{};
    char text[32] = {};
    if (::gmtime_r(&seconds, &utc) != nullptr &&
        std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc) > 0) {
      started = text;
    }
  }
  return "host " + holder.host + " pid " + std::to_string(holder.pid) + " (started " + started +
         ")";
}

Result<std::unique_ptr<WorkerDataDir>> WorkerDataDir::open(const std::string& dir,
                                                           const DataDirHolder& self) {
  const std::string where = "worker.data-dir " + dir;
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    std::filesystem::create_directories(dir, error);
    if (error) return Error::fatal("cannot create " + where + ": " + error.message());
    // create_directories uses 0777 & ~umask; the directory is the worker's alone.
    if (::chmod(dir.c_str(), 0700) != 0) {
      return Error::fatal("cannot make " + where + " private (chmod 0700): " + errnoText(errno));
    }
  }

  const std::string lockPath = (std::filesystem::path(dir) / kLockFile).string();
  const int fd = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Error::fatal("cannot open the lock file " + lockPath + ": " + errnoText(errno));
  // Owns `fd` from here: every return below closes it (and so releases the lock) unless it is
  // handed to the result.
  std::unique_ptr<WorkerDataDir> opened(new WorkerDataDir(dir, fd));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) {
      return Error::fatal("cannot lock " + lockPath + ": " + errnoText(errno));
    }
    // The holder wrote its line right after locking; an unreadable line means it is still
    // writing it (or a tool changed the file).
    auto contents = readSmallFile(lockPath, 512);
    std::optional<DataDirHolder> holder =
        contents.ok() ? parseHolder(contents.value()) : std::nullopt;
    const std::string whom = holder ? "the worker on " + describeHolder(*holder)
                                    : "another worker (its lock file " + lockPath +
                                          " does not name it yet)";
    return Error::retryable(where + " is in use by " + whom + "; this worker is host " +
                            self.host + " pid " + std::to_string(self.pid));
  }
  if (auto written = writeHolder(fd, lockPath, self); !written.ok()) return written.error();

  const std::string idPath = (std::filesystem::path(dir) / kResourceIdFile).string();
  if (!std::filesystem::exists(idPath, error)) {
    if (error) return Error::fatal("cannot read " + idPath + ": " + error.message());
    opened->resourceId_ = ResourceId::random();
    auto written = leader::replaceFileDurably(idPath, opened->resourceId_.toHex() + "\n",
                                              "resource id file");
    if (!written.ok()) return written.error();
    opened->created_ = true;
    return opened;
  }
  auto contents = readSmallFile(idPath, 4096);
  if (!contents.ok()) return contents.error();
  std::string text = contents.value();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  auto id = ResourceId::fromHex(text);
  if (!id) {
    return Error::fatal("the resource id file " + idPath +
                        " is corrupt: it must hold exactly 32 hex digits, but " +
                        shown(contents.value()) +
                        "; it is left as it is (restore it, or remove it to start as a new worker)");
  }
  opened->resourceId_ = *id;
  return opened;
}

WorkerDataDir::~WorkerDataDir() { ::close(lockFd_); }

}  // namespace regent::worker
