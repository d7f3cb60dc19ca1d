// The attempts directory's file work (see attempt_dirs.h).
#include "services/taskexecutor/attempt_dirs.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/errno_text.h"
#include "common/ids.h"

namespace regent::taskexecutor {

std::string checkAttemptsDir(int attemptsFd, const std::string& attemptsDir, bool probeWrite) {
  struct stat held {
  }, atPath{};
  if (::fstat(attemptsFd, &held) != 0) {
    return "cannot check the attempts directory " + attemptsDir + ": " + errnoText(errno);
  }
  if (::lstat(attemptsDir.c_str(), &atPath) != 0 || !S_ISDIR(atPath.st_mode) ||
      atPath.st_dev != held.st_dev || atPath.st_ino != held.st_ino) {
    return "the attempts directory " + attemptsDir +
           " was replaced or removed (it is not the directory the worker opened at start); "
           "restart the worker once it is a directory again";
  }
  if (!probeWrite) return {};
  const std::string probe = ".probe-" + AttemptId::random().toHex();
  if (::mkdirat(attemptsFd, probe.c_str(), 0700) != 0) {
    return "cannot create directories in the attempts directory " + attemptsDir + ": " +
           errnoText(errno);
  }
  ::unlinkat(attemptsFd, probe.c_str(), AT_REMOVEDIR);
  return {};
}

PreparedAttempt prepareAttemptDir(int attemptsFd, const std::string& attemptsDir,
                                  const std::string& name, std::optional<uid_t> uid,
                                  std::optional<gid_t> gid) {
  PreparedAttempt prepared;
  const std::string dir = attemptsDir + "/" + name;
  prepared.problem = checkAttemptsDir(attemptsFd, attemptsDir, false);
  if (!prepared.problem.empty()) return prepared;
  if (::mkdirat(attemptsFd, name.c_str(), 0700) != 0 && errno != EEXIST) {
    prepared.problem = "cannot create the attempt directory " + dir + ": " + errnoText(errno);
    return prepared;
  }
  const int dirFd =
      ::openat(attemptsFd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dirFd < 0) {
    prepared.problem = "cannot open the attempt directory " + dir + ": " + errnoText(errno);
    return prepared;
  }
  kj::AutoCloseFd attemptDir(dirFd);
  kj::AutoCloseFd* files[2] = {&prepared.stdoutFd, &prepared.stderrFd};
  const char* names[2] = {"stdout", "stderr"};
  for (int i = 0; i < 2; ++i) {
    const int fd = ::openat(dirFd, names[i],
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      prepared.problem = "cannot create " + dir + "/" + names[i] + ": " + errnoText(errno);
      return prepared;
    }
    *files[i] = kj::AutoCloseFd(fd);
  }
  if ((uid || gid) && ::fchown(dirFd, uid ? *uid : static_cast<uid_t>(-1),
                               gid ? *gid : static_cast<gid_t>(-1)) != 0) {
    prepared.problem =
        "cannot hand the attempt directory " + dir + " to the task user: " + errnoText(errno);
  }
  return prepared;
}

std::string removeTreeAt(int parentFd, const std::string& name, const std::string& path) {
  if (::unlinkat(parentFd, name.c_str(), 0) == 0 || errno == ENOENT) return {};
  if (errno != EISDIR && errno != EPERM) return "cannot remove " + path + ": " + errnoText(errno);
  const int fd = ::openat(parentFd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? "" : "cannot open " + path + ": " + errnoText(errno);
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    const int error = errno;
    ::close(fd);
    return "cannot list " + path + ": " + errnoText(error);
  }
  std::vector<std::string> entries;
  while (struct dirent* entry = ::readdir(dir)) {
    const std::string entryName = entry->d_name;
    if (entryName != "." && entryName != "..") entries.push_back(entryName);
  }
  std::string problem;
  for (const std::string& entry : entries) {
    std::string failed = removeTreeAt(::dirfd(dir), entry, path + "/" + entry);
    if (problem.empty()) problem = std::move(failed);
  }
  ::closedir(dir);
  if (::unlinkat(parentFd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT && problem.empty()) {
    problem = "cannot remove " + path + ": " + errnoText(errno);
  }
  return problem;
}

std::vector<std::string> listAttemptDirs(int attemptsFd) {
  std::vector<std::pair<struct timespec, std::string>> found;
  const int listed = ::fcntl(attemptsFd, F_DUPFD_CLOEXEC, 0);
  DIR* dir = listed >= 0 ? ::fdopendir(listed) : nullptr;
  if (dir == nullptr) {
    spdlog::warn("cannot list the attempts directory: {}", errnoText(errno));
    if (listed >= 0) ::close(listed);
    return {};
  }
  ::rewinddir(dir);
  while (struct dirent* entry = ::readdir(dir)) {
    struct stat info {};
    if (!AttemptId::fromHex(entry->d_name) ||
        ::fstatat(attemptsFd, entry->d_name, &info, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISDIR(info.st_mode)) {
      continue;
    }
    found.emplace_back(info.st_mtim, entry->d_name);
  }
  ::closedir(dir);
  std::sort(found.begin(), found.end(), [](const auto& x, const auto& y) {
    return std::tie(x.first.tv_sec, x.first.tv_nsec, x.second) <
           std::tie(y.first.tv_sec, y.first.tv_nsec, y.second);
  });
  std::vector<std::string> names;
  for (auto& [modified, name] : found) names.push_back(std::move(name));
  return names;
}

}  // namespace regent::taskexecutor
