// WorkerDataDir (see worker_data_dir.h): the lock file and the resource id file.
#include "services/worker/worker_data_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
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

// At most `limit` bytes of `name` in the directory `dirFd` (the whole file if smaller), never
// through a link, or an error naming `path`.
Result<std::string> readSmallFile(int dirFd, const char* name, const std::string& path,
                                  size_t limit) {
  const int fd = ::openat(dirFd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
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

std::string octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// Checks `real` (a resolved path of an existing directory) and every directory above it.
Status checkResolved(const std::filesystem::path& real, bool realIsDataDir,
                     std::optional<uid_t> taskUid) {
  bool isDataDir = realIsDataDir;
  for (std::filesystem::path at = real;; at = at.parent_path()) {
    struct stat info {};
    if (::lstat(at.c_str(), &info) != 0) {
      return Error::fatal("cannot check " + at.string() + " (on the way to worker.data-dir): " +
                          errnoText(errno));
    }
    if (!S_ISDIR(info.st_mode)) {
      return Error::fatal(std::string(isDataDir ? "worker.data-dir " : "") + at.string() +
                          " is not a directory");
    }
    if (auto reason = unsafeDirectoryReason(info.st_uid, info.st_mode, isDataDir, taskUid)) {
      return Error::fatal(std::string(isDataDir ? "worker.data-dir " : "") + at.string() +
                          (isDataDir ? "" : " (above worker.data-dir)") + " is unsafe: " +
                          *reason +
                          "; a task could rename or replace what the worker keeps there "
                          "(docs/security.md, \"Tasks\")");
    }
    isDataDir = false;
    if (at == at.root_path() || !at.has_relative_path()) break;
  }
  return Status();
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

std::optional<std::string> unsafeDirectoryReason(uid_t owner, mode_t mode, bool isDataDir,
                                                 std::optional<uid_t> taskUid) {
  if (!S_ISDIR(mode)) return std::string("it is not a directory");
  if (taskUid && owner == *taskUid) {
    return "it is owned by the task user (uid " + std::to_string(owner) + ")";
  }
  const bool othersWrite = (mode & (S_IWGRP | S_IWOTH)) != 0;
  if (othersWrite && isDataDir) {
    return "it is writable by its group or others (mode " + octal(mode) + ")";
  }
  if (othersWrite && (mode & S_ISVTX) == 0) {
    return "it is writable by its group or others without the sticky bit (mode " + octal(mode) +
           ")";
  }
  return std::nullopt;
}

Status checkDataDirPath(const std::string& dir, std::optional<uid_t> taskUid) {
  std::error_code error;
  std::filesystem::path at = std::filesystem::absolute(dir, error).lexically_normal();
  if (error) return Error::fatal("cannot resolve worker.data-dir " + dir + ": " + error.message());
  while (at.has_relative_path() && at.filename().empty()) at = at.parent_path();
  // The closest existing directory: the data directory itself, or where it would be created.
  bool exists = true;
  struct stat info {};
  while (::stat(at.c_str(), &info) != 0) {
    if (errno != ENOENT) {
      return Error::fatal("cannot check " + at.string() + " (on the way to worker.data-dir): " +
                          errnoText(errno));
    }
    exists = false;
    if (at == at.root_path()) break;
    at = at.parent_path();
  }
  char resolved[PATH_MAX];
  if (::realpath(at.c_str(), resolved) == nullptr) {
    return Error::fatal("cannot resolve " + at.string() + " (on the way to worker.data-dir): " +
                        errnoText(errno));
  }
  return checkResolved(resolved, exists, taskUid);
}

Result<kj::Own<WorkerDataDir>> WorkerDataDir::open(const std::string& dir,
                                                   const DataDirHolder& self,
                                                   std::optional<uid_t> taskUid) {
  const std::string where = "worker.data-dir " + dir;
  // Tasks running as the worker's own user (worker.task-allow-root) have its rights anyway.
  if (taskUid && *taskUid == ::geteuid()) taskUid.reset();
  // The directories above first (they decide whether creating it is safe), then the directory.
  if (auto checked = checkDataDirPath(dir, taskUid); !checked.ok()) return checked.error();
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    std::filesystem::create_directories(dir, error);
    if (error) return Error::fatal("cannot create " + where + ": " + error.message());
    // create_directories uses 0777 & ~umask; the directory is the worker's alone.
    if (::chmod(dir.c_str(), 0700) != 0) {
      return Error::fatal("cannot make " + where + " private (chmod 0700): " + errnoText(errno));
    }
    if (auto checked = checkDataDirPath(dir, taskUid); !checked.ok()) return checked.error();
  }

  auto opened = kj::heap<WorkerDataDir>(FactoryKey<WorkerDataDir>(), dir);
  // Owned by `opened` from here: every return below closes what it holds (and so releases the
  // lock) unless it is handed to the result. Resolved once: the path was checked, and nothing
  // under it is reached by path again.
  char resolved[PATH_MAX];
  if (::realpath(dir.c_str(), resolved) == nullptr) {
    return Error::fatal("cannot resolve " + where + ": " + errnoText(errno));
  }
  opened->dirFd_ = ::open(resolved, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (opened->dirFd_ < 0) return Error::fatal("cannot open " + where + ": " + errnoText(errno));
  struct stat info {};
  if (::fstat(opened->dirFd_, &info) != 0) {
    return Error::fatal("cannot check " + where + ": " + errnoText(errno));
  }
  if (auto reason = unsafeDirectoryReason(info.st_uid, info.st_mode, true, taskUid)) {
    return Error::fatal(where + " is unsafe: " + *reason);
  }

  const std::string lockPath = (std::filesystem::path(dir) / kLockFile).string();
  const int fd = ::openat(opened->dirFd_, kLockFile, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                          0600);
  if (fd < 0) return Error::fatal("cannot open the lock file " + lockPath + ": " + errnoText(errno));
  opened->lockFd_ = fd;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) {
      return Error::fatal("cannot lock " + lockPath + ": " + errnoText(errno));
    }
    // The holder wrote its line right after locking; an unreadable line means it is still
    // writing it (or a tool changed the file).
    auto contents = readSmallFile(opened->dirFd_, kLockFile, lockPath, 512);
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
  struct stat idInfo {};
  if (::fstatat(opened->dirFd_, kResourceIdFile, &idInfo, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno != ENOENT) return Error::fatal("cannot read " + idPath + ": " + errnoText(errno));
    opened->resourceId_ = ResourceId::random();
    // By path: the directory was checked above, and no task runs yet.
    auto written = leader::replaceFileDurably(idPath, opened->resourceId_.toHex() + "\n",
                                              "resource id file");
    if (!written.ok()) return written.error();
    opened->created_ = true;
  } else {
    auto contents = readSmallFile(opened->dirFd_, kResourceIdFile, idPath, 4096);
    if (!contents.ok()) return contents.error();
    std::string text = contents.value();
    if (!text.empty() && text.back() == '\n') text.pop_back();
    auto id = ResourceId::fromHex(text);
    if (!id) {
      return Error::fatal(
          "the resource id file " + idPath +
          " is corrupt: it must hold exactly 32 hex digits, but " + shown(contents.value()) +
          "; it is left as it is (restore it, or remove it to start as a new worker)");
    }
    opened->resourceId_ = *id;
  }
  if (auto attempts = opened->openAttempts(taskUid); !attempts.ok()) return attempts.error();
  return opened;
}

Status WorkerDataDir::openAttempts(std::optional<uid_t> taskUid) {
  const std::string path = attemptsPath();
  if (::mkdirat(dirFd_, kAttemptsDir, 0711) != 0 && errno != EEXIST) {
    return Error::fatal("cannot create the attempts directory " + path + ": " + errnoText(errno));
  }
  attemptsFd_ = ::openat(dirFd_, kAttemptsDir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (attemptsFd_ < 0) {
    const int error = errno;
    struct stat info {};
    const bool link = ::fstatat(dirFd_, kAttemptsDir, &info, AT_SYMLINK_NOFOLLOW) == 0 &&
                      S_ISLNK(info.st_mode);
    if (link || error == ELOOP) {
      return Error::fatal("the attempts directory " + path +
                          " is a symbolic link, not a directory; the worker never follows it "
                          "(remove it: the worker creates the directory)");
    }
    if (error == ENOTDIR) {
      return Error::fatal("the attempts directory " + path +
                          " is not a directory; move it away (the worker creates the directory)");
    }
    return Error::fatal("cannot open the attempts directory " + path + ": " + errnoText(error));
  }
  struct stat info {};
  if (::fstat(attemptsFd_, &info) != 0) {
    return Error::fatal("cannot check the attempts directory " + path + ": " + errnoText(errno));
  }
  if (info.st_uid != ::geteuid()) {
    return Error::fatal("the attempts directory " + path + " is owned by uid " +
                        std::to_string(info.st_uid) + ", not by the worker's uid " +
                        std::to_string(::geteuid()) +
                        "; a task may have made it (remove it: the worker creates the directory)");
  }
  // 0711: a task can enter its own attempt's directory but not list the others.
  if ((info.st_mode & 07777) != 0711 && ::fchmod(attemptsFd_, 0711) != 0) {
    return Error::fatal("cannot set the mode of the attempts directory " + path +
                        " (chmod 0711): " + errnoText(errno));
  }
  if (!taskUid || *taskUid == ::geteuid()) return Status();
  // The task user traverses the data directory (o+x) to reach its attempt's directory.
  struct stat dirInfo {};
  if (::fstat(dirFd_, &dirInfo) != 0) {
    return Error::fatal("cannot check worker.data-dir " + path_ + ": " + errnoText(errno));
  }
  if ((dirInfo.st_mode & S_IXOTH) == 0 &&
      ::fchmod(dirFd_, (dirInfo.st_mode & 07777) | S_IXOTH) != 0) {
    return Error::fatal("cannot let the task user traverse worker.data-dir " + path_ +
                        " (chmod o+x): " + errnoText(errno));
  }
  return Status();
}

WorkerDataDir::~WorkerDataDir() {
  for (int fd : {attemptsFd_, lockFd_, dirFd_}) {
    if (fd >= 0) ::close(fd);
  }
}

}  // namespace regent::worker
